"""The batch parser: one whole reply in, an action, a final answer or a format problem out.

It is the single source of truth: the streaming scanner only decides when to show
text and when to stop the generation; what the reply means is decided here, on the
text the stream buffered. The rules are react-guide.md's, in this order:

1. ``<think>`` blocks are removed (the server's thinking channel is preferred).
2. Everything from the first line-start ``Observation:`` on is cut: the model invented it.
3. The first of ``Action``, ``Action Input`` or ``Final Answer`` (``Answer``) decides.
   A Final Answer after an Action is speculation and is dropped; an Action (or a new
   Thought) after a Final Answer ends the answer. Text with no marker at all is an
   implicit final answer.
4. An action's tool is resolved (exact, case-insensitive, normalised, unique), its
   input decoded (``_arguments``) and checked against the tool's schema.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from ollm.types import ToolSchema
from ollm_react._arguments import (
    EMPTY,
    Decoded,
    arguments_for,
    call_opening,
    decode_call,
    decode_input,
    strip_fences,
)
from ollm_react._blobs import MISSING, call_in, is_final_name
from ollm_react._markers import (
    MARKERS,
    content_start,
    is_bare_fence,
    is_fence_line,
    marker_kind,
)
from ollm_react._placeholder import is_placeholder
from ollm_react._think import think_pieces

__all__ = [
    "FormatProblem",
    "ParsedAction",
    "ParsedAnswer",
    "ParsedReply",
    "ProblemKind",
    "has_protocol_text",
    "parse_reply",
    "resolve_tool",
    "split_inline_markers",
    "without_protocol_text",
]


_LONGEST_NAME = 100  # tool names have at most 64 characters; longer is prose


class ParsedAction(msgspec.Struct, frozen=True):
    """A valid call: the tool's registered name and its checked arguments."""

    tool: str
    args: dict[str, Any]
    thought: str = ""


class ParsedAnswer(msgspec.Struct, frozen=True):
    """A final answer; ``implicit`` when the reply had no marker at all."""

    answer: str
    thought: str = ""
    implicit: bool = False


ProblemKind = Literal[
    "empty",
    "empty_answer",
    "thought_only",
    "input_before_action",
    "missing_tool",
    "unknown_tool",
    "missing_input",
    "bad_input",
    "placeholder",
]


class FormatProblem(msgspec.Struct, frozen=True):
    """A reply that cannot be used; ``detail`` says exactly what was wrong.

    ``text`` is the reply as the model wrote it, cut at an invented Observation.
    ``tool`` names the tool when the problem is in its input; ``suggestion`` is the
    closest tool name when the tool was unknown.
    """

    kind: ProblemKind
    detail: str
    text: str
    thought: str = ""
    tool: str | None = None
    suggestion: str | None = None


ParsedReply = ParsedAction | ParsedAnswer | FormatProblem


def parse_reply(text: str, tools: Sequence[ToolSchema] = ()) -> ParsedReply:
    """What a whole reply means. Never raises, whatever the text.

    An answer that is only a placeholder (``<the answer for the user>``, copied from
    some instructions) is a ``placeholder`` problem: never the user's answer.
    """
    parsed = _parse_reply(text, tools)
    if isinstance(parsed, ParsedAnswer) and is_placeholder(parsed.answer):
        return FormatProblem(
            "placeholder",
            f"the Final Answer was a placeholder, {parsed.answer.strip()!r}, not an answer",
            parsed.answer,
            parsed.thought,
        )
    return parsed


