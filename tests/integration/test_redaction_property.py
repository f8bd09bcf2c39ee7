"""Property: with ``redact``, no 8-character piece of a key survives in any sink.

Random keys of every built-in kind, written by a careful model: cut at random points into
random pieces, among minified-JSON filler (no whitespace), behind a pattern's prefix that
would swallow a key's start, in its text, its thinking, its streamed call arguments, a
notice, its partial and final typed output, an error; in the user's prompt and the system
prompt; in a tool's result. ``redact``, ``audit`` and ``otel`` (content captured) run in
a random order. Checked: every event (and the texts, thinking and argument pieces joined,
as a reader of ``--json`` joins them), the history, what the model was sent, the audit
file and every span attribute. (The conversation log's system prompt is the CLI's:
tests/cli/test_redact_cli.py.)
"""

from __future__ import annotations

import itertools
import json
import string
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from otel_helpers import Telemetry

import ollm
from ollm.middleware import Audit, Redact
from ollm_testutils import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio

KEYISH = string.ascii_uppercase + string.digits  # in every pattern's alphabet
# Filler: minified JSON, and characters that go on a key (``-``, ``_``); no capitals or
# digits, so that no 8 characters of a key can come from the filler.
FILLER = st.text(alphabet='abcdefghz-_:,."{}[]', max_size=60)
# Written just before a key: the start of another pattern's match, which could swallow
# the key's own start.
PREFIXES = st.sampled_from(["", "xoxb-abcdefghij", "sk-", "AIza", "eyJ", "ghp_", "github_pat_"])


def keyish(low: int, high: int) -> st.SearchStrategy[str]:
    return st.text(alphabet=KEYISH, min_size=low, max_size=high)


KEYS = st.one_of(
    keyish(20, 60).map(lambda b: "sk-proj-" + b),
    keyish(35, 35).map(lambda b: "AIza" + b),
    keyish(36, 40).map(lambda b: "ghp_" + b),
    keyish(40, 82).map(lambda b: "github_pat_" + b),
    keyish(20, 30).map(lambda b: "glpat-" + b),
    keyish(20, 50).map(lambda b: "xoxb-" + b),
    keyish(16, 16).map(lambda b: "AKIA" + b),
    keyish(34, 34).map(lambda b: "hf_" + b),
    st.tuples(keyish(17, 40), keyish(10, 300), keyish(20, 60)).map(
        lambda p: f"eyJ{p[0]}.eyJ{p[1]}.{p[2]}"
    ),
)


@st.composite
def placed(draw: st.DrawFn) -> tuple[str, str]:
    """A key among filler: (the text, the key)."""
    key = draw(KEYS)
    return draw(FILLER) + draw(PREFIXES) + key + draw(FILLER), key


@st.composite
def cut(draw: st.DrawFn, text: str) -> list[str]:
    """``text`` in pieces at random points (one character to all of it)."""
    points = draw(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=12, unique=True))
    bounds = [0, *sorted(p for p in points if 0 < p < len(text)), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


class Note(msgspec.Struct):
    note: str


def store(value: str) -> str:
    """Store a value.

    Args:
        value: What to store.
    """
    return f"stored {value}"


def sink_texts(
    events: list[ollm.ChatEvent], client: ollm.ChatClient, provider: ScriptedProvider
) -> list[str]:
    texts = [ollm.encode_event(e).decode() for e in events]
    joined: dict[Any, str] = defaultdict(str)
    for event in events:
        if isinstance(event, (ollm.TextEvent, ollm.ThinkingEvent)):
            joined[type(event)] += event.text
        elif isinstance(event, ollm.ToolCallDeltaEvent):
            joined[event.index] += event.arguments_delta
    texts += joined.values()
    texts.append(client.conversation.to_json().decode())
    for request in provider.requests:
        texts.append(request.system_prompt or "")
        texts.append(msgspec.json.encode(request.messages).decode())
    return texts


@given(
    st.data(),
    st.lists(placed(), min_size=9, max_size=9),
    st.permutations(["redact", "audit", "otel"]),
)
async def test_property_no_piece_of_a_key_survives_in_any_sink(
    anyio_backend: str, data: st.DataObject, placements: list[tuple[str, str]], order: list[str]
) -> None:
    keys = [key for _, key in placements]
    thinking, text, args, notice, user, system, output, error, result = (t for t, _ in placements)
    arguments = json.dumps({"value": args}, separators=(",", ":"))
    streams = [
        [ollm.ThinkingEvent(p) for p in data.draw(cut(thinking))],
        [ollm.TextEvent(p) for p in data.draw(cut(text))],
        [
            ollm.ToolCallDeltaEvent(
                0, arguments_delta=p, **({"id": "c1", "name": "store"} if not i else {})
            )  # type: ignore[arg-type]
            for i, p in enumerate(data.draw(cut(arguments)))
        ],
        [ollm.NoticeEvent(f"notice {notice}")],
    ]
    tags = data.draw(st.permutations([i for i, s in enumerate(streams) for _ in s]))
    first: list[ollm.ProviderEvent] = [streams[i].pop(0) for i in tags]  # type: ignore[misc]
    first += [
        ollm.ToolCallEvent(ollm.ToolCall("c1", "store", {"value": args})),
        ollm.FinishEvent("stop"),
    ]
    answer = json.dumps({"note": output}, separators=(",", ":"))
    provider = ScriptedProvider(
        Reply(events=first),
        Reply(f"Stored it. {result}"),
        Reply([*data.draw(cut(answer))]),
        Reply(error=ollm.ErrorEvent(f"bad answer: {error}", "BAD_RESPONSE")),
    )
    telemetry = Telemetry()
    with tempfile.TemporaryDirectory() as folder:
        audit = Path(folder) / "audit.jsonl"
        made = {
            "redact": Redact(),
            "audit": Audit(audit),
            "otel": telemetry.otel(capture_content=True),
        }
        client = ollm.ChatClient(
            ollm.Registries(),
            provider=provider,
            model="scripted",
            tools=[store],
            system=f"Be brief. {system}",
            middleware=[made[name] for name in order],
            tool_call_deltas=True,
        )
        async with client:
            events = [e async for e in client.chat(f"hello {user}")]
            events += [e async for e in client.chat("a note", output=Note)]
            events += [e async for e in client.chat("again")]
        sinks = sink_texts(events, client, provider)
        sinks.append(audit.read_text())
    telemetry.tracer_provider.shutdown()
    sinks += [
        str(value) for span in telemetry.spans() for value in (span.attributes or {}).values()
    ]
    telemetry.meter_provider.shutdown()

    everything = "\x00".join(sinks)
    for key in keys:
        for at in range(len(key) - 7):
            if sum(c in KEYISH for c in key[at : at + 8]) < 3:
                continue  # a pattern's own prefix ("github_p"), which PREFIXES write too
            assert key[at : at + 8] not in everything, (
                key,
                [sink for sink in sinks if key[at : at + 8] in sink],
            )
    # Nothing was lost but the keys: each chat ran to its end.
    reasons = [e.reason for e in events if isinstance(e, ollm.FinishEvent)]
    assert reasons == ["stop", "stop", "error"], events
    assert any(isinstance(e, ollm.OutputEvent) for e in events)
    assert any(isinstance(e, ollm.PartialOutputEvent) for e in events) or len(answer) < 20
    assert "[REDACTED]" in "".join(e.text for e in events if isinstance(e, ollm.TextEvent))
