"""Every code block of the documentation runs, so no example can rot.

The blocks of README.md, docs/*.md, packages/*/README.md and examples/*/README.md, each
its own test (``test_block[README.md:125]``: the document and the line of its fence),
run against the fake servers of conftest.py. What each language means, and the two
markers, are in docs/codeblocks.py (and docs/plugins.md, for contributors):

- ``python``: a script, in a process of its own (top-level ``await`` on asyncio); one
  that defines ``test_`` functions is a pytest module, run with pytest on asyncio and
  trio; one that starts with ``# path/to/module.py`` is also that module of the document;
  one that implements ollm hooks is loaded as a plugin, strictly.
- ``sh``: each ``ollm`` command runs and must succeed; ``pip install`` names are checked,
  not installed; ``export`` sets a variable (not those that point at servers).
- ``console``: ``$`` lines run and print exactly what is shown.
- ``json``, ``toml``: parsed, and checked as ollm reads them.
- ``<!-- doctest: continue -->`` joins a Python block to the one before it.
- ``<!-- doctest: skip REASON -->`` (a real server, GPUs, another machine): not run, but
  Python compiles and imports what it names (``./ollmw lint`` type-checks it), and each
  ``ollm`` command is read by ollm's parser. The test then reports the block skipped,
  with its reason.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import io
import json
import os
import pty
import re
import shlex
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from docs_world import SERVER_VARIABLES, Sandbox, codeblocks

ROOT = Path(__file__).resolve().parents[2]
RUN_BLOCK = str(Path(__file__).resolve().parent / "run_block.py")
BLOCKS = codeblocks.collect()
RUN = [block for block in BLOCKS if block.language not in ("text", "yaml")]
# The programs a shell block may run here; any other needs a skip marker.
RUNNABLE = frozenset(("ollm", "cat", "echo"))
# ollmw's own commands; any other is an ollm command.
OLLMW = frozenset(("test", "lint", "docs", "bench", "mutate"))
_OPERATORS = frozenset(("|", "&&", "||", ";", "&"))
_REDIRECTS = frozenset(("<", ">", ">>"))
_ANYIO_BOTH = """import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request):
    return request.param
"""


def test_every_block_names_its_language_and_a_known_marker() -> None:
    assert [problem for block in BLOCKS for problem in codeblocks.problems(block)] == []


@pytest.mark.ollm_real_providers
@pytest.mark.parametrize("block", RUN, ids=[block.where for block in RUN])
def test_block(block: codeblocks.Block, ran: Callable[[codeblocks.Block], None]) -> None:
    if block.marker == "skip":
        check_without_running(block)
        pytest.skip(f"{block.where}: {block.reason}")
    ran(block)


@pytest.fixture(scope="session")
def ran(
    request: pytest.FixtureRequest,
    sandbox_for: Callable[[Path], Sandbox],
    pytest_reports: Callable[[Path], dict[str, str]],
) -> Iterator[Callable[[codeblocks.Block], None]]:
    """The selected blocks, run at the start of the session: each document's in order, two
    documents at a time (most of the time goes to starting processes). The function raises
    what running a block raised."""
    selected: dict[Path, list[codeblocks.Block]] = {}
    for item in request.session.items:
        block = getattr(item, "callspec", None) and item.callspec.params.get("block")
        if isinstance(block, codeblocks.Block) and block.marker != "skip":
            selected.setdefault(block.document, []).append(block)

    def run_document(blocks: list[codeblocks.Block]) -> dict[codeblocks.Block, BaseException]:
        failures: dict[codeblocks.Block, BaseException] = {}
        for block in blocks:
            try:
                run_block(block, sandbox_for(block.document), pytest_reports)
            except BaseException as failure:  # pytest.fail's is not an Exception
                failures[block] = failure
        return failures

    with ThreadPoolExecutor(max_workers=2) as pool:
        running = {document: pool.submit(run_document, b) for document, b in selected.items()}

        def outcome(block: codeblocks.Block) -> None:
            failure = running[block.document].result().get(block)
            if failure is not None:
                raise failure

        yield outcome


def run_block(
    block: codeblocks.Block,
    sandbox: Sandbox,
    pytest_reports: Callable[[Path], dict[str, str]],
) -> None:
    if block.language == "python" and block.is_pytest_module:
        outcome = pytest_reports(block.document).get(stem(block), "not collected")
        assert outcome == "passed", f"{block.where}:\n{outcome}"
    elif block.language == "python":
        run_script(block, sandbox)
    elif block.language == "sh":
        run_shell(block, sandbox)
    elif block.language == "console":
        run_console(block, sandbox)
    else:
        check_data(block, sandbox)


def stem(block: codeblocks.Block) -> str:
    """The name of the block's script, or of its pytest module."""
    return f"test_{block.slug}"


