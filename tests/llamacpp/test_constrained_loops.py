"""A constrained reply that loops is closed by the grammar's way out, with a notice.

Gemma 3 270M, asked for a json-react step about 17 * 23, writes the expression and then
"2340.000..." for as long as it may: inside a JSON string the grammar never makes it
stop, so the reply ran to its bound (1,024 tokens, more than a minute here) and was cut
mid-string, not JSON. ollm-llamacpp's sampler sees the cycle and chooses the closing
quote in place of its next turn: the reply is whole JSON, of the schema, long before
the bound, and a notice says what happened.
"""

from __future__ import annotations

import json

import pytest
from llamacpp_helpers import MODEL

import ollm
from ollm.toolbox import calculate
from ollm_llamacpp import LlamaCppProvider
from ollm_react import JsonReActStrategy

pytestmark = pytest.mark.anyio

# The built-in calculate tool, as `ollm chat -t calculate` offers it.
CALCULATE = ollm.tool(calculate).schema


async def test_a_looping_string_is_closed_and_the_step_parses(
    provider: LlamaCppProvider,
) -> None:
    request = JsonReActStrategy().prepare(
        ollm.ProviderRequest(
            model=MODEL,
            messages=(ollm.Message.user("What is 17 * 23?"),),
            tools=(CALCULATE,),
            options=ollm.GenerationOptions(temperature=0.0, max_tokens=200),
        )
    )
    events = [event async for event in provider.chat_stream(request)]
    text = "".join(e.text for e in events if isinstance(e, ollm.TextEvent))
    finish = events[-1]
    assert isinstance(finish, ollm.FinishEvent)
    assert finish.reason == "stop", text  # the JSON ended, not the bound
    step = json.loads(text)
    assert step["action"]["tool"] == "calculate"
    assert isinstance(step["action"]["arguments"]["expression"], str)
    notices = [e for e in events if isinstance(e, ollm.NoticeEvent) and e.kind == "repetition"]
    assert len(notices) == 1
    assert "repeated itself" in notices[0].message