def _parse_reply(text: str, tools: Sequence[ToolSchema] = ()) -> ParsedReply:
    """The reply's meaning, placeholders aside.

    Markers count at the start of a line. When that reading finds no action and no
    explicit answer, a second, looser reading splits lines before markers written in
    the middle of a line (``Thought: x Action: search Action Input: {...}``) and is
    used if it finds more: an action, an answer, or a problem that names what is
    really wrong. Prose that merely looks like a marker (an implicit answer whose
    "Action:" names no tool) stays an answer, and an empty line-start Final Answer
    stays empty (a stream shows the answer from that line on).
    """
    content = _content(text)
    strict = _parse_content(content, tools)
    if isinstance(strict, ParsedAction) or (
        isinstance(strict, ParsedAnswer) and not strict.implicit
    ):
        return strict
    split = split_inline_markers(content)
    if split == content:
        return strict
    loose = _parse_content(split, tools)
    if isinstance(loose, ParsedAnswer) and isinstance(strict, FormatProblem):
        # An empty line-start Final Answer stays empty: a stream shows the answer from
        # there, so an answer that the looser reading starts earlier was never shown.
        return strict if strict.kind == "empty_answer" else loose
    if isinstance(loose, (ParsedAction, ParsedAnswer)):
        return loose
    if isinstance(strict, ParsedAnswer) and loose.kind in _PROSE_PROBLEMS:
        return strict
    return loose


# Problems of a loose reading that may as well be prose that looks like a marker.
_PROSE_PROBLEMS = frozenset({"unknown_tool", "missing_tool", "empty_answer", "thought_only"})
_INLINE = re.compile(
    r"(?<=\S)[ \t]+(?=(?:\*\*)?(?:Thought|Action Input|Action|Final Answer|Observation)"
    r"(?:\*\*)?:)"
)


def split_inline_markers(text: str) -> str:
    """``text`` with a line break before each marker written in the middle of a line."""
    return _INLINE.sub("\n", text)


_PROTOCOL = re.compile(
    r"(?:^|(?<=\s)|(?<=\*))(?:Action[ \t_-]{0,3}Input|Action|Observation|Final[ \t_-]{0,3}Answer)"
    r"[ \t]{0,3}(?:\*\*)?[ \t]{0,3}:",
    re.IGNORECASE,
)


def has_protocol_text(text: str) -> bool:
    """Whether ``text`` still holds ReAct markers (it must not be shown as an answer)."""
    return _PROTOCOL.search(text) is not None


def without_protocol_text(text: str) -> str:
    """``text`` up to its first ReAct marker (what may be shown of it)."""
    match = _PROTOCOL.search(text)
    return (text[: match.start()] if match else text).strip()


def _parse_content(content: str, tools: Sequence[ToolSchema]) -> ParsedReply:
    markers = list(MARKERS.finditer(content))
    for index, match in enumerate(markers):
        if marker_kind(match) == "observation":
            content = content[: match.start()]
            markers = markers[:index]
            break
    written = content.strip()
    if not markers:
        if not written:
            return FormatProblem("empty", "the reply was empty", written)
        blob = _blob_reply(written, tools, "")
        return blob if blob is not None else ParsedAnswer(written, implicit=True)

    thoughts = [_clean_thought(content[: markers[0].start()])]
    decisive = -1
    for index, match in enumerate(markers):
        if marker_kind(match) != "thought":
            decisive = index
            break
        thoughts.append(_clean_thought(_body(content, markers, index)))
    thought = "\n".join(t for t in thoughts if t)
    if decisive < 0:
        # A call written as a JSON object inside the thought is still a call.
        last = _body(content, markers, len(markers) - 1)
        blob = _blob_reply(last, tools, thought, inside=True)
        if blob is not None:
            return blob
        return FormatProblem(
            "thought_only",
            "the reply had a Thought but no Action and no Final Answer",
            written,
            thought,
        )
    match = markers[decisive]
    kind = marker_kind(match)
    if kind == "answer":
        end = next(
            (m.start() for m in markers[decisive + 1 :] if marker_kind(m) != "answer"),
            len(content),
        )
        answer = _answer(content, match, end)
        if not answer:
            return FormatProblem("empty_answer", "the Final Answer was empty", written, thought)
        return ParsedAnswer(answer, thought)
    if kind == "input":
        return FormatProblem(
            "input_before_action",
            "the reply had an Action Input but no Action line before it",
            written,
            thought,
        )
    return _parse_action(content, markers, decisive, tools, written, thought)


