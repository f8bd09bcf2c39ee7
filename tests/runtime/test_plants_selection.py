"""select-tools in longer chats and at its limit: bugs planted by hand that the first
tests let through (tests/plants.toml, module ``selection``)."""

from __future__ import annotations

from typing import Any

import pytest
from runtime_helpers import assert_one_finish_last, client, collect

import ollm
from ollm.middleware import ToolSelection
from ollm_testutils.mock import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio

# One tool a subject, each named by a word no other tool has.
SUBJECTS = {
    "calendar": "Add an event to the calendar.",
    "invoice": "Total the lines of an invoice.",
    "shipping": "Print a shipping label for a parcel.",
    "weather": "Get the forecast: rain, wind and temperature.",
    "spreadsheet": "Read a cell of a spreadsheet.",
    "email": "Send an email message.",
}


def _tools() -> list[ollm.Tool]:
    def noop(**kwargs: Any) -> str:
        return "done"

    return [
        ollm.Tool.from_schema(
            ollm.ToolSchema(
                f"{subject}_tool",
                description,
                {"type": "object", "properties": {"id": {"type": "string"}}},
            ),
            noop,
        )
        for subject, description in SUBJECTS.items()
    ]


def _names(request: ollm.ProviderRequest) -> list[str]:
    return [tool.name for tool in request.tools]


async def test_a_long_chat_ranks_the_tools_by_its_latest_messages(anyio_backend: str) -> None:
    # Five exchanges about the calendar, then one about an invoice: the invoice's tool is
    # the one sent, although the calendar fills the start of the conversation.
    provider = ScriptedProvider(*["Noted."] * 6)
    chat_client = client(provider, tools=_tools(), middleware=[ToolSelection(1)])
    for _ in range(5):
        assert_one_finish_last(await collect(chat_client.chat("Is the calendar free today?")))
    assert_one_finish_last(await collect(chat_client.chat("Total the invoice lines.")))
    assert _names(provider.requests[0]) == ["calendar_tool"]
    assert _names(provider.requests[-1]) == ["invoice_tool"]


async def test_tools_kept_by_name_never_pass_the_limit(anyio_backend: str) -> None:
    provider = ScriptedProvider("ok")
    always = ["calendar_tool", "invoice_tool", "shipping_tool"]
    chat_client = client(provider, tools=_tools(), middleware=[ToolSelection(2, always=always)])
    await collect(chat_client.chat("What about the weather?"))
    names = _names(provider.requests[0])
    assert len(names) == 2
    assert set(names) <= set(always)


async def test_the_tool_tool_choice_names_is_always_sent(anyio_backend: str) -> None:
    provider = ScriptedProvider(Reply(tool_calls=[("email_tool", {"id": "1"})]), "sent")
    chat_client = client(provider, tools=_tools(), middleware=[ToolSelection(1)])
    events = await collect(chat_client.chat("What about the weather?", tool_choice="email_tool"))
    assert_one_finish_last(events, "stop")
    assert _names(provider.requests[0]) == ["email_tool"]


async def test_a_called_tool_stays_whatever_the_chat_turns_to(anyio_backend: str) -> None:
    provider = ScriptedProvider(
        Reply(tool_calls=[("shipping_tool", {"id": "1"})]), "Printed.", "It will rain."
    )
    chat_client = client(provider, tools=_tools(), middleware=[ToolSelection(1)])
    await collect(chat_client.chat("Print a shipping label."))
    await collect(chat_client.chat("And the weather forecast, rain or wind?"))
    assert _names(provider.requests[-1]) == ["shipping_tool"]


async def test_the_description_counts_as_much_as_the_name(anyio_backend: str) -> None:
    # "parcel" is only in the shipping tool's description.
    provider = ScriptedProvider("ok")
    chat_client = client(provider, tools=_tools(), middleware=[ToolSelection(1)])
    await collect(chat_client.chat("I have a parcel for Oslo."))
    assert _names(provider.requests[0]) == ["shipping_tool"]


async def test_exactly_max_tools_are_sent_when_more_are_offered(anyio_backend: str) -> None:
    provider = ScriptedProvider("ok")
    chat_client = client(provider, tools=_tools(), middleware=[ToolSelection(5)])
    await collect(chat_client.chat("Anything."))
    assert len(_names(provider.requests[0])) == 5
    # In the order they were offered: one left out, the others as they came.
    offered = [f"{subject}_tool" for subject in SUBJECTS]
    names = _names(provider.requests[0])
    assert names == [name for name in offered if name in names]
