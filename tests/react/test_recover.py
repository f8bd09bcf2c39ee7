"""Tool calls that native-tool models write as text, recovered: each format, every chunking,
through ChatClient and FakeOllamaServer; replies with no call come out unchanged; a
provider stream with no ``aclose``, and ids past the ten-thousandth recovered call."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ollm
from ollm_ollama import OllamaProvider
from ollm_react import RecoveringStrategy, TextCallScanner
from ollm_react.plugin import ollm_tool_strategies
from ollm_testutils import FakeOllamaServer, OllamaReply, Reply, ScriptedProvider

from .conftest import chunkings, weather_schema

pytestmark = pytest.mark.anyio

PARIS = {"city": "Paris"}

TRANSCRIPTS: dict[str, str] = {
    "hermes": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
    "hermes after prose": (
        'Let me check.\n<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}'
        "</tool_call>"
    ),
    "hermes without its closing tag": (
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}'
    ),
    "llama python_tag": (
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}<|eom_id|>'
    ),
    "llama bare json": '{"name": "get_weather", "parameters": {"city": "Paris"}}',
    "mistral list": '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}]',
    "mistral args": '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}',
    "openai-style string arguments": (
        '{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}'
    ),
    "a fence that is the whole reply": (
        '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```\n'
    ),
    "a list of calls": '[{"name": "get_weather", "arguments": {"city": "Paris"}}]',
}
PROSE_BEFORE = {"hermes after prose": "Let me check.\n"}

NOT_CALLS: dict[str, str] = {
    "json data": '{"city": "Paris", "temperature": 18}',
    "json in prose": 'The call would be {"name": "get_weather", "arguments": {"city": "Paris"}}.',
    "a call shown in a code block": (
        'To call it, write:\n```json\n<tool_call>{"name": "get_weather", "arguments": '
        '{"city": "Paris"}}</tool_call>\n```\nand wait.'
    ),
    "a tool that was not offered": (
        '<tool_call>{"name": "delete_files", "arguments": {}}</tool_call>'
    ),
    "arguments that do not fit": (
        '<tool_call>{"name": "get_weather", "arguments": {"town": "Paris"}}</tool_call>'
    ),
    "a bare call followed by prose": (
        '{"name": "get_weather", "arguments": {"city": "Paris"}} is what I would send.'
    ),
    "markdown links and comparisons": "[the docs](https://x) say a < b, and `x` is [1, 2].",
    "a code block that is the whole reply": "```python\nprint({'name': 1})\n```",
    "brackets": "[1, 2, 3]",
}


async def through_strategy(chunks: list[str]) -> list[ollm.ProviderEvent]:
    request = ollm.ProviderRequest(
        model="qwen", messages=(ollm.Message.user("weather?"),), tools=(weather_schema(),)
    )
    provider = ScriptedProvider(Reply(chunks))
    return [e async for e in RecoveringStrategy().stream(provider, request)]


def text_of(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, ollm.TextEvent))


@pytest.mark.parametrize("name", TRANSCRIPTS)
async def test_each_format_is_recovered_under_every_chunking(name: str) -> None:
    for chunks in chunkings(TRANSCRIPTS[name]):
        events = await through_strategy(chunks)
        calls = [e.call for e in events if isinstance(e, ollm.ToolCallEvent)]
        assert [(c.name, c.args) for c in calls] == [("get_weather", PARIS)], chunks
        assert text_of(events) == PROSE_BEFORE.get(name, ""), chunks
        notices = [e for e in events if isinstance(e, ollm.NoticeEvent)]
        assert [n.kind for n in notices] == ["recovered"]
        assert isinstance(events[-1], ollm.FinishEvent)


@pytest.mark.parametrize("name", NOT_CALLS)
async def test_what_is_not_a_valid_call_stays_text_under_every_chunking(name: str) -> None:
    for chunks in chunkings(NOT_CALLS[name]):
        events = await through_strategy(chunks)
        assert not [e for e in events if isinstance(e, ollm.ToolCallEvent)], chunks
        assert text_of(events) == NOT_CALLS[name], chunks


prose = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=80).filter(
    lambda t: not t.lstrip().startswith(("{", "[", "`"))
)


@given(prose, st.lists(st.integers(1, 80), max_size=10))
def test_a_reply_with_no_call_comes_out_unchanged_and_on_time(text: str, cuts: list[int]) -> None:
    """Same text; after each chunk, all of it shown but a possible tag's first characters."""
    points = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    chunks = [text[a:b] for a, b in itertools.pairwise(points) if b > a]
    scanner = TextCallScanner((weather_schema(),))
    fed, shown = "", ""
    for chunk in chunks:
        fed += chunk
        shown += "".join(out[1] for out in scanner.feed(chunk) if out[0] == "text")
        assert fed.startswith(shown)
        held = fed[len(shown) :]
        if "<tool_call>" not in fed and "<|python_tag|>" not in fed and "[TOOL_CALLS]" not in fed:
            assert len(held) < len("<|python_tag|>"), (fed, shown)
    shown += "".join(out[1] for out in scanner.end() if out[0] == "text")
    if not any(t in text for t in ("<tool_call>", "<|python_tag|>", "[TOOL_CALLS]")):
        assert shown == text