def _answer(content: str, match: re.Match[str], end: int) -> str:
    """The Final Answer's text, without a stray fence that closes a fenced reply.

    Small models sometimes wrap the whole reply in a code fence; its closing line is
    not part of the answer. It is dropped only when a fence opened before the marker
    and the answer's own fence lines (those after the marker's line) are unbalanced,
    so a code block inside the answer keeps its fences.
    """
    start = content_start(match, content)
    answer = content[start:end].strip()
    if not answer:
        return answer
    if sum(map(is_fence_line, content[: match.start()].split("\n"))) % 2 == 0:
        return answer
    marker_line_end = content.find("\n", match.start())
    if marker_line_end < 0 or marker_line_end >= end:
        return answer
    if sum(map(is_fence_line, content[marker_line_end + 1 : end].split("\n"))) % 2 == 0:
        return answer
    last_end = len(content[:end].rstrip())
    last_start = content.rfind("\n", 0, last_end) + 1
    if last_start > marker_line_end and is_bare_fence(content[last_start:last_end]):
        return content[start:last_start].strip()
    return answer


def _parse_action(
    content: str,
    markers: list[re.Match[str]],
    index: int,
    tools: Sequence[ToolSchema],
    written: str,
    thought: str,
) -> ParsedReply:
    action = _body(content, markers, index).strip()
    if strip_fences(action).startswith("{"):
        # Action: with nothing after it, then the call as a JSON object (fenced or not).
        return _parse_blob(decode_input(action), tools, written, thought)
    opening = call_opening(action)
    raw_name = action[:opening] if opening >= 0 else action.split("\n", 1)[0]
    name = clean_tool_name(raw_name)
    if not name:
        return FormatProblem("missing_tool", "the Action line had no tool name", written, thought)
    schema, suggestion = resolve_tool(name, tools)
    if schema is None and " " in name:
        # "search (to find the score)": the first word may be the tool.
        first, first_suggestion = resolve_tool(clean_tool_name(name.split()[0]), tools)
        if first is not None:
            schema, suggestion = first, first_suggestion
    if schema is None:
        shown = name if len(name) <= _LONGEST_NAME else name[:_LONGEST_NAME] + "..."
        same = [t.name for t in tools if _normalise(t.name) == _normalise(name)]
        what = (
            f"the tool name {shown!r} could mean {' or '.join(same)}"
            if len(same) > 1
            else f"there is no tool named {shown!r}"
        )
        return FormatProblem(
            "unknown_tool",
            what,
            written,
            thought,
            tool=shown,
            suggestion=suggestion,
        )
    decoded: Decoded
    if opening >= 0:
        decoded = decode_call(action[opening:])
    else:
        found = _input_after(content, markers, index)
        if found is None:
            return FormatProblem(
                "missing_input",
                "the Action had no Action Input line after it",
                written,
                thought,
                tool=schema.name,
            )
        decoded = decode_input(found)
    args, problem = arguments_for(decoded, schema.name, schema.parameters)
    if args is None:
        return FormatProblem(
            "bad_input", problem or "the Action Input was not valid", written, thought, schema.name
        )
    return ParsedAction(schema.name, args, thought)


def _parse_blob(
    decoded: Decoded, tools: Sequence[ToolSchema], written: str, thought: str
) -> ParsedReply:
    """An action written as a JSON object: ``{"action": ..., "action_input": ...}`` and kin."""
    if decoded.problem is not None:
        detail = decoded.problem.replace("Action Input", "the Action's JSON", 1)
        return FormatProblem("bad_input", detail, written, thought)
    call = call_in(decoded.value)
    if call is None:
        return FormatProblem(
            "missing_tool",
            'the Action\'s JSON names no tool: write {"action": "TOOL", '
            '"action_input": {...}}, or the tool\'s name on the Action line and its input '
            "on an Action Input line",
            written,
            thought,
        )
    name, args = call
    if is_final_name(name):
        answer = args if isinstance(args, str) else "" if args is MISSING else _dump(args)
        if not answer.strip():
            return FormatProblem("empty_answer", "the Final Answer was empty", written, thought)
        return ParsedAnswer(answer.strip(), thought)
    schema, suggestion = resolve_tool(clean_tool_name(name), tools)
    if schema is None:
        shown = name if len(name) <= _LONGEST_NAME else name[:_LONGEST_NAME] + "..."
        return FormatProblem(
            "unknown_tool",
            f"there is no tool named {shown!r}",
            written,
            thought,
            tool=shown,
            suggestion=suggestion,
        )
    value = EMPTY if args is MISSING else args
    checked, problem = arguments_for(Decoded(value), schema.name, schema.parameters)
    if checked is None:
        return FormatProblem(
            "bad_input", problem or "the Action Input was not valid", written, thought, schema.name
        )
    return ParsedAction(schema.name, checked, thought)


