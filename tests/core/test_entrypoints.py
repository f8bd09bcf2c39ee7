"""Entry points remembered between runs: found again when a distribution comes or goes,
and read without importlib.metadata when nothing changed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = """
import json, sys
from ollm.plugins import discover
registries = discover()
print(json.dumps({
    "tools": sorted(registries.tools.list()),
    "metadata": "importlib.metadata" in sys.modules,
}))
"""


def add_plugin(site: Path, name: str) -> None:
    """A distribution with an ollm.plugins entry point, as pip would install it."""
    (site / f"{name}.py").write_text(
        "import ollm\n\n"
        f"def {name}_tool(x: int) -> int:\n"
        '    """Double it."""\n'
        "    return 2 * x\n\n"
        "@ollm.hookimpl\n"
        "def ollm_tools():\n"
        f"    return [{name}_tool]\n"
    )
    info = site / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[ollm.plugins]\n{name} = {name}\n")


def run(site: Path, cache: Path, **env: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        timeout=60,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(cache),
            "XDG_CACHE_HOME": str(cache),
            "PYTHONPATH": str(site),
            "PYTHONDONTWRITEBYTECODE": "1",
            **env,
        },
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


@pytest.fixture
def site(tmp_path: Path) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    return folder


def test_a_distribution_installed_or_removed_is_seen_at_once(site: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    add_plugin(site, "alpha")
    first = run(site, cache)
    assert "alpha_tool" in first["tools"]  # type: ignore[operator]
    assert first["metadata"] is True  # read afresh, then remembered

    again = run(site, cache)
    assert again["tools"] == first["tools"]
    assert again["metadata"] is False  # from the cache: importlib.metadata never imported

    add_plugin(site, "beta")
    grown = run(site, cache)
    assert {"alpha_tool", "beta_tool"} <= set(grown["tools"])  # type: ignore[arg-type]

    for path in sorted((site / "alpha-1.0.dist-info").iterdir()):
        path.unlink()
    (site / "alpha-1.0.dist-info").rmdir()
    shrunk = run(site, cache)
    assert "alpha_tool" not in shrunk["tools"]  # type: ignore[operator]
    assert "beta_tool" in shrunk["tools"]  # type: ignore[operator]


def test_a_damaged_cache_is_read_afresh(site: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    add_plugin(site, "gamma")
    run(site, cache)
    for file in (cache / "ollm").glob("entry-points-*.json"):
        file.write_text("{not json")
    assert "gamma_tool" in run(site, cache)["tools"]  # type: ignore[operator]


def test_the_cache_can_be_turned_off(site: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    add_plugin(site, "delta")
    result = run(site, cache, OLLM_PLUGIN_CACHE="off")
    assert "delta_tool" in result["tools"]  # type: ignore[operator]
    assert not list(cache.glob("ollm/entry-points-*.json"))