@given(prose)
def test_plain_prose_is_never_held_at_all(text: str) -> None:
    text = text.replace("<", "").replace("[", "").replace("`", "")
    scanner = TextCallScanner((weather_schema(),))
    for char in text:
        assert scanner.feed(char) == ([("text", char)] if char else [])


@ollm.tool
def get_weather(city: str) -> str:
    """The weather of a city.

    Args:
        city: The city.
    """
    return f"Sunny in {city}."


def registries_with_recovery() -> ollm.Registries:
    registries = ollm.Registries()
    for spec in ollm_tool_strategies():
        registries.strategies.register(spec)
    return registries


@pytest.fixture
async def provider(fake_ollama: FakeOllamaServer) -> AsyncIterator[OllamaProvider]:
    async with OllamaProvider(fake_ollama.url, environ={}) as built:
        yield built


@pytest.mark.parametrize("name", TRANSCRIPTS)
async def test_each_format_runs_through_chat_client_and_fake_ollama(
    fake_ollama: FakeOllamaServer, provider: OllamaProvider, name: str
) -> None:
    text = TRANSCRIPTS[name]
    pieces = [text[i : i + 7] for i in range(0, len(text), 7)]
    fake_ollama.script(OllamaReply(pieces), OllamaReply(["Sunny in Paris."]))
    client = ollm.ChatClient(
        registries_with_recovery(), provider=provider, model="llama3.2", tools=[get_weather]
    )
    events = [e async for e in client.chat("Weather in Paris?")]
    results = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert [r.result for r in results] == ["Sunny in Paris."]
    assert text_of(events) == PROSE_BEFORE.get(name, "") + "Sunny in Paris."
    assert any(isinstance(e, ollm.NoticeEvent) and e.kind == "recovered" for e in events)
    # The history holds a native call, so the model sees its call as a call next time.
    sent = fake_ollama.chat_requests[1].json["messages"]
    assert sent[1]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert "get_weather" not in sent[1]["content"]


async def test_the_switch_turns_recovery_off(
    fake_ollama: FakeOllamaServer, provider: OllamaProvider
) -> None:
    reply = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
    fake_ollama.script(OllamaReply([reply]))
    client = ollm.ChatClient(
        registries_with_recovery(),
        provider=provider,
        model="llama3.2",
        tools=[get_weather],
        recover_text_tool_calls=False,
    )
    events = [e async for e in client.chat("Weather in Paris?")]
    assert text_of(events) == reply
    assert not [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]


