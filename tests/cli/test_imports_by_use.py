"""Imports paid by use: a chat imports typed output's modules only when it asks for typed
output, and the compactors only when it compacts (as the middleware, see
test_middleware_command.py). Each case runs in a fresh interpreter, which is the only
place where "not imported" can be seen."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from cli_helpers import ollm_env

# Typed output's modules (the partial-JSON reader is the largest import of a chat), and
# the compactors with the view they keep.
OUTPUT = ("ollm.output", "ollm.runtime.output")
COMPACTION = ("ollm.runtime.compaction",)
WATCHED = OUTPUT + COMPACTION

REPORT = f"""
import sys, json
watched = {WATCHED!r}
loaded = sorted(
    m for m in sys.modules for w in watched if m == w or m.startswith(w + ".")
)
print(json.dumps(loaded))
"""

LOADED_BY_THE_CLI = f"""
import contextlib, io, sys
from ollm.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    code = main(sys.argv[1:])
assert code == 0, (code, out.getvalue())
{REPORT}
"""

LOADED_BY_A_CHAT = f"""
import sys
import anyio
import msgspec
import ollm
from ollm_testutils.mock import Reply, ScriptedProvider


class Answer(msgspec.Struct):
    a: int


async def main(output, compact):
    provider = ScriptedProvider(Reply('{{"a": 1}}'))
    async with ollm.ChatClient(ollm.Registries(), provider=provider, compact=compact) as client:
        if output:
            assert await client.run("a?", output=Answer) == Answer(1)
        else:
            assert (await client.run("a?")).text == '{{"a": 1}}'


anyio.run(main, sys.argv[1] == "output", sys.argv[2], backend=sys.argv[3])
{REPORT}
"""


def loaded(script: str, *args: str) -> set[str]:
    """The watched modules that ``script`` (run with ``args``) imported."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        env=ollm_env(OLLM_LOGS="off"),
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def of(prefixes: tuple[str, ...], modules: set[str]) -> set[str]:
    return {m for m in modules for p in prefixes if m == p or m.startswith(p + ".")}


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_python_chat_imports_typed_output_and_compaction_only_when_asked(backend: str) -> None:
    assert loaded(LOADED_BY_A_CHAT, "plain", "off", backend) == set()
    typed = loaded(LOADED_BY_A_CHAT, "output", "off", backend)
    assert {"ollm.output.partial", "ollm.runtime.output"} <= typed
    assert of(COMPACTION, typed) == set()
    compacting = loaded(LOADED_BY_A_CHAT, "plain", "trim", backend)
    assert compacting == {"ollm.runtime.compaction"}


def test_ollm_chat_imports_typed_output_only_with_schema_and_compaction_only_on() -> None:
    assert loaded(LOADED_BY_THE_CLI, "chat", "-p", "echo", "--compact", "off", "hi") == set()
    # ollm chat compacts by default (--compact auto): the compactors, not typed output.
    assert loaded(LOADED_BY_THE_CLI, "chat", "-p", "echo", "hi") == set(COMPACTION)
    reply = json.dumps({"text": json.dumps({"a": 1})})
    typed = loaded(
        LOADED_BY_THE_CLI, "chat", "-p", "echo", "--compact", "off", "--schema", "a int", reply
    )
    assert {"ollm.output.partial", "ollm.runtime.output"} <= typed
    assert of(COMPACTION, typed) == set()
