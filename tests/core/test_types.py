"""The contracts: messages stay valid, events round-trip through JSON."""

from __future__ import annotations

import base64
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from ollm_strategies import chat_events, messages, provider_events, tool_calls

import ollm


@given(chat_events)
def test_every_chat_event_round_trips_through_json(event: ollm.ChatEvent) -> None:
    line = ollm.encode_event(event)
    assert b"\n" not in line
    assert ollm.decode_chat_event(line) == event


@given(provider_events)
def test_every_provider_event_round_trips_through_json(event: ollm.ProviderEvent) -> None:
    assert ollm.decode_provider_event(ollm.encode_event(event)) == event


@given(st.lists(chat_events, max_size=20))
def test_a_stream_of_events_is_ndjson(events: list[ollm.ChatEvent]) -> None:
    ndjson = b"".join(ollm.encode_event(e) + b"\n" for e in events)
    decoded = [ollm.decode_chat_event(line) for line in ndjson.splitlines()]
    assert decoded == events


def test_events_are_tagged_by_type() -> None:
    assert msgspec.json.decode(ollm.encode_event(ollm.TextEvent("hi"))) == {
        "type": "text",
        "text": "hi",
    }
    assert msgspec.json.decode(ollm.encode_event(ollm.FinishEvent("stop")))["type"] == "finish"


@given(st.one_of(chat_events, provider_events))
def test_an_events_type_is_its_json_tag_and_cannot_be_changed(
    event: ollm.ChatEvent | ollm.ProviderEvent,
) -> None:
    assert event.type == msgspec.json.decode(ollm.encode_event(event))["type"]
    with pytest.raises(AttributeError):
        event.type = "text"  # type: ignore[misc]


def test_a_bad_event_line_names_what_is_wrong() -> None:
    with pytest.raises(msgspec.ValidationError, match=r"\$\.reason"):
        ollm.decode_chat_event(b'{"type":"finish","reason":"bored"}')


@given(messages())
def test_property_30_every_message_has_a_valid_role_and_a_part(message: ollm.Message) -> None:
    """Property 30: every message has a valid role and at least one part."""
    assert message.role in ollm.ROLES
    assert len(message.parts) >= 1
    decoded = msgspec.json.decode(msgspec.json.encode(message), type=ollm.Message)
    assert decoded == message


def _valid(
    role: str, parts: list[Any], name: str | None, call_id: str | None, calls: list[Any]
) -> bool:
    """Property 30 (with 31), written independently of ``Message``'s own checks."""
    if role not in ("system", "user", "assistant", "tool") or not parts:
        return False
    if role == "tool" and not (name and call_id):
        return False
    return not (calls and role != "assistant")


@given(
    st.sampled_from(["system", "user", "assistant", "tool", "robot", "", "USER"]),
    st.lists(st.sampled_from([ollm.TextPart("x"), ollm.TextPart("")]), max_size=2),
    st.none() | st.sampled_from(["", "calc"]),
    st.none() | st.sampled_from(["", "call_1"]),
    st.lists(tool_calls, max_size=2),
    st.booleans(),
)
def test_property_30_no_message_without_a_valid_role_and_a_part_can_exist(
    role: str,
    parts: list[Any],
    name: str | None,
    call_id: str | None,
    calls: list[Any],
    from_json: bool,
) -> None:
    """Property 30, tried with what must be refused too: built directly or decoded from JSON,
    a message exists only if it is valid."""
    fields = {
        "role": role,
        "parts": tuple(parts),
        "name": name,
        "tool_call_id": call_id,
        "tool_calls": tuple(calls),
    }
    try:
        if from_json:
            message = msgspec.json.decode(msgspec.json.encode(fields), type=ollm.Message)
        else:
            message = ollm.Message(**fields)  # type: ignore[arg-type]
    except (ValueError, msgspec.ValidationError):
        assert not _valid(role, parts, name, call_id, calls)
        return
    assert _valid(role, parts, name, call_id, calls)
    assert message.role in ollm.ROLES
    assert len(message.parts) >= 1