async def test_without_tools_nothing_is_read_from_the_text(
    fake_ollama: FakeOllamaServer, provider: OllamaProvider
) -> None:
    reply = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
    fake_ollama.script(OllamaReply([reply]))
    client = ollm.ChatClient(registries_with_recovery(), provider=provider, model="llama3.2")
    assert text_of([e async for e in client.chat("hi")]) == reply


async def test_a_model_that_refuses_tools_still_switches_to_a_text_strategy(
    fake_ollama: FakeOllamaServer, provider: OllamaProvider
) -> None:
    fake_ollama.add_model("tiny", capabilities=["completion"])
    # Its capabilities name json-react (Ollama keeps each step to its schema): a step.
    step = {"thought": "I know.", "action": {"final_answer": "Sunny."}}
    fake_ollama.script(OllamaReply([json.dumps(step)]))
    client = ollm.ChatClient(
        registries_with_recovery(), provider=provider, model="tiny", tools=[get_weather]
    )
    events = [e async for e in client.chat("Weather?")]
    assert text_of(events) == "Sunny."
    assert "tools" not in fake_ollama.chat_requests[0].json


# -- details the mutation run asked about ----------------------------------------------


def scan(chunks: list[str]) -> tuple[str, list[list[tuple[str, dict[str, Any]]]]]:
    scanner = TextCallScanner((weather_schema(),))
    outputs = [out for chunk in chunks for out in scanner.feed(chunk)] + scanner.end()
    text = "".join(out[1] for out in outputs if out[0] == "text")  # type: ignore[misc]
    calls = [out[1] for out in outputs if out[0] == "calls"]
    return text, calls  # type: ignore[return-value]


CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
OSLO = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'


@pytest.mark.parametrize(
    "reply",
    [
        f"<tool_call>{CALL}</tool_call>\n<tool_call>{OSLO}</tool_call>",
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_weather{"city": "Oslo"}',
        f"[TOOL_CALLS][{CALL}, {OSLO}]",
        f"<|python_tag|>{CALL}; {OSLO}",
        f"[{CALL}, {OSLO}]",
    ],
)
def test_parallel_calls_in_every_format(reply: str) -> None:
    for chunks in chunkings(reply):
        text, calls = scan(chunks)
        found = [c for batch in calls for c in batch]
        assert found == [("get_weather", PARIS), ("get_weather", {"city": "Oslo"})], chunks
        assert text.strip() == "", chunks


@pytest.mark.parametrize(
    "shape",
    [
        '{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}',
        '{"tool": "get_weather", "tool_input": {"city": "Paris"}}',
        '{"name": "get_weather", "parameters": "{\\"city\\": \\"Paris\\"}"}',
        '{"id": "c1", "name": "get_weather", "arguments": {"city": "Paris"}}',
    ],
)
def test_the_call_shapes_models_write(shape: str) -> None:
    assert scan([shape])[1] == [[("get_weather", PARIS)]]


def test_extra_keys_are_a_call_in_tags_but_an_answer_as_bare_json() -> None:
    extra = '{"name": "get_weather", "arguments": {"city": "Paris"}, "confidence": 0.9}'
    assert scan([f"<tool_call>{extra}</tool_call>"])[1] == [[("get_weather", PARIS)]]
    assert scan([extra]) == (extra, [])


def test_json_that_is_not_a_call_is_released_at_its_first_key() -> None:
    scanner = TextCallScanner((weather_schema(),))
    assert scanner.feed('{"city": "Par') == [("text", '{"city": "Par')]
    scanner = TextCallScanner((weather_schema(),))
    assert scanner.feed("[1, 2") == [("text", "[1, 2")]
    scanner = TextCallScanner((weather_schema(),))
    assert scanner.feed('{"na') == []  # may still become {"name": ...}


