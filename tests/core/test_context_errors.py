"""A prompt too long for the window is one error, CONTEXT_EXCEEDED, whoever refused it."""

from __future__ import annotations

import pytest

import ollm

WORDINGS = [
    # (what the server said, prompt tokens, window)
    (
        "request (9000 tokens) exceeds the available context size (4096 tokens), try increasing it",
        9000,
        4096,
    ),
    (
        "This model's maximum context length is 8192 tokens. However, your messages resulted "
        "in 9000 tokens. Please reduce the length of the messages.",
        9000,
        8192,
    ),
    (
        "This model's maximum context length is 4096 tokens. However, you requested 9500 "
        "tokens (9000 in the messages, 500 in the completion).",
        9000,
        4096,
    ),
    (
        "The decoder prompt (length 9000) is longer than the maximum model length of 4096.",
        9000,
        4096,
    ),
    (
        "The input (9000 tokens) is longer than the model's context length (4096 tokens).",
        9000,
        4096,
    ),
    (
        "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
        1200000,
        1048576,
    ),
    ("prompt is too long: 210000 tokens > 200000 maximum", 210000, 200000),
    ("the input length exceeds the context length", None, None),
]


@pytest.mark.parametrize(("said", "prompt", "window"), WORDINGS)
def test_every_wording_is_recognised_with_its_sizes(
    said: str, prompt: int | None, window: int | None
) -> None:
    assert ollm.ContextExceededError.said_in(said)
    error = ollm.ContextExceededError.from_server("The server", said, name="'m'")
    assert error.code == "CONTEXT_EXCEEDED"
    assert isinstance(error, ollm.ServerError)
    assert (error.prompt_tokens, error.context_window) == (prompt, window)
    assert said in error.message
    assert "start a new one" in error.message


@pytest.mark.parametrize(
    "said", ["invalid model name", "tools param requires --jinja flag", "rate limit"]
)
def test_other_refusals_are_not_context_errors(said: str) -> None:
    assert not ollm.ContextExceededError.said_in(said)


def test_the_code_rebuilds_the_class() -> None:
    error = ollm.errors.error_from_code("CONTEXT_EXCEEDED", "too long")
    assert type(error) is ollm.ContextExceededError
    assert (error.prompt_tokens, error.context_window) == (None, None)