@given(tool_calls, st.text(max_size=30), st.booleans())
def test_property_31_a_tool_message_names_its_tool_and_call(
    call: ollm.ToolCall, content: str, is_error: bool
) -> None:
    """Property 31: every tool message names the tool (and the call) it answers."""
    message = ollm.Message.tool(content, call=call, is_error=is_error)
    assert message.role == "tool"
    assert message.name == call.name
    assert message.tool_call_id == call.id
    assert message.text == content


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"role": "robot", "parts": (ollm.TextPart("x"),)}, "role must be one of"),
        ({"role": "user", "parts": ()}, "at least one part"),
        ({"role": "tool", "parts": (ollm.TextPart("x"),)}, "must name its tool"),
        ({"role": "tool", "parts": (ollm.TextPart("x"),), "name": "t"}, "must name its tool"),
        (
            {
                "role": "user",
                "parts": (ollm.TextPart("x"),),
                "tool_calls": (ollm.ToolCall("1", "t"),),
            },
            "only an assistant",
        ),
    ],
)
def test_an_invalid_message_is_refused_with_the_reason(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ollm.Message(**kwargs)


def test_an_invalid_message_from_json_names_the_problem() -> None:
    with pytest.raises(msgspec.ValidationError, match="at least one part"):
        msgspec.json.decode(b'{"role":"user","parts":[]}', type=ollm.Message)


def test_an_assistant_message_that_only_calls_tools_has_an_empty_text_part() -> None:
    message = ollm.Message.assistant(tool_calls=(ollm.ToolCall("c1", "f", {"a": 1}),))
    assert message.parts == (ollm.TextPart(""),)
    assert message.text == ""


def test_images_are_bytes_in_python_and_base64_in_json() -> None:
    image = ollm.ImagePart(b"\x89PNG...", "image/png")
    message = ollm.Message.user("what is this?", images=(image,))
    wire = msgspec.json.decode(msgspec.json.encode(message))
    assert wire["parts"][1]["data"] == base64.b64encode(b"\x89PNG...").decode()
    assert message.images == (image,)
    assert image.to_base64() == base64.b64encode(b"\x89PNG...").decode()


def test_an_image_from_a_data_uri_drops_the_prefix() -> None:
    data = base64.b64encode(b"jpegbytes").decode()
    image = ollm.ImagePart.from_base64(f"data:image/jpeg;base64,{data}")
    assert image.data == b"jpegbytes"
    assert image.mime_type == "image/jpeg"


def test_an_image_from_a_file_guesses_its_type(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "cat.jpg"
    path.write_bytes(b"\xff\xd8")
    image = ollm.ImagePart.from_file(path)
    assert image.mime_type == "image/jpeg"
    assert image.data == b"\xff\xd8"


def test_options_merge_keeps_what_the_override_leaves_unset() -> None:
    base = ollm.GenerationOptions(temperature=0.2, seed=1, extra={"min_p": 0.1})
    merged = base.merged(ollm.GenerationOptions(seed=7, stop=("\n",), extra={"num_gpu": 1}))
    assert merged.temperature == 0.2
    assert merged.seed == 7
    assert merged.stop == ("\n",)
    assert merged.extra == {"min_p": 0.1, "num_gpu": 1}


def test_usage_adds_up() -> None:
    a = ollm.Usage(1, 2, 3, total_duration_ns=10)
    b = ollm.Usage(4, 5, 9)
    assert a + b == ollm.Usage(5, 7, 12, total_duration_ns=10)
    # A pool's attempts add up over the turns of a chat; a plain provider says none.
    assert ollm.Usage(attempts=2) + ollm.Usage(attempts=1) + b == ollm.Usage(4, 5, 9, attempts=3)
    assert (a + b).attempts is None


def test_pull_progress_fraction() -> None:
    assert ollm.PullProgress("pulling", total=200, completed=50).fraction == 0.25
    assert ollm.PullProgress("pulling manifest").fraction is None


def test_error_codes_travel_from_event_to_exception() -> None:
    error = ollm.error_from_code("MODEL_NOT_FOUND", "model 'x' not found")
    assert isinstance(error, ollm.ModelNotFoundError)
    assert error.code == "MODEL_NOT_FOUND"
    assert str(error) == "model 'x' not found"
    custom = ollm.error_from_code("SOMETHING_NEW", "?")
    assert type(custom) is ollm.OllmError
    assert custom.code == "SOMETHING_NEW"
