"""ollmw installs what a command needs: a chat gets no MCP stack until it uses MCP."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import re
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def ollmw() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("ollmw", str(ROOT / "ollmw"))
    spec = importlib.util.spec_from_loader("ollmw", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def workspace_dependencies(distribution: str) -> set[str]:
    """The distributions of the workspace that ``distribution`` depends on."""
    project = tomllib.loads((ROOT / "packages" / distribution / "pyproject.toml").read_text())
    names = {re.split(r"[<>=!~;\[ ]", dep)[0] for dep in project["project"]["dependencies"]}
    return {name for name in names if (ROOT / "packages" / name).is_dir()}


def test_a_chat_installs_every_distribution_but_mcp_and_what_they_need() -> None:
    chat = set(ollmw().packages_for(["chat", "-p", "echo", "hi"], {}))
    assert "ollm-mcp" not in chat
    # The providers, ReAct, and the echo provider (ollm-testutils) are there...
    assert {"ollm-ollama", "ollm-openai", "ollm-gemini", "ollm-react", "ollm-testutils"} <= chat
    # ...with everything they depend on.
    for distribution in chat:
        assert workspace_dependencies(distribution) <= chat, distribution


@pytest.mark.parametrize(
    ("args", "environ"),
    [
        (["chat", "--mcp", "servers.json", "-t", "git_*", "hi"], {}),
        (["tools", "--mcp=servers.json"], {}),
        (["chat", "--mc", "servers.json", "hi"], {}),  # argparse's abbreviation
        (["chat", "--toolset", "mcp=servers.json", "hi"], {}),
        (["tools", "--toolset=mcp=servers.json"], {}),
        (["chat", "-m", "qwen3", "hi"], {"OLLM_MCP_CONFIG": "servers.json"}),
    ],
)
def test_a_command_that_uses_mcp_servers_installs_ollm_mcp(
    args: list[str], environ: dict[str, str]
) -> None:
    assert "ollm-mcp" in ollmw().packages_for(args, environ)


@pytest.mark.parametrize(
    "args",
    [["chat", "-t", "calculate", "--mcpx"], ["chat", "--toolset", "notes=mcp.db", "hi"], []],
)
def test_a_command_that_does_not_use_mcp_leaves_it_out(args: list[str]) -> None:
    assert "ollm-mcp" not in ollmw().packages_for(args, {"OLLM_MCP_CONFIG": ""})


@pytest.mark.parametrize(
    ("args", "environ"),
    [
        (["chat", "-p", "llamacpp", "-m", "gemma-3-270m", "hi"], {}),
        (["chat", "-pllamacpp", "hi"], {}),
        (["models", "--provider=llamacpp", "list"], {}),
        (["models", "--prov", "llamacpp", "list"], {}),  # argparse's abbreviation
        (["chat", "-m", "gemma-3-270m", "hi"], {"OLLM_PROVIDER": "llamacpp"}),
    ],
)
def test_a_command_that_uses_the_llamacpp_provider_installs_it(
    args: list[str], environ: dict[str, str]
) -> None:
    assert "ollm-llamacpp" in ollmw().packages_for(args, environ)


@pytest.mark.parametrize(
    "args", [["chat", "-p", "ollama", "llamacpp"], ["chat", "-m", "llamacpp", "hi"], []]
)
def test_a_command_that_does_not_use_llamacpp_leaves_its_build_out(args: list[str]) -> None:
    assert "ollm-llamacpp" not in ollmw().packages_for(args, {"OLLM_PROVIDER": "ollama"})


def test_llama_cpp_python_is_built_first_with_portable_cmake_options() -> None:
    module = ollmw()
    compiled = module.compiled_requirements(["ollm-core", "ollm-llamacpp"])
    assert [r.split(">")[0] for r in compiled] == ["llama-cpp-python"]
    env = module.compile_env(compiled)
    assert "-DGGML_NATIVE=OFF" in env["CMAKE_ARGS"]


@pytest.fixture
def nothing_listens() -> str:
    """An OLLAMA_HOST where nobody listens (the connection is refused)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