def test_a_tag_after_a_closed_code_block_is_read_and_one_inside_is_not() -> None:
    shown = f"```\n<tool_call>{OSLO}</tool_call>\n```\nNow:\n"
    text, calls = scan([shown + f"<tool_call>{CALL}</tool_call>"])
    assert text == shown
    assert calls == [[("get_weather", PARIS)]]


def test_text_held_as_a_possible_call_is_released_when_it_grows_too_long() -> None:
    from ollm_react._recover import MAX_HELD

    scanner = TextCallScanner((weather_schema(),))
    opened = "<tool_call>" + "x" * (MAX_HELD + 10)
    released = scanner.feed(opened)
    assert released == [("text", opened)]  # before the reply ends
    scanner = TextCallScanner((weather_schema(),))
    bare = '{"name": "' + "y" * (MAX_HELD + 10)
    assert scanner.feed(bare) == [("text", bare)]


async def test_prose_events_pass_on_as_they_are_and_leaving_early_closes_the_stream() -> None:
    request = ollm.ProviderRequest(
        model="qwen", messages=(ollm.Message.user("hi"),), tools=(weather_schema(),)
    )
    provider = ScriptedProvider(Reply(["Hello", " there", ", friend."]))
    stream = RecoveringStrategy().stream(provider, request)
    seen = []
    async for event in stream:
        seen.append(event)
        if len(seen) == 2:
            break
    await stream.aclose()  # type: ignore[attr-defined]
    assert [type(e) for e in seen] == [ollm.TextEvent, ollm.TextEvent]
    assert provider.open_streams == 0


async def test_recovered_ids_go_on_from_the_calls_the_history_holds() -> None:
    earlier = ollm.ToolCall("call_a", "get_weather", {"city": "Rome"})
    history = (
        ollm.Message.user("Rome?"),
        ollm.Message.assistant("", tool_calls=(earlier,)),
        ollm.Message.tool("Sunny", call=earlier),
        ollm.Message.user("Paris and Oslo?"),
    )
    request = ollm.ProviderRequest(model="qwen", messages=history, tools=(weather_schema(),))
    provider = ScriptedProvider(Reply([f"[{CALL}, {OSLO}]"]))
    events = [e async for e in RecoveringStrategy().stream(provider, request)]
    ids = [e.call.id for e in events if isinstance(e, ollm.ToolCallEvent)]
    assert ids == ["recovered_2", "recovered_3"]
    [notice] = [e for e in events if isinstance(e, ollm.NoticeEvent)]
    assert notice.message == (
        "qwen wrote 2 tool calls as text (a JSON object): running get_weather, get_weather "
        "as native calls."
    )


def test_a_call_without_arguments_is_a_call_with_none() -> None:
    now = ollm.ToolSchema(name="now", parameters={"type": "object", "properties": {}})
    scanner = TextCallScanner((now,))
    outputs = scanner.feed('<tool_call>{"name": "now"}</tool_call>') + scanner.end()
    assert outputs == [("calls", [("now", {})], "hermes")]


_PARIS = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
_PARIS_CALL = ("get_weather", {"city": "Paris"})

# reply -> (the text shown, stripped; the calls recovered, in order)
SCANNED: dict[str, tuple[str, list[tuple[str, dict[str, Any]]]]] = {
    # no call, and known before the end: every character is shown as soon as it is
    "Hi <tool_call>{bad json</tool_call> there and more": (
        "Hi <tool_call>{bad json</tool_call> there and more",
        [],
    ),
    f"```\n<tool_call>{_PARIS}</tool_call>\n```\nafter": (
        f"```\n<tool_call>{_PARIS}</tool_call>\n```\nafter",
        [],
    ),
    "[1, 2, 3] is a list": ("[1, 2, 3] is a list", []),
    "Prose with [brackets] and {braces} inside.": (
        "Prose with [brackets] and {braces} inside.",
        [],
    ),
    "<tool_call>" + "x" * 70_000: ("<tool_call>" + "x" * 70_000, []),
    # a reply that may still become a call is held to its end
    ' { "na': ('{ "na', []),
    # calls: a bare one with space around it, two tagged ones, one after prose
    f"  {_PARIS}  ": ("", [_PARIS_CALL]),
    f"<tool_call>\n{_PARIS}\n</tool_call>\n<tool_call>\n{_PARIS}\n</tool_call>": (
        "",
        [_PARIS_CALL, _PARIS_CALL],
    ),
    'Sure! [TOOL_CALLS]get_weather{"city": "P"}': ("Sure!", [("get_weather", {"city": "P"})]),
}
SHOWN_BEFORE_THE_END = list(SCANNED)[:5]