# -- Python ---------------------------------------------------------------------------


def run_script(block: codeblocks.Block, sandbox: Sandbox) -> None:
    script = sandbox.root / "blocks" / f"{stem(block)}.py"
    chain = codeblocks.script(block, BLOCKS)
    script.write_text(codeblocks.source(chain, sandbox.servers.replacements), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, RUN_BLOCK, str(script), str(block.document)],
        cwd=sandbox.root,
        env=sandbox.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"{block.where} failed:\n{done.stdout}{done.stderr}"


@pytest.fixture(scope="session")
def pytest_reports(sandbox_for: Callable[[Path], Sandbox]) -> Callable[[Path], dict[str, str]]:
    """A document's pytest blocks, run with pytest at once: each module's outcome."""
    reports: dict[Path, dict[str, str]] = {}

    def report(document: Path) -> dict[str, str]:
        if document not in reports:
            reports[document] = _run_pytest(document, sandbox_for(document))
        return reports[document]

    return report


def _run_pytest(document: Path, sandbox: Sandbox) -> dict[str, str]:
    folder = sandbox.root / "tests"
    folder.mkdir(exist_ok=True)
    (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (folder / "conftest.py").write_text(_ANYIO_BOTH, encoding="utf-8")
    tests = [b for b in BLOCKS if b.document == document and b.is_pytest_module]
    for block in tests:
        chain = codeblocks.script(block, BLOCKS)
        text = codeblocks.source(chain, sandbox.servers.replacements)
        (folder / f"{stem(block)}.py").write_text(text, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=report.xml"],
        cwd=folder,
        env=sandbox.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    outcomes: dict[str, list[str]] = {stem(block): [] for block in tests}
    for case in ElementTree.parse(folder / "report.xml").iter("testcase"):
        module = case.get("classname") or case.get("name") or ""
        name = next((m for m in outcomes if module.split(".")[0] == m), None)
        if name is None:
            continue
        failed = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        outcomes[name].append(failed[0] if failed else "passed")
    return {
        name: "passed" if results and set(results) == {"passed"} else done.stdout[-4000:]
        for name, results in outcomes.items()
    }


# -- shell ----------------------------------------------------------------------------


def shell_commands(text: str) -> list[str]:
    """The commands of a shell block: continued lines joined, comments and blanks out."""
    lines = text.replace("\\\n", " ").split("\n")
    return [line for line in lines if shlex.split(line, comments=True)]


def simple_commands(command: str) -> list[list[str]]:
    """The words of each simple command of a line, variable assignments left out."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    found: list[list[str]] = [[]]
    redirected = False
    for token in lexer:
        if token in _OPERATORS:
            found.append([])
        elif token in _REDIRECTS:
            redirected = True
        elif redirected:
            redirected = False
        elif found[-1] or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", token):
            found[-1].append(token)
    return [words for words in found if words]


def check_pip(words: list[str], where: str) -> None:
    """``pip install`` names distributions of this repository (nothing is installed)."""
    assert words[:2] == ["pip", "install"], f"{where}: {' '.join(words)}"
    names = {
        tomllib.loads(path.read_text(encoding="utf-8"))["project"]["name"]
        for path in [
            *ROOT.glob("packages/*/pyproject.toml"),
            *ROOT.glob("examples/*/pyproject.toml"),
        ]
    }
    for word in words[2:]:
        if word.startswith("-"):
            continue
        target = re.sub(r"\[.*\]$", "", word)
        if "/" in target or target.startswith("."):
            assert (ROOT / target / "pyproject.toml").exists(), f"{where}: no {target}"
        else:
            assert re.split(r"[<>=!~]", target)[0] in names, f"{where}: {target} is not ours"


def check_ollm_command(words: list[str], where: str) -> None:
    """An ``ollm`` (or ``./ollmw``) command is one that ollm's parser accepts."""
    if words[0].endswith("ollmw") and words[1:2] and words[1] in OLLMW:
        return
    from ollm.cli.parser import build_parser

    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            build_parser(words[1:]).parse_args(words[1:])
    except SystemExit as exit:
        raise AssertionError(f"{where}: {shlex.join(words)}: {errors.getvalue()}") from exit


def run_shell(block: codeblocks.Block, sandbox: Sandbox) -> None:
    env = dict(sandbox.env)
    for command in shell_commands(block.text):
        where = f"{block.where}: {command.strip()}"
        simple = simple_commands(command)
        programs = [words[0] for words in simple]
        if programs == ["export"]:
            for assignment in simple[0][1:]:
                name, _, value = assignment.partition("=")
                if name not in SERVER_VARIABLES:
                    env[name] = value
        elif set(programs) == {"pip"}:
            for words in simple:
                check_pip(words, where)
        elif set(programs) <= RUNNABLE:
            run_command(command, env, sandbox.root, where)
        else:
            unknown = sorted(set(programs) - RUNNABLE)
            pytest.fail(
                f"{where}: runs {', '.join(unknown)}, which this test cannot: "
                "give the block a <!-- doctest: skip REASON --> marker"
            )


def run_command(command: str, env: dict[str, str], cwd: Path, where: str) -> str:
    """Run one command as a reader would: at a terminal, where they type /exit."""
    terminal, standard_input = pty.openpty()
    try:
        os.write(terminal, b"/exit\n")
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command],
            cwd=cwd,
            env=env,
            stdin=standard_input,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        os.close(standard_input)
        os.close(terminal)
    assert done.returncode == 0, f"{where}: exit {done.returncode}\n{done.stdout}{done.stderr}"
    return done.stdout


def run_console(block: codeblocks.Block, sandbox: Sandbox) -> None:
    """``$`` lines run; the lines under each are exactly what it prints."""
    steps: list[tuple[str, list[str]]] = []
    for line in block.text.split("\n"):
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line.rstrip())
    assert steps, f"{block.where}: no $ line"
    for command, expected in steps:
        where = f"{block.where}: {command}"
        programs = {words[0] for words in simple_commands(command)}
        assert programs <= RUNNABLE, f"{where}: runs {programs - RUNNABLE}"
        printed = run_command(command, sandbox.env, sandbox.root, where)
        shown = "\n".join(expected).rstrip("\n")
        assert "\n".join(line.rstrip() for line in printed.split("\n")).rstrip("\n") == shown


