"""``ollm models``, ``ollm plugins``, ``ollm tools``, ``--help`` and ``--version``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable

import msgspec
import pytest
from cli_helpers import OLLM, ollm_env

import ollm
from ollm_testutils import FakeOllamaServer


def test_models_list_show_rm_and_ps(run_ollm, server: FakeOllamaServer) -> None:  # type: ignore[no-untyped-def]
    server.add_model("qwen3", ["completion", "tools", "thinking"], context_length=40960)
    listed = run_ollm("models", "list")
    assert listed.returncode == 0, listed.stderr
    # FAMILY, PARAMS, QUANT: what the server says of some models (the fake's details).
    assert listed.stdout.splitlines()[0].split() == [
        *("NAME", "SIZE", "MODIFIED", "FAMILY", "PARAMS", "QUANT", "CAPABILITIES")
    ]
    assert "llama3.2:latest" in listed.stdout
    assert "tools, thinking" in listed.stdout

    as_json = run_ollm("models", "--json", "list")
    models = msgspec.json.decode(as_json.stdout, type=list[ollm.ModelInfo])
    assert {m.name for m in models} == {"llama3.2:latest", "qwen3:latest"}
    after = run_ollm("models", "list", "--json")  # the flag after the action works too
    assert after.returncode == 0, after.stderr
    assert msgspec.json.decode(after.stdout, type=list[ollm.ModelInfo]) == models

    shown = run_ollm("models", "show", "qwen3")
    assert shown.returncode == 0, shown.stderr
    assert "thinking" in shown.stdout
    assert "40,960" in shown.stdout

    removed = run_ollm("models", "rm", "qwen3")
    assert (removed.returncode, removed.stdout) == (0, "Deleted qwen3\n")
    assert "qwen3" not in run_ollm("models", "list").stdout

    missing = run_ollm("models", "rm", "qwen3")
    assert missing.returncode == 1
    assert missing.stderr.startswith("error[MODEL_NOT_FOUND]: ")

    ps = run_ollm("models", "ps")
    assert ps.returncode == 0, ps.stderr


def test_models_pull_shows_progress(  # type: ignore[no-untyped-def]
    run_ollm, server: FakeOllamaServer
) -> None:
    server.add_model("tinyllama", local=False, size=3_000_000)
    result = run_ollm("models", "pull", "tinyllama")
    assert result.returncode == 0, result.stderr
    assert "pulling manifest" in result.stderr
    assert "Pulled tinyllama." in result.stderr
    assert "tinyllama" in run_ollm("models", "list").stdout
    # Off a terminal: one line per layer and per status, not one per progress message.
    lines = result.stderr.splitlines()
    assert len(lines) == len(set(lines)), lines
    layers = [line for line in lines if line.startswith("pulling ") and "(" in line]
    assert layers
    assert len(lines) <= 12, lines


def test_a_model_removed_can_be_pulled_again(run_ollm, server: FakeOllamaServer) -> None:  # type: ignore[no-untyped-def]
    assert run_ollm("models", "rm", "llama3.2").returncode == 0
    assert "llama3.2:latest" not in run_ollm("models", "list").stdout
    pulled = run_ollm("models", "pull", "llama3.2")
    assert pulled.returncode == 0, pulled.stderr
    assert "llama3.2:latest" in run_ollm("models", "list").stdout


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
@pytest.mark.parametrize(("columns", "rows"), [(0, 0), (0, 24), (80, 0)])
def test_models_pull_in_a_terminal_that_reports_no_size_still_shows_progress(
    server: FakeOllamaServer, columns: int, rows: int
) -> None:
    """Some pseudo-terminals (containers, editors' shells) say 0 columns or 0 rows."""
    import fcntl
    import pty
    import struct
    import termios

    server.add_model("tinyllama", local=False, size=3_000_000)
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    process = subprocess.Popen(
        [OLLM, "models", "pull", "tinyllama"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=follower,
        env=ollm_env(OLLAMA_HOST=server.url, TERM="xterm"),
    )
    os.close(follower)
    shown = b""
    try:
        while chunk := _read_pty(leader):
            shown += chunk
    finally:
        os.close(leader)
    assert process.wait(timeout=60) == 0, shown
    text = shown.decode(errors="replace")
    assert "Pulled tinyllama." in text
    bars = [line for line in text.replace("\r", "\n").splitlines() if "100%|" in line]
    assert len(bars) == 2, text  # one full bar per layer
    assert all("2.86M/2.86M" in bar or "1.44k/1.44k" in bar for bar in bars)
    assert all(bar.rstrip().endswith("B/s]") for bar in bars), bars  # none cut short


def _read_pty(fd: int) -> bytes:
    try:
        return os.read(fd, 4096)
    except OSError:  # EIO: every writer closed the terminal
        return b""


def test_models_pull_survives_odd_lines_in_the_progress_stream(  # type: ignore[no-untyped-def]
    run_ollm, server: FakeOllamaServer
) -> None:
    server.add_model("tinyllama", local=False, size=3_000_000)
    server.pull_extra_lines = [
        b"<html>not json</html>",
        b'{"status":"pulling 0123456789ab","total":"big"}',
        b'{"status":"pulling 0123456789ab","digest":"sha256:0123","total":100,"completed":500}',
        b"{}",
    ]
    result = run_ollm("models", "pull", "tinyllama")
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("warning: skipped a pull progress line") == 2
    assert "Pulled tinyllama." in result.stderr
    assert "tinyllama" in run_ollm("models", "list").stdout


def test_models_pull_of_an_unknown_model_fails_with_a_message(run_ollm) -> None:  # type: ignore[no-untyped-def]
    result = run_ollm("models", "pull", "no-such-model")
    assert result.returncode == 1
    assert result.stderr.count("error[MODEL_NOT_FOUND]:") == 1
    assert "Traceback" not in result.stderr


def test_models_needs_an_action(run_ollm) -> None:  # type: ignore[no-untyped-def]
    result = run_ollm("models")
    assert result.returncode == 2


def test_plugins_and_tools_as_json(run_ollm) -> None:  # type: ignore[no-untyped-def]
    plugins = json.loads(run_ollm("plugins", "--json").stdout)
    by_name = {p["name"]: p for p in plugins}
    for name in ("ollama", "react", "testutils", "toolbox"):
        assert by_name[name]["status"] == "loaded"
        assert by_name[name]["version"] == "0.1.0"
    assert by_name["ollama"]["distribution"] == "ollm-ollama"
    assert by_name["toolbox"]["hooks"] == ["ollm_tools"]

    tools = json.loads(run_ollm("tools", "--json").stdout)
    calculate = next(t for t in tools if t["name"] == "calculate")
    assert calculate["pack"] == "toolbox"
    assert calculate["parameters"]["required"] == ["expression"]


def test_version(run_ollm) -> None:  # type: ignore[no-untyped-def]
    result = run_ollm("--version")
    assert (result.returncode, result.stdout) == (0, f"ollm {ollm.__version__}\n")


def test_help_and_plugins_import_no_http_client() -> None:
    """Nor the MCP SDK and what it brings (pydantic, starlette...)."""
    heavy = ("httpx", "httpx2", "mcp", "pydantic", "starlette", "jsonschema")
    code = textwrap.dedent(
        f"""
        import contextlib, io, json, sys
        from ollm.cli import main
        heavy = lambda: [m for m in {heavy!r} if m in sys.modules]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            help_code = main(["--help"])
        after_help = heavy()
        with contextlib.redirect_stdout(io.StringIO()):
            plugins_code = main(["plugins"])
        print(json.dumps([help_code, after_help, plugins_code, heavy()]))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=ollm_env(), check=True
    ).stdout
    assert json.loads(out) == [0, [], 0, []]


BROKEN = "raise RuntimeError('this plugin is broken')\n"


@pytest.fixture
def broken_plugin_path(plugin_path: Callable[[str, str], str]) -> str:
    """A directory holding a distribution whose plugin fails at import."""
    return plugin_path("broken", BROKEN)


def test_a_broken_plugin_never_stops_help_or_plugins(broken_plugin_path: str) -> None:
    env = ollm_env(PYTHONPATH=broken_plugin_path)
    help_ = subprocess.run([OLLM, "--help"], capture_output=True, text=True, env=env)
    assert help_.returncode == 0
    assert "usage: ollm" in help_.stdout
    plugins = subprocess.run([OLLM, "plugins"], capture_output=True, text=True, env=env)
    assert plugins.returncode == 0, plugins.stderr
    line = next(x for x in plugins.stdout.splitlines() if x.startswith("broken"))
    assert "failed" in line
    assert "ollm-broken 1.0" in line
    assert "RuntimeError: this plugin is broken" in line
    # In strict mode, `ollm plugins` still lists everything, then fails: CI sees it.
    strict_env = {**env, "OLLM_STRICT_PLUGINS": "1"}
    strict = subprocess.run([OLLM, "plugins"], capture_output=True, text=True, env=strict_env)
    assert strict.returncode == 1
    assert "broken" in strict.stdout
    assert "1 plugin(s) failed to load (broken)" in strict.stderr
    as_json = subprocess.run(
        [OLLM, "plugins", "--json"], capture_output=True, text=True, env=strict_env
    )
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)
    # --debug shows where it failed.
    debug = subprocess.run([OLLM, "--debug", "plugins"], capture_output=True, text=True, env=env)
    assert debug.returncode == 0
    assert "Traceback" in debug.stderr
    assert "this plugin is broken" in debug.stderr
    # A chat still works: the broken plugin is skipped with one warning line.
    chat = subprocess.run(
        [OLLM, "chat", "-p", "echo", "still here"],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert chat.returncode == 0, chat.stderr
    assert chat.stdout == "still here\n"
    assert chat.stderr.count("warning:") == 1


@pytest.mark.parametrize("value", ["-5", "2.5", "hot"])
def test_a_temperature_outside_0_to_2_is_a_usage_error(value: str) -> None:
    done = subprocess.run(
        [OLLM, "chat", "-p", "echo", "--temperature", value, "hi"],
        capture_output=True,
        text=True,
        env=ollm_env(),
        timeout=60,
    )
    assert done.returncode == 2
    assert "--temperature" in done.stderr
    assert "Traceback" not in done.stderr


def test_models_ps_shows_a_model_kept_forever(  # type: ignore[no-untyped-def]
    run_ollm, server: FakeOllamaServer
) -> None:
    model = server.store.find("llama3.2")
    assert model is not None
    server.store.load(model, -1, 8192)  # keep_alive -1: Ollama says about year 2318
    ps = run_ollm("models", "ps")
    assert ps.returncode == 0, ps.stderr
    row = ps.stdout.splitlines()[1].split()
    assert row[0] == "llama3.2:latest"
    assert row[-1] == "forever"
    server.store.load(model, 120, 8192)
    soon = run_ollm("models", "ps").stdout.splitlines()[1].split()[-1]
    assert soon.count(":") == 2  # a time today