@pytest.mark.parametrize("size", [1, 3, 100_000])
@pytest.mark.parametrize("reply", list(SCANNED), ids=lambda reply: reply[:40])
def test_what_the_text_call_scanner_shows_and_recovers(reply: str, size: int) -> None:
    scanner = TextCallScanner((weather_schema(),))
    outputs = [out for i in range(0, len(reply), size) for out in scanner.feed(reply[i : i + size])]
    if reply in SHOWN_BEFORE_THE_END:
        assert "".join(out[1] for out in outputs if out[0] == "text") == reply
    outputs += scanner.end()
    text = "".join(out[1] for out in outputs if out[0] == "text")
    calls = [call for out in outputs if out[0] == "calls" for call in out[1]]
    assert (text.strip(), calls) == SCANNED[reply]


async def test_one_recovered_call_is_named_in_the_singular() -> None:
    request = ollm.ProviderRequest(
        model="qwen", messages=(ollm.Message.user("Paris?"),), tools=(weather_schema(),)
    )
    provider = ScriptedProvider(Reply([CALL]))
    events = [e async for e in RecoveringStrategy().stream(provider, request)]
    [notice] = [e for e in events if isinstance(e, ollm.NoticeEvent)]
    assert notice.message == (
        "qwen wrote 1 tool call as text (a JSON object): running get_weather as a native call."
    )


async def test_without_tools_the_provider_stream_is_passed_on_untouched() -> None:
    request = ollm.ProviderRequest(model="m", messages=(ollm.Message.user("hi"),))
    provider = ScriptedProvider(Reply([CALL]))
    events = [e async for e in RecoveringStrategy().stream(provider, request)]
    assert provider.requests == [request]
    assert [e.text for e in events if isinstance(e, ollm.TextEvent)] == [CALL]
    assert not any(isinstance(e, ollm.ToolCallEvent) for e in events)


class _EndsWithoutFinish:
    """A provider whose stream stops after its text, with no finish event."""

    name = "unfinished"

    def __init__(self, *chunks: str) -> None:
        self.chunks = chunks

    async def chat_stream(self, request: ollm.ProviderRequest) -> AsyncIterator[ollm.ProviderEvent]:
        for chunk in self.chunks:
            yield ollm.TextEvent(chunk)


@pytest.mark.parametrize(
    ("chunks", "text", "calls"),
    [
        (['{"na'], '{"na', []),  # held as a possible call: shown when the stream ends
        ([CALL[:10], CALL[10:]], "", ["get_weather"]),  # a call is only known at the end
        (["<tool_call>", CALL, "</tool_call>", "\n"], "\n", ["get_weather"]),  # known at once
    ],
)
async def test_a_stream_that_ends_without_a_finish_still_shows_what_was_held(
    chunks: list[str], text: str, calls: list[str]
) -> None:
    request = ollm.ProviderRequest(
        model="qwen", messages=(ollm.Message.user("Paris?"),), tools=(weather_schema(),)
    )
    provider = _EndsWithoutFinish(*chunks)
    events = [e async for e in RecoveringStrategy().stream(provider, request)]  # type: ignore[arg-type]
    assert "".join(e.text for e in events if isinstance(e, ollm.TextEvent)) == text
    assert [e.call.name for e in events if isinstance(e, ollm.ToolCallEvent)] == calls
    notices = [e.message for e in events if isinstance(e, ollm.NoticeEvent)]
    assert len(notices) == len(calls)
    assert all(message.startswith("qwen wrote 1 tool call as text") for message in notices)


