"""``select-tools``: only the tools that matter for this turn, when too many are offered.

MCP servers bring tens of tools, and their descriptions alone can fill a small model's
window (and lower its choice: the more tools, the worse it picks). Before each request,
``ToolSelection`` keeps at most ``max_tools`` of the request's tools: those named in
``always``, those the conversation has already called, the one ``tool_choice`` names,
then the most relevant to the conversation's recent messages. Relevance is a lexical
score (the words the tool's name, description and parameters share with the recent
messages, rarer words weighing more, common English words left out); ``score=``
replaces it.

With ``embed_model=`` (``ollm chat --tools-embed MODEL``) and a provider that has
``embed``, relevance is the cosine similarity between the embedding of the same recent
text and each tool's text: each distinct tool text is embedded once and kept on the
middleware (a long chat embeds its tools once, then one query a request). When that
cannot be done (the provider has no ``embed``, the model is missing, the server fails
or answers the wrong number of vectors) the request falls back to the lexical score,
with one warning a chat in the ``ollm.middleware.tool_selection`` log; the chat goes on.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Iterable, Sequence

import msgspec

from ollm.types.messages import Message
from ollm.types.middleware import MiddlewareContext
from ollm.types.provider import Embeddings
from ollm.types.request import ProviderRequest, ToolSchema

__all__ = ["ToolSelection", "cosine", "lexical_scores"]

log = logging.getLogger(__name__)

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


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine similarity of two vectors (0.0 when either is zero or their sizes differ)."""
    if len(a) != len(b):
        return 0.0
    norms = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    return math.fsum(x * y for x, y in zip(a, b, strict=True)) / norms if norms else 0.0


class _Unembeddable(Exception):
    """Why this request cannot be ranked by embeddings (said once a chat)."""


class ToolSelection:
    """A middleware that sends at most ``max_tools`` tools a request (see the module)."""

    name = "select-tools"

    def __init__(
        self,
        max_tools: int = 16,
        *,
        always: Iterable[str] = (),
        score: Scorer | None = None,
        embed_model: str | None = None,
    ) -> None:
        if not isinstance(max_tools, int) or max_tools < 1:
            raise ValueError(f"max_tools must be a positive whole number, not {max_tools!r}")
        if embed_model is not None and (not isinstance(embed_model, str) or not embed_model):
            raise ValueError(f"embed_model must be a model's name, not {embed_model!r}")
        self.max_tools = max_tools
        self.always = frozenset(always)
        self.score: Scorer = score or lexical_scores
        self.embed_model = embed_model
        # Each distinct tool text's vector, by provider name (kept across chats).
        self._vectors: dict[tuple[str, str], list[float]] = {}

    async def on_request(self, ctx: MiddlewareContext, request: ProviderRequest) -> ProviderRequest:
        """``request`` with its tools cut to the most relevant ``max_tools``."""
        tools = request.tools
        if len(tools) <= self.max_tools:
            return request
        scores = None
        if self.embed_model is not None and self._room(
            tools, request.messages, request.tool_choice
        ):
            scores = await self._embedded_scores(ctx, self._query(request.messages), tools)
        kept = self.select(tools, request.messages, request.tool_choice, scores=scores)
        return msgspec.structs.replace(request, tools=kept)

    async def _embedded_scores(
        self, ctx: MiddlewareContext, query: str, tools: Sequence[ToolSchema]
    ) -> list[float] | None:
        """Cosine similarities of ``query`` and each tool, or ``None`` (warned once a chat)."""
        model = self.embed_model
        assert model is not None
        try:
            adapter: object = ctx.adapter  # a provider type may add embed to its adapter
            if not isinstance(adapter, Embeddings):
                raise _Unembeddable(f"the provider {ctx.provider or '(unknown)'} has no embeddings")
            texts = [_tool_text(tool) for tool in tools]
            missing = list(
                dict.fromkeys(t for t in texts if (ctx.provider, t) not in self._vectors)
            )
            result = await adapter.embed(model, [query, *missing])
            if len(result.vectors) != 1 + len(missing):
                raise _Unembeddable(
                    f"{model} gave {len(result.vectors)} vectors for {1 + len(missing)} texts"
                )
            for text, vector in zip(missing, result.vectors[1:], strict=True):
                self._vectors[(ctx.provider, text)] = vector
        except Exception as exc:  # any failure: this request uses the lexical score
            state = ctx.state.setdefault(self.name, {})
            if not state.get("warned"):
                state["warned"] = True
                log.warning(
                    "select-tools: could not rank the tools by %s embeddings (%s); "
                    "this chat ranks them by shared words where embedding fails. "
                    "Check that the model exists (ollm pull %s) or drop --tools-embed.",
                    model,
                    exc,
                    model,
                )
            return None
        wanted = result.vectors[0]
        return [cosine(wanted, self._vectors[(ctx.provider, text)]) for text in texts]

    @staticmethod
    def _query(messages: Sequence[Message]) -> str:
        """The recent text the tools are ranked against."""
        return " ".join(m.text for m in messages[-RECENT:])

    def _must(
        self, tools: Sequence[ToolSchema], messages: Sequence[Message], tool_choice: str
    ) -> list[int]:
        called = {call.name for m in messages for call in m.tool_calls}
        must = self.always | called | {tool_choice}
        return [i for i, tool in enumerate(tools) if tool.name in must][: self.max_tools]

    def _room(
        self, tools: Sequence[ToolSchema], messages: Sequence[Message], tool_choice: str
    ) -> bool:
        return len(self._must(tools, messages, tool_choice)) < self.max_tools

    def select(
        self,
        tools: Sequence[ToolSchema],
        messages: Sequence[Message],
        tool_choice: str = "auto",
        *,
        scores: Sequence[float] | None = None,
    ) -> tuple[ToolSchema, ...]:
        """The tools to send, in their order: the kept ones, then the best scored
        (``scores``, one per tool, else the ``score`` function's)."""
        chosen = set(self._must(tools, messages, tool_choice))
        room = self.max_tools - len(chosen)
        if room > 0:
            if scores is None:
                scores = self.score(self._query(messages), tools)
            ranked = sorted(
                (i for i in range(len(tools)) if i not in chosen), key=lambda i: -scores[i]
            )
            chosen.update(ranked[:room])
        return tuple(tool for i, tool in enumerate(tools) if i in chosen)