# -- data -----------------------------------------------------------------------------


def check_data(block: codeblocks.Block, sandbox: Sandbox) -> None:
    if block.language == "json":
        data = json.loads(block.text)
        if "mcpServers" in data or "servers" in data:
            import ollm_mcp

            assert ollm_mcp.load_servers(data)
        return
    table = tomllib.loads(block.text)
    if "rules" in table or "default" in table:  # an approval policy file
        import ollm

        ollm.ApprovalPolicy.from_toml(block.text, block.where)
    if codeblocks.profiles(block.text) and "ollm-anthropic" in block.where:
        import ollm_anthropic

        path = sandbox.root / f"{stem(block)}.toml"
        path.write_text(block.text, encoding="utf-8")
        found = ollm_anthropic.load_profiles({"OLLM_ANTHROPIC_PROFILES": str(path)})
        assert set(found) == set(table)
    elif codeblocks.profiles(block.text):
        import ollm_openai

        path = sandbox.root / f"{stem(block)}.toml"
        path.write_text(block.text, encoding="utf-8")
        assert set(ollm_openai.load_profiles({"OLLM_OPENAI_PROFILES": str(path)})) == set(table)
    if codeblocks.pools(block.text):
        import ollm_pool

        path = sandbox.root / f"{stem(block)}.toml"
        path.write_text(block.text, encoding="utf-8")
        assert set(ollm_pool.load_pools({"OLLM_POOLS": str(path)})) == set(table)
    plugins = table.get("project", {}).get("entry-points", {}).get("ollm.plugins", {})
    modules = {
        b.module_path.removesuffix(".py").replace("/", ".")
        for b in BLOCKS
        if b.document == block.document and b.module_path
    }
    for name, target in plugins.items():
        assert target in modules, f"{block.where}: {name} = {target}: no block is that module"


# -- skipped blocks -------------------------------------------------------------------


def check_without_running(block: codeblocks.Block) -> None:
    """A skipped block still compiles, imports what it names, and parses as a command."""
    if block.language == "python":
        chain = codeblocks.script(block, BLOCKS)
        text = codeblocks.source(chain)
        tree = ast.parse(text, str(block.document))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    _importable(alias.name, None, block.where)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    _importable(node.module, alias.name, block.where)
    elif block.language == "sh":
        done = subprocess.run(["bash", "-n", "-c", block.text], capture_output=True, text=True)
        assert done.returncode == 0, f"{block.where}: {done.stderr}"
        for command in shell_commands(block.text):
            for words in simple_commands(command):
                if words[0] in ("ollm", "./ollmw"):
                    check_ollm_command(words, f"{block.where}: {command.strip()}")
                elif words[:2] == ["pip", "install"]:
                    check_pip(words, f"{block.where}: {command.strip()}")


def _importable(module: str, name: str | None, where: str) -> None:
    if module.split(".")[0] in codeblocks.INVENTED:
        return
    imported = importlib.import_module(module)
    if name is not None and name != "*":
        assert hasattr(imported, name) or importlib.util.find_spec(f"{module}.{name}"), (
            f"{where}: {module} has no {name}"
        )