# -- the strategy's stream at its edges --------------------------------------------------


_CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'


def request(history: tuple[ollm.Message, ...] = ()) -> ollm.ProviderRequest:
    return ollm.ProviderRequest(
        model="qwen",
        messages=(*history, ollm.Message.user("Weather?")),
        tools=(weather_schema(), ollm.ToolSchema(name="now", parameters={"type": "object"})),
    )


class _PlainIterator:
    """An async iterator that is not a generator: it has no ``aclose``."""

    def __init__(self, events: list[ollm.ProviderEvent]) -> None:
        self.events = iter(events)

    def __aiter__(self) -> _PlainIterator:
        return self

    async def __anext__(self) -> ollm.ProviderEvent:
        try:
            return next(self.events)
        except StopIteration:
            raise StopAsyncIteration from None


class _PlainProvider:
    name = "plain"

    def __init__(self, *events: ollm.ProviderEvent) -> None:
        self.events = list(events)

    def chat_stream(self, request: ollm.ProviderRequest) -> _PlainIterator:
        return _PlainIterator(self.events)


async def test_a_provider_stream_without_aclose_is_read_to_its_end() -> None:
    provider = _PlainProvider(
        ollm.TextEvent("Sure. "), ollm.TextEvent(f"<tool_call>{_CALL}</tool_call>")
    )
    events = [e async for e in RecoveringStrategy().stream(provider, request())]  # type: ignore[arg-type]
    assert [type(e) for e in events] == [ollm.TextEvent, ollm.NoticeEvent, ollm.ToolCallEvent]
    assert events[0] == ollm.TextEvent("Sure. ")
    assert events[2].call == ollm.ToolCall("recovered_1", "get_weather", {"city": "Paris"})  # type: ignore[attr-defined]


async def test_ids_go_on_past_ten_thousand_calls_in_one_reply() -> None:
    """Every recovered call gets its id, however many one reply holds."""
    earlier = ollm.ToolCall("call_a", "now", {})
    history = (
        ollm.Message.user("Time?"),
        ollm.Message.assistant("", tool_calls=(earlier,)),
        ollm.Message.tool("12:00", call=earlier),
    )
    count = 10_001
    chunks = ['<tool_call>{"name": "now"}</tool_call>'] * count
    provider = ScriptedProvider(Reply(chunks))
    events = [e async for e in RecoveringStrategy().stream(provider, request(history))]
    ids = [e.call.id for e in events if isinstance(e, ollm.ToolCallEvent)]
    assert ids == [f"recovered_{n}" for n in range(2, count + 2)]
    assert isinstance(events[-1], ollm.FinishEvent)


async def test_arguments_that_miss_a_pattern_are_still_a_call_and_the_model_is_told() -> None:
    """A tagged call whose argument misses its schema's pattern ("17 * 23 = 391" for the
    calculator) is a call all the same: it runs through the runtime, which refuses the
    arguments and tells the model which one is wrong; it is not left as raw text."""
    from ollm.toolbox import calculate

    provider = ScriptedProvider(
        Reply(
            '<tool_call>{"name": "calculate", "arguments": {"expression": "17 * 23 = 391"}}'
            "</tool_call>"
        ),
        "391",
    )
    client = ollm.ChatClient(
        ollm.discover(), provider=provider, tools=[calculate], tool_strategy="recover"
    )
    events = [event async for event in client.chat("What is 17 * 23?")]
    [result] = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert result.call.args == {"expression": "17 * 23 = 391"}
    assert result.error_code == ollm.ErrorCode.INVALID_ARGUMENTS
    assert "expression" in result.result
    assert "<tool_call>" not in text_of(events)
