"""``ollm.kit.quote`` and ``one_line``: a server's message as one line of an error (issue
41: a validation dump with a frame of the server's code reached stderr whole)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ollm.kit import QUOTE_LIMIT, one_line, quote

FASTAPI = (
    "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', "
    "'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}\n\n"
    '  File "/srv/llama_cpp/server/app.py", line 376, in create_chat_completion\n'
    "    POST /v1/chat/completions\n"
)
TWO = (
    "2 validation errors:\n  {'type': 'missing', 'loc': ('body', 'model'), 'msg': 'Field "
    "required', 'input': {}}\n  {'type': 'missing', 'loc': ('body', 'messages'), 'msg': "
    "'Field required', 'input': {}}\n"
)
PYDANTIC = (
    "1 validation error for ChatRequest\nresponse_format.type\n  Input should be 'text' or "
    "'json_object' [type=literal_error, input_value='json_schema', input_type=str]\n"
)
# llama-cpp-python on an assistant message with "content": null (abridged from 7 errors).
UNION = (
    "3 validation errors:\n  {'type': 'literal_error', 'loc': ('body', 'messages', 1, "
    "'ChatCompletionRequestSystemMessage', 'role'), 'msg': \"Input should be 'system'\", "
    "'input': 'assistant', 'ctx': {'expected': \"'system'\"}}\n  {'type': 'string_type', "
    "'loc': ('body', 'messages', 1, 'ChatCompletionRequestAssistantMessage', 'content'), "
    "'msg': 'Input should be a valid string', 'input': None}\n  {'type': 'missing', 'loc': "
    "('body', 'messages', 1, 'ChatCompletionRequestToolMessage', 'tool_call_id'), 'msg': "
    "'Field required', 'input': {'role': 'assistant', 'content': None}}\n"
)
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/srv/app.py", line 9, in handle\n'
    "    return run(request)\n"
    "RuntimeError: the model is still loading\n"
)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("The model `m` does not exist.", "The model `m` does not exist."),
        ("  spaced  \n", "spaced"),
        (FASTAPI, "body.response_format.type: Input should be 'text' or 'json_object'"),
        (TWO, "body.model: Field required (and 1 more)"),
        (PYDANTIC, "response_format.type: Input should be 'text' or 'json_object'"),
        (TRACEBACK, "RuntimeError: the model is still loading"),
        (
            UNION,
            "body.messages.1.ChatCompletionRequestAssistantMessage.content: Input should "
            "be a valid string (and 2 more)",
        ),
        ("<html>\n<head><title>502 Bad Gateway</title></head>\n</html>", "502 Bad Gateway"),
        ("Errors:\nthe prompt is too long\nsee the log", "the prompt is too long"),
        ("", ""),
    ],
)
def test_the_meaningful_line(text: str, line: str) -> None:
    assert one_line(text) == line


@given(st.text(max_size=2000), st.integers(min_value=10, max_value=400))
def test_a_quote_is_one_printable_line_within_its_limit(text: str, limit: int) -> None:
    """Whatever a server sends, its quote is one line of printable characters, cut at the
    limit (``...`` marks the cut)."""
    quoted = quote(text, limit)
    assert quoted.isprintable()
    assert len(quoted) <= limit + 3


@given(st.text(max_size=200).filter(str.isprintable))
def test_a_one_line_message_is_quoted_as_it_was(text: str) -> None:
    """A message of one printable line loses only its surrounding spaces and last stop."""
    quoted = quote(text, QUOTE_LIMIT)
    stripped = text.strip()
    if len(stripped) <= QUOTE_LIMIT and not stripped.endswith((".", "!", "?")):
        assert quoted == stripped