def test_a_chat_with_nothing_chosen_and_no_ollama_installs_the_builtin_model(
    nothing_listens: str,
) -> None:
    wanted = ollmw().packages_for(
        ["chat", "Why is the sky blue?"], {"OLLAMA_HOST": nothing_listens}
    )
    assert "ollm-llamacpp[default-model]" in wanted


@pytest.mark.parametrize(
    ("args", "environ"),
    [
        (["chat", "-p", "echo", "hi"], {}),
        (["chat", "--provider=openai", "hi"], {}),
        (["chat", "-m", "llama3.2", "hi"], {}),
        (["chat", "--model", "llama3.2", "hi"], {}),
        (["chat", "-mllama3.2", "hi"], {}),
        (["chat", "hi"], {"OLLM_PROVIDER": "echo"}),
        (["chat", "hi"], {"OLLM_MODEL": "llama3.2"}),
        (["chat", "-c", "and then?"], {}),
        (["models", "list"], {}),
    ],
)
def test_a_chosen_provider_or_model_never_brings_the_builtin_model(
    nothing_listens: str, args: list[str], environ: dict[str, str]
) -> None:
    wanted = ollmw().packages_for(args, {"OLLAMA_HOST": nothing_listens, **environ})
    assert "ollm-llamacpp[default-model]" not in wanted


def test_ollama_answering_means_no_builtin_model() -> None:
    import socket

    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        host = f"http://127.0.0.1:{listening.getsockname()[1]}"
        wanted = ollmw().packages_for(["chat", "hi"], {"OLLAMA_HOST": host})
    assert "ollm-llamacpp[default-model]" not in wanted


def test_a_setup_that_did_not_finish_is_said_and_started_over(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = ollmw()
    module.VENV = tmp_path
    module.begin_setup(["test"], ["ollm-llamacpp[default-model]"])
    assert capsys.readouterr().err == ""  # the first: nothing to say
    # Interrupted there (the stamp never written): the next run says so, and starts over.
    module.begin_setup([], ["ollm-llamacpp[default-model]"])
    err = capsys.readouterr().err
    assert err == (
        "ollmw: the last set-up (test, ollm-llamacpp[default-model]) did not finish "
        "(interrupted, or a step failed): starting it over\n"
    )
    module.SETTING_UP().unlink()
    module.begin_setup([], ["ollm-core"])
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    "args",
    [[], ["tests/core", "-x", "-q"], ["-k", "pool"], ["-m", "not realmodel"]],
)
def test_the_tests_run_on_every_core_by_default(
    args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    assert ollmw().test_arguments(args) == ["-n", "auto", "--dist", "loadgroup", *args]


def test_in_ci_the_slowest_tests_are_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "1")
    assert "--durations=20" in ollmw().test_arguments([])
    assert "--durations=20" not in ollmw().test_arguments(["-n", "1"])


@pytest.mark.parametrize(
    "args",
    [
        ["-n", "4"],
        ["-n4"],
        ["-n", "0", "tests/core"],
        ["--numprocesses=2"],
        ["--dist", "loadfile"],
        ["-p", "no:xdist"],
        ["-pno:xdist"],
        ["tests/core", "--pdb"],
        ["-s", "tests/cli"],
        ["--collect-only", "-q"],
    ],
)
def test_a_user_who_says_how_to_run_the_tests_is_obeyed(args: list[str]) -> None:
    assert ollmw().test_arguments(args) == args


