"""Compaction as a view: what a request carries of a long conversation.

The conversation (and its log) keep every message; a ``ContextView`` decides what the
next request sends of it, and keeps its decisions between turns and chats, so that each
turn costs the same however long the conversation is:

- token accounting is incremental: each message's characters are counted once (tokens
  are characters / 4, as the fallback counter has them), and kept as a running total
  that only grows by the messages added since the last turn;
- ``clear-results`` replaces old tool results (all but those of the latest reply) with
  ``[result of NAME elided: N tokens]``, oldest first, from where it stopped last time;
- ``trim`` drops whole units from the front: a user message, or an assistant message
  with all its tool results (a call never goes without its result). The first user
  message, the latest user message and the latest unit always stay.

A compaction runs before a request whose estimate passes ``compact_at`` of the window
(0.8 by default), down to ``TARGET`` of it, and once, harder, when the server refuses a
request as too long (``CONTEXT_EXCEEDED``): sent again only if that shortened it, and a
second refusal ends the chat ``CONTEXT_EXCEEDED``. Each one is a ``CompactionEvent``.

A plugin's compactor (``ollm_compactors``) gets the whole conversation instead and
returns what to send; what it sent is sent again, with the messages added since, until
that passes ``compact_at`` in turn.

Internal: not part of ollm's public API; its layout may change in any release.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import anyio
import msgspec

from ollm.errors import ErrorCode, PluginError
from ollm.registries.compactors import CompactorRegistry
from ollm.registries.strategies import create_named
from ollm.registries.tokens import (
    MessageCharacters,
    fallback_count,
    message_characters,
    request_text,
)
from ollm.runtime.settings import COMPACT_AT, STRATEGIES, check_compact
from ollm.types.abort import AbortSignal
from ollm.types.compactor import Compactor, CompactorSpec, MessageCounter
from ollm.types.events import CompactionEvent, ErrorEvent, NoticeEvent, TextEvent
from ollm.types.messages import Message, TextPart
from ollm.types.provider import ProviderAdapter
from ollm.types.request import GenerationOptions, ProviderRequest
from ollm.types.text import encode_json

__all__ = [
    "COMPACT_AT",
    "STRATEGIES",
    "TARGET",
    "Compaction",
    "ContextView",
    "ViewCompactor",
    "check_compact",
    "count_messages",
    "resolve_compactor",
]

# Compacted down to this share of the window: room for a few turns before the next one.
TARGET = 0.6
SUMMARY_SHARE = 0.1  # of the window, for a summary
SUMMARY_SYSTEM = (
    "You summarize the earlier part of a conversation between a user and an assistant "
    "(with its tool calls and their results) so that the assistant can go on without it. "
    "Keep the facts, names, numbers, decisions and open questions; leave out pleasantries. "
    "Write plain prose, as short as it can be while complete."
)


def count_messages(messages: Sequence[Message]) -> int:
    """The estimated tokens of ``messages`` (characters / 4, as the fallback counter)."""
    return -(-sum(message_characters(m) for m in messages) // 4)


class ViewCompactor:
    """One of ollm's own compactors (``auto``, ``clear-results``, ``trim``,
    ``summarize``) as a ``Compactor``. In a chat the runtime runs it on the
    conversation's ``ContextView`` instead, which keeps its decisions between turns;
    ``summarize`` trims here (its summary needs a model)."""

    def __init__(self, strategy: str) -> None:
        self.strategy = strategy

    def compact(
        self,
        messages: Sequence[Message],
        *,
        fixed_tokens: int,
        target: int,
        count: MessageCounter = count_messages,
    ) -> Sequence[Message]:
        """What a fresh view of ``messages`` sends, compacted to ``target`` tokens (as
        the view counts them: characters / 4, ``count_messages``)."""
        view = ContextView()
        strategy = "trim" if self.strategy.startswith("summarize") else self.strategy
        # The view's budget is the whole request's: the fixed part's characters and all.
        view.compact(messages, fixed_tokens * 4, target + fixed_tokens, strategy)
        return view.messages(messages)


def resolve_compactor(name: str, specs: Mapping[str, CompactorSpec]) -> str | Compactor:
    """What ``compact=name`` runs: the name of one of ollm's own strategies (run on the
    conversation's view), or a plugin's compactor for one chat; a ``PluginError``
    listing the installed ones when none is named ``name``."""
    spec = specs.get(name)
    if spec is None and (name in STRATEGIES[:-1] or name.startswith("summarize:")):
        return name
    compactor: object = create_named("Compactor", specs, name, STRATEGIES)
    if isinstance(compactor, ViewCompactor):
        return compactor.strategy
    if not callable(getattr(compactor, "compact", None)):
        raise PluginError(
            f"Compactor {name!r} built {type(compactor).__name__}, which has no compact "
            "method. Report this to its author (`ollm plugins` says where it comes from)."
        )
    return compactor  # type: ignore[return-value]


def transcript(messages: Sequence[Message], summary: Message | None, limit: int) -> str:
    """What a summary request asks to summarize: the earlier summary, then the messages
    left out as ``role: text`` lines, at most ``limit`` characters (the newest kept)."""
    lines = [summary.text] if summary is not None else []
    for message in messages:
        calls = "; ".join(
            f"calls {c.name}({encode_json(c.args).decode()})" for c in message.tool_calls
        )
        lines.append(f"{message.role}: {message.text} {calls}".strip())
    text = "\n".join(lines)
    return text[-limit:] if len(text) > limit else text


class ContextView:
    """What a request sends of one conversation, decided turn after turn."""

    def __init__(self) -> None:
        self.counts = MessageCharacters()
        self._forget()
        self.compactions = 0

    def _forget(self) -> None:
        """No decision yet (a new view, or a conversation changed other than by growing)."""
        self.start = 0  # messages before this index (after the first) are left out
        self.dropped = 0  # their characters
        self.elided: dict[int, Message] = {}  # tool results replaced, by index
        self.saved = 0  # the characters their replacement saved
        self.clear_from = 0  # where clear-results goes on from
        self._built: list[Message] = []  # the view's tail as last built, and
        self._built_upto = 0  # the index of the conversation it was built up to
        self._stale = True  # a compaction changed it since
        self.summary: Message | None = None  # what summarize wrote of what was left out
        self.summary_characters = 0
        self.trimmed: list[Message] = []  # what the last trim left out (to summarize)

    # -- the view --------------------------------------------------------------------

    def tokens(self, messages: Sequence[Message], fixed: int) -> int:
        """The estimate of what the view of ``messages`` sends, with ``fixed``
        characters (the system prompt and the tools)."""
        if self.counts.update(messages):
            self._forget()
            self._stale = True
        characters = fixed + self.counts.total - self.dropped - self.saved
        characters += self.summary_characters
        return -(-(characters + self._pinned(messages)) // 4)

    def _latest_user(self, messages: Sequence[Message]) -> int | None:
        for index in range(len(messages) - 1, -1, -1):
            if messages[index].role == "user":
                return index
        return None

    def _pinned(self, messages: Sequence[Message]) -> int:
        """The characters of the latest user message when the cut passed it (it stays)."""
        user = self._latest_user_before(messages)
        return self.counts.counts[user] if user is not None else 0

    def _latest_user_before(self, messages: Sequence[Message]) -> int | None:
        if self.start <= 1:
            return None
        # The latest user message is searched from the end: it is close to it.
        user = self._latest_user(messages)
        if user is not None and 0 < user < self.start:
            return user
        return None

    def messages(self, messages: Sequence[Message]) -> tuple[Message, ...]:
        """The messages the request sends (``messages`` itself when nothing is left out)."""
        if self.start == 0 and not self.elided:
            return tuple(messages)
        head: list[Message] = []
        elided = self.elided
        if self.start > 0:
            # The first unit: the first message, and its results if it made calls.
            head.extend(elided.get(i, messages[i]) for i in range(self._first_unit(messages)))
            if self.summary is not None:
                head.append(self.summary)
            user = self._latest_user_before(messages)
            if user is not None:
                head.append(messages[user])
        if self._stale or self._built_upto > len(messages):
            self._built = [elided.get(i, messages[i]) for i in range(self.start, len(messages))]
            self._stale = False
        else:  # only what was added since: the rest is as it was built
            added = range(max(self._built_upto, self.start), len(messages))
            self._built.extend(elided.get(i, messages[i]) for i in added)
        self._built_upto = len(messages)
        return (*head, *self._built) if head else tuple(self._built)

    # -- compacting ------------------------------------------------------------------

    def compact(
        self, messages: Sequence[Message], fixed: int, target: int, strategy: str
    ) -> CompactionEvent | None:
        """Leave out enough of ``messages`` for the view to fit ``target`` tokens (as far
        as ``strategy`` can); the event saying what was done, or ``None`` if nothing."""
        before = self.tokens(messages, fixed)
        if before <= target:
            return None
        removed = 0
        used: list[str] = []
        if strategy in ("auto", "clear-results"):
            cleared = self._clear_results(messages, fixed, target)
            if cleared:
                removed += cleared
                used.append("clear-results")
        if strategy in ("auto", "trim") and self.tokens(messages, fixed) > target:
            trimmed = self._trim(messages, fixed, target)
            if trimmed:
                removed += trimmed
                used.append("trim")
        if not removed:
            return None
        self.compactions += 1
        return CompactionEvent("+".join(used), removed, before, self.tokens(messages, fixed))

    def _last_reply(self, messages: Sequence[Message]) -> int:
        """The index of the latest assistant message (its results are never elided)."""
        for index in range(len(messages) - 1, -1, -1):
            if messages[index].role == "assistant":
                return index
        return len(messages)

    def _clear_results(self, messages: Sequence[Message], fixed: int, target: int) -> int:
        cleared = 0
        end = self._last_reply(messages)
        index = max(self.clear_from, self.start)
        while index < end and self.tokens(messages, fixed) > target:
            message = messages[index]
            if message.role == "tool" and index not in self.elided:
                count = self.counts.counts[index]
                tokens = -(-count // 4)
                stub = msgspec.structs.replace(
                    message,
                    parts=(TextPart(f"[result of {message.name} elided: {tokens} tokens]"),),
                )
                saved = count - message_characters(stub)
                if saved > 0:
                    self.elided[index] = stub
                    self.saved += saved
                    cleared += 1
                    if self.start <= index < self._built_upto:
                        self._built[index - self.start] = stub
            index += 1
        self.clear_from = index
        return cleared

    def summarized(self, text: str, count: int) -> None:
        """What ``summarize`` wrote of the ``count`` messages left out so far: it stands
        for them in the view, after the first message."""
        summary = Message.user(
            f"[Summary of the {count} earlier messages of this conversation, left out to "
            f"fit the context window]\n{text.strip()}"
        )
        self.summary = summary
        self.summary_characters = message_characters(summary)
        self.trimmed = []

    def _trim(self, messages: Sequence[Message], fixed: int, target: int) -> int:
        trimmed = 0
        last_unit = self._unit_start(messages, len(messages) - 1)
        start = self.start or self._first_unit(messages)  # the first unit stays
        while start < last_unit and self.tokens(messages, fixed) > target:
            end = start + 1
            while end < len(messages) and messages[end].role == "tool":
                end += 1
            if end > last_unit:
                break
            for index in range(start, end):
                stub = self.elided.pop(index, None)
                if stub is not None:
                    self.saved -= self.counts.counts[index] - message_characters(stub)
                self.dropped += self.counts.counts[index]
            trimmed += end - start
            self.trimmed.extend(self.elided.get(i, messages[i]) for i in range(start, end))
            del self._built[: end - self.start]  # the view's tail starts later now
            self.start = start = end
        return trimmed

    @staticmethod
    def _first_unit(messages: Sequence[Message]) -> int:
        """The length of the first unit (the first message and its results)."""
        end = 1
        while end < len(messages) and messages[end].role == "tool":
            end += 1
        return end

    @staticmethod
    def _unit_start(messages: Sequence[Message], index: int) -> int:
        """The first message of the unit ``index`` is in (tool results go with their call)."""
        while index > 0 and messages[index].role == "tool":
            index -= 1
        return index


class Compaction:
    """The compaction of one chat's requests: when to compact its conversation's view,
    how far, and the request with the view's messages."""

    def __init__(
        self,
        view: ContextView,
        strategy: str,
        compact_at: float,
        fallback: Callable[[ProviderRequest], int] = fallback_count,
        compactor: Compactor | None = None,
    ) -> None:
        self.view = view
        self.strategy = strategy
        self.compactor = compactor  # a plugin's, named ``strategy``
        # what a plugin's compactor sent: (the conversation's length then, its last
        # message, the messages sent)
        self._last: tuple[int, Message, tuple[Message, ...]] | None = None
        self.compact_at = compact_at
        self.fallback = fallback
        self.fixed: int | None = None
        self._sent: tuple[tuple[Message, ...], int] | None = None
        self._harder = False
        self.refused_after_compacting = False
        # the server's refusal the next request answers (compacted harder for it)
        self.refused: ErrorEvent | None = None
        # summarize: the messages the last trim left out, to be summarized now
        self.to_summarize: list[Message] = []
        self.summarized_count = 0

    @classmethod
    def named(
        cls,
        view: ContextView,
        name: str,
        compact_at: float,
        fallback: Callable[[ProviderRequest], int],
        compactors: CompactorRegistry,
    ) -> Compaction:
        """The compaction ``compact=name`` asks for (ollm's own, or an installed
        plugin's); a ``PluginError`` listing the installed ones when none is ``name``."""
        made = resolve_compactor(name, compactors.specs())
        if isinstance(made, str):
            return cls(view, made, compact_at, fallback)
        return cls(view, name, compact_at, fallback, made)

    def harder(self) -> bool:
        """Compact the next request harder, once: the server refused the last one as too
        long. ``False`` when it already did for this request (the chat must end)."""
        if self.refused_after_compacting:
            return False
        self._harder = self.refused_after_compacting = True
        return True

    def refusal(self, error: ErrorEvent, streamed: bool) -> ErrorEvent | None:
        """What a turn's ``error`` becomes: ``None`` when the server refused the request
        as too long and it is to be compacted harder and sent again (once, and only if
        that shortens it: ``unshortened``); when it was refused again, the server's
        refusal (``CONTEXT_EXCEEDED``: the server's word, not ollm's ``TOKEN_LIMIT``,
        which means nothing was sent); else ``error``."""
        if error.code != ErrorCode.CONTEXT_EXCEEDED or streamed:
            return error
        if self.harder():
            self.refused = error
            return None
        return ErrorEvent(
            f"{error.message} (The request was still too long after compacting the conversation.)",
            ErrorCode.CONTEXT_EXCEEDED,
        )

    def unshortened(self, event: CompactionEvent | None) -> ErrorEvent | None:
        """After ``apply`` for a request the server refused as too long: its refusal
        again when compacting did not shorten the request (``event``), which then is not
        sent a second time; ``None`` when it did, or the request answers no refusal."""
        refused, self.refused = self.refused, None
        if refused is None or (event is not None and event.tokens_after < event.tokens_before):
            return None
        return ErrorEvent(
            f"{refused.message} (Compacting could not shorten the conversation, so the request "
            "was not sent again.)",
            ErrorCode.CONTEXT_EXCEEDED,
        )

    async def summarize(
        self,
        provider: ProviderAdapter,
        model: str,
        whole: ProviderRequest,
        event: CompactionEvent,
        limit: int,
        abort: AbortSignal,
    ) -> tuple[ProviderRequest, CompactionEvent, NoticeEvent | None]:
        """One request to the model (``summarize:MODEL``'s, else ``model``) for a summary
        of what the last trim left out of ``whole``; the request with the summary in its
        view, the compaction's event, and a notice if the summary failed."""
        request = ProviderRequest(
            model=self.summary_model or model,
            messages=(Message.user(transcript(self.to_summarize, self.view.summary, limit * 2)),),
            system_prompt=SUMMARY_SYSTEM,
            options=GenerationOptions(max_tokens=max(64, int(SUMMARY_SHARE * limit))),
            abort=abort,
        )
        pieces: list[str] = []
        failed: str | None = None
        stream = provider.chat_stream(request)
        try:
            with abort.guard():
                async for item in stream:
                    if type(item) is TextEvent:
                        pieces.append(item.text)
                    elif type(item) is ErrorEvent:
                        failed = item.message
                        break
        except Exception as exc:
            failed = f"{type(exc).__name__}: {exc}"
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                with anyio.CancelScope(shield=True):
                    await aclose()
        text = "".join(pieces) if failed is None else None
        self.summarized(text)
        notice = None
        if not text:
            notice = NoticeEvent(
                "The earlier messages were left out without a summary: the summary request "
                f"failed ({failed or 'no text'}).",
                "compaction",
            )
        after = self.view.tokens(whole.messages, self.fixed or 0)
        done = CompactionEvent(self.strategy, event.removed, event.tokens_before, after)
        return self.view_of(whole), done, notice

    def now(self) -> None:
        """Compact the next request whatever its size (``ChatClient.compact_next``)."""
        self._harder = True

    def settled(self) -> None:
        """A request went through: the next refusal may be compacted again."""
        self.refused_after_compacting = False

    def apply(
        self, request: ProviderRequest, limit: int
    ) -> tuple[ProviderRequest, CompactionEvent | None]:
        """``request`` with what the view sends, compacted first if it passes
        ``compact_at`` of ``limit`` (the prompt tokens the window allows)."""
        view = self.view
        messages = request.messages
        if self.fixed is None:
            tools = ProviderRequest(request.model, (), request.system_prompt, request.tools)
            self.fixed = len(request_text(tools))
        if self.compactor is not None:
            return self._plugin(self.compactor, request, limit)
        tokens = view.tokens(messages, self.fixed)
        target: int | None = None
        if self._harder:
            self._harder = False
            target = min(int(TARGET * limit), tokens // 2)
        elif tokens > self.compact_at * limit:
            target = int(TARGET * limit)
        event = None
        if target is not None:
            strategy = self.strategy
            if strategy.startswith("summarize"):
                # Room for the summary; the messages trimmed are summarized right after.
                target -= int(SUMMARY_SHARE * limit)
                strategy = "trim"
            event = view.compact(messages, self.fixed, max(target, 0), strategy)
            if self.strategy.startswith("summarize") and view.trimmed:
                self.to_summarize = view.trimmed
            view.trimmed = []
        return self.view_of(request), event

    def _plugin(
        self, compactor: Compactor, request: ProviderRequest, limit: int
    ) -> tuple[ProviderRequest, CompactionEvent | None]:
        """``apply`` with a plugin's compactor: what it sent last time and the messages
        added since while that fits ``compact_at``, else what it makes of the whole."""
        messages = request.messages
        fixed = -(-(self.fixed or 0) // 4)
        harder, self._harder = self._harder, False
        last = self._last
        if last is not None and 0 < last[0] <= len(messages) and messages[last[0] - 1] is last[1]:
            sent = (*last[2], *messages[last[0] :])
        else:
            sent = tuple(messages)
        tokens = count_messages(sent) + fixed
        target: int | None = None
        if harder:
            target = min(int(TARGET * limit), tokens // 2)
        elif tokens > self.compact_at * limit:
            target = int(TARGET * limit)
        event = None
        if target is not None:
            before = count_messages(messages) + fixed
            try:
                made = compactor.compact(
                    messages,
                    fixed_tokens=fixed,
                    target=max(target - fixed, 0),
                    count=count_messages,
                )
                sent = tuple(made)
            except Exception as exc:
                raise PluginError(
                    f"Compactor {self.strategy!r} failed: {type(exc).__name__}: {exc}. The "
                    "request was not sent; the conversation is intact. Go on with another "
                    '(compact="auto", ollm chat --compact auto) or report this to its author '
                    "(`ollm plugins` says where it comes from)."
                ) from exc
            if not all(isinstance(m, Message) for m in sent):
                raise PluginError(
                    f"Compactor {self.strategy!r} returned something other than messages. "
                    "The request was not sent; the conversation is intact. Report this to "
                    "its author (`ollm plugins` says where it comes from)."
                )
            kept = {id(m) for m in sent}
            removed = sum(1 for m in messages if id(m) not in kept)
            tokens = count_messages(sent) + fixed
            event = CompactionEvent(self.strategy, removed, before, tokens)
        if messages:
            self._last = (len(messages), messages[-1], sent)
        if len(sent) == len(messages) and all(a is b for a, b in zip(sent, messages, strict=True)):
            self._sent = None
            return request, event
        self._sent = (sent, tokens)
        return msgspec.structs.replace(request, messages=sent), event

    def summarized(self, text: str | None) -> None:
        """What the summary request wrote of ``to_summarize`` (``None``: it failed; the
        messages stay left out without a summary)."""
        self.summarized_count += len(self.to_summarize)
        self.to_summarize = []
        if text:
            self.view.summarized(text, self.summarized_count)

    @property
    def summary_model(self) -> str | None:
        """The model ``summarize:MODEL`` names (``None``: the chat's own)."""
        return (
            self.strategy[10:].strip() or None if self.strategy.startswith("summarize:") else None
        )

    def view_of(self, request: ProviderRequest) -> ProviderRequest:
        """``request`` with the view's messages, as decided so far."""
        view = self.view
        messages = request.messages
        assert self.fixed is not None
        if view.start == 0 and not view.elided:
            self._sent = None
            return request
        sent = view.messages(messages)
        self._sent = (sent, view.tokens(messages, self.fixed))
        return msgspec.structs.replace(request, messages=sent)

    def count(self, request: ProviderRequest) -> int:
        """``fallback_count(request)``: the view's own count when ``request`` sends the
        view as ``apply`` made it (no recount of what it kept), else ``fallback``'s."""
        sent = self._sent
        if sent is not None and request.messages is sent[0]:
            return max(1, sent[1])
        return self.fallback(request)
