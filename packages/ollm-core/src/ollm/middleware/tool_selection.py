"""``select-tools``: only the tools that matter for this turn, when too many are offered.

MCP servers bring tens of tools, and their descriptions alone can fill a small model's
window (and lower its choice: the more tools, the worse it picks). Before each request,
``ToolSelection`` keeps at most ``max_tools`` of the request's tools: those named in
``always``, those the conversation has already called, the one ``tool_choice`` names,
then the most relevant to the conversation's recent messages. Relevance is a lexical
score (the words the tool's name, description and parameters share with the recent
messages, rarer words weighing more, common English words left out); ``score=``
replaces it (for example with
embedding similarity from a provider's ``embed``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence

import msgspec

from ollm.types.messages import Message
from ollm.types.middleware import MiddlewareContext
from ollm.types.request import ProviderRequest, ToolSchema

__all__ = ["ToolSelection", "lexical_scores"]

_WORD = re.compile(r"[a-z0-9]+")
# The recent messages the relevance is computed against.
RECENT = 6
# Words that say nothing about what a tool is for.
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "if",
        "in",
        "is",
        "it",
        "its",
        "me",
        "my",
        "no",
        "not",
        "of",
        "on",
        "or",
        "so",
        "than",
        "that",
        "the",
        "then",
        "there",
        "these",
        "this",
        "to",
        "was",
        "we",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
    ]
)

Scorer = Callable[[str, Sequence[ToolSchema]], Sequence[float]]


def _words(text: str) -> list[str]:
    # snake_case and camelCase names split into their words
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", text).replace("_", " ").lower()
    return [w for w in _WORD.findall(spaced) if len(w) > 1 and w not in _STOP]


def _tool_text(tool: ToolSchema) -> str:
    properties = tool.parameters.get("properties") if isinstance(tool.parameters, dict) else None
    names = " ".join(properties) if isinstance(properties, dict) else ""
    return f"{tool.name} {tool.description} {names}"


def lexical_scores(query: str, tools: Sequence[ToolSchema]) -> list[float]:
    """How much each tool's words share with ``query``: the sum, over the query's words
    found in the tool's text, of their inverse frequency among the tools."""
    documents = [set(_words(_tool_text(tool))) for tool in tools]
    count = len(documents)
    frequency: dict[str, int] = {}
    for words in documents:
        for word in words:
            frequency[word] = frequency.get(word, 0) + 1
    wanted = set(_words(query))
    return [sum(math.log(1 + count / frequency[w]) for w in wanted & words) for words in documents]


class ToolSelection:
    """A middleware that sends at most ``max_tools`` tools a request (see the module)."""

    name = "select-tools"

    def __init__(
        self,
        max_tools: int = 16,
        *,
        always: Iterable[str] = (),
        score: Scorer | None = None,
    ) -> None:
        if not isinstance(max_tools, int) or max_tools < 1:
            raise ValueError(f"max_tools must be a positive whole number, not {max_tools!r}")
        self.max_tools = max_tools
        self.always = frozenset(always)
        self.score: Scorer = score or lexical_scores

    def on_request(self, ctx: MiddlewareContext, request: ProviderRequest) -> ProviderRequest:
        """``request`` with its tools cut to the most relevant ``max_tools``."""
        tools = request.tools
        if len(tools) <= self.max_tools:
            return request
        kept = self.select(tools, request.messages, request.tool_choice)
        return msgspec.structs.replace(request, tools=kept)

    def select(
        self, tools: Sequence[ToolSchema], messages: Sequence[Message], tool_choice: str = "auto"
    ) -> tuple[ToolSchema, ...]:
        """The tools to send, in their order: the kept ones, then the best scored."""
        called = {call.name for m in messages for call in m.tool_calls}
        must = self.always | called | {tool_choice}
        first = [i for i, tool in enumerate(tools) if tool.name in must]
        chosen = set(first[: self.max_tools])
        room = self.max_tools - len(chosen)
        if room > 0:
            query = " ".join(m.text for m in messages[-RECENT:])
            scores = self.score(query, tools)
            ranked = sorted(
                (i for i in range(len(tools)) if i not in chosen), key=lambda i: -scores[i]
            )
            chosen.update(ranked[:room])
        return tuple(tool for i, tool in enumerate(tools) if i in chosen)