def _blob_reply(
    text: str, tools: Sequence[ToolSchema], thought: str, *, inside: bool = False
) -> ParsedReply | None:
    """A reply (or a thought) that is a call written as a JSON object, if it names a tool.

    Only a call to an offered tool (or a Final Answer) counts: any other JSON is text.
    ``inside`` looks for the object anywhere in the text (after a thought's words).
    """
    body = strip_fences(text)
    start = body.find("{") if inside else (0 if body.startswith("{") else -1)
    while start >= 0:
        decoded = decode_input(body[start:])
        call = call_in(decoded.value) if decoded.problem is None else None
        if call is not None:
            name = call[0]
            if is_final_name(name) or resolve_tool(clean_tool_name(name), tools)[0] is not None:
                return _parse_blob(decoded, tools, text.strip(), thought)
        if not inside:
            return None
        start = body.find("{", start + 1)
    return None


def _dump(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def _input_after(content: str, markers: list[re.Match[str]], index: int) -> str | None:
    """The Action Input that belongs to the Action at ``index`` (Thoughts may come between)."""
    for later in range(index + 1, len(markers)):
        kind = marker_kind(markers[later])
        if kind == "input":
            return _body(content, markers, later)
        if kind != "thought":
            return None
    return None


def _body(content: str, markers: list[re.Match[str]], index: int) -> str:
    """A marker's content: from after its colon to the next marker's line."""
    match = markers[index]
    end = markers[index + 1].start() if index + 1 < len(markers) else len(content)
    return content[content_start(match, content) : end]


def _clean_thought(text: str) -> str:
    lines = [line for line in text.split("\n") if not is_fence_line(line)]
    return "\n".join(lines).strip()


def _content(text: str) -> str:
    """The reply without its think blocks.

    A ``</think>`` with no opening tag makes what came before it thinking, when no
    marker came first (since the last such tag); otherwise it is ordinary text. The
    streaming scanner applies the same rule.
    """
    parts: list[str] = []
    start = 0  # where the text after the last counted closing tag begins in ``parts``
    seen = False  # a marker came since then
    for kind, piece in think_pieces(text):
        if kind == "content":
            parts.append(piece)
        elif kind == "orphan":
            seen = seen or MARKERS.search("".join(parts[start:])) is not None
            if seen:
                parts.append(piece)
            else:
                start = len(parts)
    return "".join(parts[start:])


def clean_tool_name(text: str) -> str:
    """A tool name as the model wrote it, without backticks, quotes, emphasis or brackets."""
    name = text.strip().strip("`*'\"").strip()
    if len(name) >= 2 and name[0] + name[-1] in ("[]", "<>"):
        name = name[1:-1].strip().strip("`*'\"").strip()
    return name.rstrip(".,:;").strip()


def _normalise(name: str) -> str:
    return "".join(c for c in name.lower() if c.isalnum())


def resolve_tool(name: str, tools: Sequence[ToolSchema]) -> tuple[ToolSchema | None, str | None]:
    """The one tool ``name`` means (exact, case-insensitive, normalised), else a suggestion."""
    for match in (
        [t for t in tools if t.name == name],
        [t for t in tools if t.name.lower() == name.lower()],
        [t for t in tools if _normalise(t.name) == _normalise(name)],
    ):
        if len(match) == 1:
            return match[0], None
        if len(match) > 1:
            return None, match[0].name
    if len(name) > _LONGEST_NAME:
        return None, None
    folded = {t.name.lower(): t.name for t in tools}
    close = difflib.get_close_matches(name.lower(), list(folded), n=1, cutoff=0.5)
    return None, folded[close[0]] if close else None
