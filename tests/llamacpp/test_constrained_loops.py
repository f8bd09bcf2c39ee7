"""A constrained reply that loops is closed by the grammar's way out, with a notice.

Inside a JSON string the grammar never lets a reply end: Gemma 3 270M, asked (under a
grammar) for pi to as many digits as it can, writes "1000000..." for as long as it may,
and the reply ran to its bound, cut mid-string: no JSON. (A json-react step about
17 * 23 once did the same with "2340.000...", before the calculator's schema stated the
characters of an expression.) ollm-llamacpp's sampler sees the cycle and chooses the
closing quote in place of its next turn: the reply is whole JSON, of the schema, long
before the bound, and a notice says what happened.
"""

from __future__ import annotations

import json

import pytest
from llamacpp_helpers import MODEL

import ollm
from ollm_llamacpp import LlamaCppProvider

pytestmark = pytest.mark.anyio

ANSWER = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


async def test_a_looping_string_is_closed_and_the_reply_parses(
    provider: LlamaCppProvider,
) -> None:
    request = ollm.ProviderRequest(
        model=MODEL,
        messages=(ollm.Message.user("Write pi to as many digits as you can."),),
        options=ollm.GenerationOptions(temperature=0.0, max_tokens=200),
        response_format=ANSWER,
    )
    events = [event async for event in provider.chat_stream(request)]
    text = "".join(e.text for e in events if isinstance(e, ollm.TextEvent))
    finish = events[-1]
    assert isinstance(finish, ollm.FinishEvent)
    assert finish.reason == "stop", text  # the JSON ended, not the bound
    assert isinstance(json.loads(text)["answer"], str)
    assert finish.usage is not None
    assert finish.usage.completion_tokens < 200
    notices = [e for e in events if isinstance(e, ollm.NoticeEvent) and e.kind == "repetition"]
    assert len(notices) == 1, text
    assert "repeated itself" in notices[0].message