def test_a_second_ollmw_waits_for_the_first_set_up_and_does_not_start_it_over(
    tmp_path: Path,
) -> None:
    """.ci/run runs ``ollmw lint`` and ``ollmw docs`` side by side: the second waits for
    the first's set-up under the lock, then finds .venv has what it needs."""
    import threading

    module = ollmw()
    module.VENV = tmp_path / ".venv"
    python = module.venv_python()
    python.parent.mkdir(parents=True)
    python.touch()
    installs: list[list[str]] = []
    module.run = lambda command, quiet=True, env=None: installs.append(command)
    asked, asked_again = threading.Event(), threading.Event()
    read_stamp = module.read_stamp

    def counted() -> tuple[str, set[str], set[str]]:
        (asked_again if asked.is_set() else asked).set()
        return read_stamp()

    module.read_stamp = counted
    with module.setup_lock():  # the first ollmw, setting up
        second = threading.Thread(target=module.ensure_environment, args=(["test"], []))
        second.start()
        assert asked.wait(60)  # the second found .venv not set up yet
        # It waits for the lock before it looks again (a second ollmw that did not would
        # be seen here, given a second; one that waits passes whatever the machine's speed).
        assert not asked_again.wait(1.0)
        stamp = f"{module.fingerprint()}\ntest,lint\n\n"
        (module.VENV / ".ollmw-stamp").write_text(stamp)
    second.join(60)
    assert not second.is_alive()
    assert installs == []  # it found the first one's set-up, and installed nothing


@pytest.mark.parametrize(
    ("given", "kept_bytecode"),
    [
        ({"PYTHONDONTWRITEBYTECODE": "1"}, True),
        ({"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": "/mine"}, False),
        ({}, False),
    ],
)
def test_compiled_modules_are_kept_in_the_venv_where_the_environment_says_not_to_write_them(
    given: dict[str, str], kept_bytecode: bool
) -> None:
    """Without compiled modules every Python a test starts compiles ollm again and pytest
    rewrites every test module (collection took 20 s, 9 s with them); they go to .venv,
    not beside the sources, which PYTHONDONTWRITEBYTECODE keeps clean."""
    module = ollmw()
    env = module.venv_environment({"PATH": "/usr/bin", **given})
    if kept_bytecode:
        assert "PYTHONDONTWRITEBYTECODE" not in env
        assert env["PYTHONPYCACHEPREFIX"] == str(module.VENV / "pycache")
    else:
        assert {k: env.get(k) for k in given} == given  # the user's own settings stand
        assert env.get("PYTHONPYCACHEPREFIX") == given.get("PYTHONPYCACHEPREFIX")
    assert env["PATH"].endswith(os.pathsep + "/usr/bin")
    assert env["VIRTUAL_ENV"] == str(module.VENV)


def test_pip_installs_without_compiling_every_module_up_front() -> None:
    """Compiling every module of every package took a third of the test dependencies'
    install (55 s against 39 s here); Python compiles what a command imports, once."""
    command = ollmw().pip_install(["pytest"])
    assert command[-1] == "pytest"
    assert "--no-compile" in command


def test_checks_side_by_side_print_whole_in_order_and_fail_if_either_fails(
    capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The lint's two mypy runs go side by side (50 s -> 30 s from a cold cache); each
    one's output is printed whole, in the order given, and a failure of either fails the
    lint. The first waits for the second to have run (so they ran at the same time, and
    the first ends last); alone, it gives up after a minute and fails."""
    import sys

    module = ollmw()
    flag = tmp_path / "second-ran"
    first = [
        sys.executable,
        "-c",
        "import os, sys, time\n"
        "for _ in range(6000):\n"
        f"    if os.path.exists({str(flag)!r}): break\n"
        "    time.sleep(0.01)\n"
        "else: sys.exit(4)\n"
        "print('first'); print('1')",
    ]
    second = [
        sys.executable,
        "-c",
        f"import sys; open({str(flag)!r}, 'w').close(); print('second', file=sys.stderr); "
        "sys.exit(2)",
    ]
    assert module.run_side_by_side(first, second) == 2
    assert capfd.readouterr().out == "first\n1\nsecond\n"
