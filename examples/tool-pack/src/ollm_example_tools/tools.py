"""The tools. Plain functions: the schema comes from the type hints, the descriptions
from the docstring, and ollm validates a model's arguments before calling them."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

import ollm


def word_count(text: str) -> dict[str, int]:
    """Count the words, lines and characters of a text.

    Args:
        text: The text to count.
    """
    return {"words": len(text.split()), "lines": len(text.splitlines()), "characters": len(text)}


def change_case(text: str, case: Literal["upper", "lower", "title"] = "upper") -> str:
    """Change the case of a text.

    Args:
        text: The text to change.
        case: The case to give it.
    """
    return {"upper": text.upper(), "lower": text.lower(), "title": text.title()}[case]


async def repeat(
    text: str, times: Annotated[int, msgspec.Meta(ge=1, le=10)] = 2, separator: str = " "
) -> str:
    """Repeat a text a few times (an async tool: ollm awaits it).

    Args:
        text: The text to repeat.
        times: How many times, 1 to 10.
        separator: What goes between the copies.
    """
    return separator.join([text] * times)


TOOLS = [ollm.tool(word_count), ollm.tool(change_case), ollm.tool(timeout=5)(repeat)]
