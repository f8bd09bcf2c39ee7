"""One path for middleware: ``chat()``, ``run()``, ``SyncChatClient`` (both ways) and
``ollm chat`` (text and ``--json``) make the same middleware calls in the same order, on
the fake Ollama, OpenAI-compatible and Gemini servers, on asyncio and on trio.

The middleware (``recording_middleware.Recorder``) writes each call it gets to a file;
in the ``ollm`` child process it is the installed plugin ``recorder``, named with
``--middleware``. A chat calls the tool ``lookup`` once, then answers.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import recording_middleware
import typed_fakes
from cli_helpers import OLLM, installed_plugin, ollm_env

import ollm
from ollm_testutils import FakeOllamaServer, OllamaReply

SUPPORT = Path(recording_middleware.__file__).parent
PROVIDERS = typed_fakes.PROVIDERS
WAYS = ("chat", "run", "sync-chat", "sync-run", "cli", "cli-json")


class Fake(typed_fakes.Fake):
    """One fake server, scripted for this test's chat: ``lookup`` once, then an answer."""

    def script_chat(self) -> None:
        self.script(self.call("lookup", {"city": "Paris"}), self.text(["Sunny ", "there."]))


@pytest.fixture(params=PROVIDERS)
def fake(request: pytest.FixtureRequest) -> Iterator[Fake]:
    made = Fake(str(request.param))
    with made.server:
        yield made


@pytest.fixture
def installed(tmp_path: Path) -> str:
    """A PYTHONPATH on which ``recording_middleware`` is the plugin ``recorder``."""
    return installed_plugin(tmp_path, "recorder", "recording_middleware", SUPPORT)


def read(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def through_python(fake: Fake, way: str, backend: str, record: Path) -> None:
    def build() -> ollm.ChatClient:
        return ollm.ChatClient(
            ollm.Registries(),
            provider=fake.provider(),
            model=fake.model,
            tools=[recording_middleware.lookup],
            middleware=[recording_middleware.Recorder(str(record))],
        )

    if way.startswith("sync"):
        with ollm.SyncChatClient(build(), backend=backend) as client:
            if way == "sync-run":
                assert client.run("Weather in Paris?").ok
            else:
                events = list(client.chat("Weather in Paris?"))
                assert events[-1] == ollm.FinishEvent("stop", events[-1].usage)
        return

    async def go() -> None:
        async with build() as client:
            if way == "run":
                result = await client.run("Weather in Paris?")
                assert result.ok, result
            else:
                async with client.chat("Weather in Paris?") as stream:
                    events = [event async for event in stream]
                assert isinstance(events[-1], ollm.FinishEvent)
                assert events[-1].reason == "stop"

    anyio.run(go, backend=backend)


def through_the_cli(fake: Fake, way: str, backend: str, record: Path, path: str) -> None:
    args = ["chat", "-p", fake.name, "-m", fake.model, "-t", "lookup", "--middleware", "recorder"]
    if way == "cli-json":
        args.append("--json")
    done = subprocess.run(
        [OLLM, "--backend", backend, *args, "Weather in Paris?"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        env=ollm_env(PYTHONPATH=path, RECORD_TO=str(record), **fake.env()),
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_every_way_of_chatting_makes_the_same_middleware_calls(
    fake: Fake, backend: str, installed: str, tmp_path: Path
) -> None:
    # Once first, so that each way finds the server as the others do (a model loaded).
    fake.script_chat()
    through_python(fake, "run", backend, tmp_path / "warm-up.jsonl")
    seen: dict[str, list[Any]] = {}
    for way in WAYS:
        record = tmp_path / f"{way}.jsonl"
        fake.script_chat()
        if way.startswith("cli"):
            through_the_cli(fake, way, backend, record, installed)
        else:
            through_python(fake, way, backend, record)
        seen[way] = read(record)
    expected = seen["chat"]
    # What the recorder saw, in order: the whole chat, the tool call between two requests.
    steps = [entry[0] for entry in expected]
    assert steps[0] == "message"  # the prompt, as it enters the history
    assert steps.count("request") == 2
    assert steps.index("before") < steps.index("after") < len(steps) - steps[::-1].index("request")
    assert ["before", "lookup", {"city": "Paris"}] in expected
    assert ["after", "lookup", "Paris: sunny"] in expected
    assert expected[-2:] == [["event", "finish", "stop"], ["finish", "stop"]]
    for way in WAYS[1:]:
        assert seen[way] == expected, way


def test_an_installed_middleware_is_not_run_unless_named(installed: str, tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    with FakeOllamaServer() as server:
        server.script(OllamaReply("hi"), OllamaReply("hi"))
        env = ollm_env(PYTHONPATH=installed, RECORD_TO=str(record), OLLAMA_HOST=server.url)
        listed = subprocess.run(
            [OLLM, "plugins"], capture_output=True, text=True, timeout=120, env=env
        )
        assert "middleware: recorder" in listed.stdout
        plain = subprocess.run(
            [OLLM, "chat", "-m", "llama3.2", "hello"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert plain.returncode == 0, plain.stderr
        assert not record.exists()
        named = subprocess.run(
            [OLLM, "chat", "-m", "llama3.2", "hello"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            env={**env, "OLLM_MIDDLEWARE": "recorder"},
        )
        assert named.returncode == 0, named.stderr
        assert record.exists()


def test_a_middleware_that_is_not_installed_is_named_in_the_error(
    installed: str,
) -> None:
    done = subprocess.run(
        [OLLM, "chat", "-p", "echo", "--middleware", "recordr", "hello"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        env=ollm_env(PYTHONPATH=installed, OLLM_BLOCK_PLUGINS="otel"),  # the list as it was
    )
    assert done.returncode == 1
    assert (
        "error[PLUGIN_ERROR]: no middleware is named 'recordr'. "
        "Installed: redact, audit, select-tools, recorder" in (done.stderr)
    )
