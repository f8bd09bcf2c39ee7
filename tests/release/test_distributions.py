"""What would go to the package index: every distribution's wheel and sdist, built here
with no download, pass ``twine check --strict``, ship the license and ``py.typed``, say
their license, Python versions and project URLs, and link only absolutely; and
``pip install ollm-core ollm-ollama`` from those wheels, in a fresh environment, gives
an ``ollm`` that works, or says what to install."""

from __future__ import annotations

import email.parser
import importlib.metadata
import os
import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import ollm_env
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ollm_testutils import FakeOllamaServer

ROOT = Path(__file__).resolve().parents[2]
REPOSITORY = "https://github.com/ollm-project/ollm"
DISTRIBUTIONS = sorted(p.parent.name for p in ROOT.glob("packages/*/pyproject.toml"))
_BUILD = """
import os, sys
import hatchling.build
for folder in sys.argv[2:]:
    os.chdir(folder)
    hatchling.build.build_wheel(sys.argv[1])
    hatchling.build.build_sdist(sys.argv[1])
"""


def project(distribution: str) -> dict[str, Any]:
    path = ROOT / "packages" / distribution / "pyproject.toml"
    return dict(tomllib.loads(path.read_text())["project"])


def module_of(distribution: str) -> str:
    return {"ollm-core": "ollm"}.get(distribution, distribution.replace("-", "_"))


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every distribution's wheel and sdist, built with hatchling from this checkout."""
    folder = tmp_path_factory.mktemp("dist")
    folders = [str(ROOT / "packages" / name) for name in DISTRIBUTIONS]
    subprocess.run([sys.executable, "-c", _BUILD, str(folder), *folders], check=True)
    return folder


def wheel(dist: Path, distribution: str) -> Path:
    (found,) = dist.glob(f"{distribution.replace('-', '_')}-*.whl")
    return found


def sdist(dist: Path, distribution: str) -> Path:
    (found,) = dist.glob(f"{distribution.replace('-', '_')}-*.tar.gz")
    return found


def metadata(dist: Path, distribution: str) -> email.message.Message:
    with zipfile.ZipFile(wheel(dist, distribution)) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(archive.read(name).decode())


