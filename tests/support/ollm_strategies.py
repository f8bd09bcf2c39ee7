"""Hypothesis strategies for ollm's contract types (imported by the core and runtime tests)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

import ollm

names = st.from_regex(r"[a-z][a-z0-9_]{0,15}", fullmatch=True)
texts = st.text(max_size=40)
json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=10)
json_values: st.SearchStrategy[Any] = st.recursive(
    json_scalars | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
    max_leaves=8,
)
args = st.dictionaries(names, json_values, max_size=4)
tool_calls = st.builds(ollm.ToolCall, id=names, name=names, args=args)
usages = st.builds(
    ollm.Usage,
    prompt_tokens=st.integers(0, 10**6),
    completion_tokens=st.integers(0, 10**6),
    total_tokens=st.integers(0, 10**6),
    total_duration_ns=st.none() | st.integers(0, 10**12),
)
finish_reasons = st.sampled_from(
    ["stop", "length", "max_turns", "cancelled", "token_limit", "error"]
)
codes = st.sampled_from(
    [v for k, v in vars(ollm.ErrorCode).items() if k.isupper() and isinstance(v, str)]
)

provider_events: st.SearchStrategy[ollm.ProviderEvent] = st.one_of(
    st.builds(ollm.TextEvent, texts),
    st.builds(ollm.ThinkingEvent, texts),
    st.builds(ollm.ToolCallEvent, tool_calls),
    st.builds(ollm.NoticeEvent, texts, names),
    st.builds(ollm.ErrorEvent, texts, codes),
    st.builds(ollm.FinishEvent, finish_reasons, st.none() | usages),
)
chat_events: st.SearchStrategy[ollm.ChatEvent] = st.one_of(
    st.builds(ollm.TextEvent, texts),
    st.builds(ollm.ThinkingEvent, texts),
    st.builds(ollm.ToolCallStartEvent, tool_calls, st.integers(0, 100)),
    st.builds(
        ollm.ToolCallResultEvent,
        tool_calls,
        texts,
        st.booleans(),
        st.none() | codes,
        st.floats(0, 1e6),
        st.integers(0, 100),
    ),
    st.builds(
        ollm.TokenWarningEvent, st.integers(1, 10**6), st.integers(1, 10**6), st.integers(1, 10**6)
    ),
    st.builds(ollm.TurnCompleteEvent, st.integers(1, 100), finish_reasons, st.integers(0, 9)),
    st.builds(ollm.NoticeEvent, texts, names),
    st.builds(ollm.ErrorEvent, texts, codes),
    st.builds(ollm.FinishEvent, finish_reasons, st.none() | usages),
)

image_parts = st.builds(
    ollm.ImagePart, st.binary(min_size=1, max_size=32), st.sampled_from(["image/png", "image/jpeg"])
)
text_parts = st.builds(ollm.TextPart, texts)


@st.composite
def messages(draw: st.DrawFn) -> ollm.Message:
    """Any valid message of any role."""
    role = draw(st.sampled_from(["system", "user", "assistant", "tool"]))
    if role == "user":
        parts = draw(st.lists(text_parts | image_parts, min_size=1, max_size=3))
        return ollm.Message(role="user", parts=tuple(parts))
    if role == "assistant":
        return ollm.Message.assistant(
            draw(texts),
            tool_calls=tuple(draw(st.lists(tool_calls, max_size=3))),
            thinking=draw(st.none() | texts),
        )
    if role == "tool":
        return ollm.Message.tool(draw(texts), call=draw(tool_calls), is_error=draw(st.booleans()))
    return ollm.Message.system(draw(texts))