def test_twine_accepts_every_wheel_and_sdist(dist: Path) -> None:
    files = sorted(str(path) for path in dist.iterdir())
    assert len(files) == 2 * len(DISTRIBUTIONS)
    done = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *files],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASSED") == len(files), done.stdout


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_the_wheel_and_the_sdist_ship_the_license_and_py_typed(
    dist: Path, distribution: str
) -> None:
    license_text = (ROOT / "LICENSE").read_text()
    assert "MIT License" in license_text
    module = module_of(distribution)
    with zipfile.ZipFile(wheel(dist, distribution)) as archive:
        names = archive.namelist()
        assert f"{module}/py.typed" in names
        (licence,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert archive.read(licence).decode() == license_text
    with tarfile.open(sdist(dist, distribution)) as archive:
        names = archive.getnames()
        top = names[0].split("/")[0]
        assert f"{top}/src/{module}/py.typed" in names
        member = archive.extractfile(f"{top}/LICENSE")
        assert member is not None
        assert member.read().decode() == license_text


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_the_metadata_says_the_license_python_versions_typing_and_urls(
    dist: Path, distribution: str
) -> None:
    meta = metadata(dist, distribution)
    # The license as an SPDX expression (PEP 639): a "License ::" classifier beside it is
    # deprecated, and the package index refuses uploads that have both.
    assert meta["License-Expression"] == "MIT"
    assert meta.get_all("License-File") == ["LICENSE"]
    classifiers = meta.get_all("Classifier") or []
    assert not [c for c in classifiers if c.startswith("License ::")]
    for version in ("3.11", "3.12", "3.13", "3.14"):
        assert f"Programming Language :: Python :: {version}" in classifiers
    assert "Typing :: Typed" in classifiers
    assert meta["Requires-Python"] == ">=3.11"
    urls = dict(url.split(", ", 1) for url in meta.get_all("Project-URL") or [])
    assert set(urls) == {"Homepage", "Documentation", "Repository", "Issues"}
    assert all(url.startswith(REPOSITORY) for url in urls.values())
    assert urls["Documentation"] == f"{REPOSITORY}/tree/main/packages/{distribution}#readme"


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_the_readme_on_the_index_links_only_absolutely(dist: Path, distribution: str) -> None:
    description = metadata(dist, distribution).get_payload()
    assert isinstance(description, str)
    assert description.startswith(f"# {distribution}\n")
    relative = re.findall(r"\]\((?!https?://|mailto:|#)([^)\s]+)\)", description)
    assert relative == []


# -- pip install from the wheels, in a fresh environment -------------------------------


def _dependencies(distributions: list[str]) -> list[importlib.metadata.Distribution]:
    """The third-party distributions these need, as installed here (markers applied)."""
    ours = {canonicalize_name(name) for name in DISTRIBUTIONS}
    todo = [r for name in distributions for r in project(name)["dependencies"]]
    found: dict[str, importlib.metadata.Distribution] = {}
    while todo:
        requirement = Requirement(todo.pop())
        name = canonicalize_name(requirement.name)
        if name in ours or name in found:
            continue
        if requirement.marker and not requirement.marker.evaluate({"extra": ""}):
            continue
        found[name] = importlib.metadata.distribution(name)
        todo += found[name].requires or []
    return list(found.values())


def _offline_site(folder: Path, distributions: list[str]) -> Path:
    """A folder of links to the third-party packages installed here that ``distributions``
    need, so pip finds them satisfied without an index; none of ollm's own is there."""
    folder.mkdir()
    for distribution in _dependencies(distributions):
        for file in distribution.files or []:
            top = file.parts[0]
            if top == ".." or (folder / top).exists():
                continue
            (folder / top).symlink_to(Path(str(distribution.locate_file(top))))
    return folder


@pytest.fixture(scope="module")
def installed(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[[list[str]], Path]:
    """A fresh virtual environment with ``pip install --no-index --find-links DIST NAMES``
    done in it: the folder of its programs."""

    def install(names: list[str]) -> Path:
        root = tmp_path_factory.mktemp("venv")
        venv = root / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        python = venv / "bin" / "python"
        (site,) = venv.glob("lib/python*/site-packages")
        everything = DISTRIBUTIONS  # whatever pip may pull in from the wheels
        (site / "dependencies.pth").write_text(f"{_offline_site(root / 'deps', everything)}\n")
        pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet"]
        pip += ["--disable-pip-version-check", "--no-index", "--find-links", str(dist)]
        done = subprocess.run([*pip, *names], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        return venv / "bin"

    return install


def ollm(bin: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bin / "ollm"), *args],
        capture_output=True,
        text=True,
        env={**ollm_env(**env), "PATH": f"{bin}{os.pathsep}{os.environ['PATH']}"},
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


@pytest.fixture(scope="module")
def core_and_ollama(installed: Callable[[list[str]], Path]) -> Path:
    return installed(["ollm-core", "ollm-ollama"])


def test_core_and_ollama_from_the_wheels_chat_with_ollama(core_and_ollama: Path) -> None:
    assert ollm(core_and_ollama, "--help").returncode == 0
    plugins = ollm(core_and_ollama, "plugins")
    assert plugins.returncode == 0, plugins.stderr
    assert "ollama" in plugins.stdout
    assert "testutils" not in plugins.stdout
    with FakeOllamaServer() as server:
        chat = ollm(core_and_ollama, "chat", "-m", "llama3.2", "hi", OLLAMA_HOST=server.host)
    assert chat.returncode == 0, chat.stderr
    assert chat.stdout.strip()


def test_the_echo_provider_without_ollm_testutils_is_one_clear_line(
    core_and_ollama: Path,
) -> None:
    echo = ollm(core_and_ollama, "chat", "-p", "echo", "hello")
    assert echo.returncode != 0
    assert "Traceback" not in echo.stderr
    assert len(echo.stderr.strip().splitlines()) == 1, echo.stderr
    assert "echo" in echo.stderr


def test_the_echo_provider_without_ollm_testutils_says_what_to_install(
    core_and_ollama: Path,
) -> None:
    echo = ollm(core_and_ollama, "chat", "-p", "echo", "hello")
    assert "ollm-testutils" in echo.stderr


def test_with_ollm_testutils_the_readmes_commands_need_no_server(
    installed: Callable[[list[str]], Path],
) -> None:
    bin = installed(["ollm-core", "ollm-ollama", "ollm-testutils"])
    hello = ollm(bin, "chat", "-p", "echo", "hello")
    assert (hello.returncode, hello.stdout.strip()) == (0, "hello"), hello.stderr
    call = '{"tool_calls": [{"name": "calculate", "arguments": {"expression": "6*7"}}]}'
    tools = ollm(bin, "chat", "-p", "echo", "-t", "calculate", call)
    assert tools.returncode == 0, tools.stderr
    assert "42" in tools.stdout
