"""The line-start markers of the ReAct protocol, shared by the batch and streaming parsers.

A marker counts only at the start of a line. Small models decorate them, so the line
may begin with spaces, ``>``, ``#``, ``*``, ``_`` or backticks, the name may carry a
number (``Action 1:``) and emphasis may close before or after the colon
(``**Action**:``, ``**Action:**``). Names are case-insensitive, and the words of
``Final Answer`` and ``Action Input`` may be joined by spaces, ``_`` or ``-``. Every
decoration is bounded, so a line that may still become a marker is short and the
streaming parser never re-reads a long one.
"""

from __future__ import annotations

import re
from typing import Literal

__all__ = [
    "MARKERS",
    "MARKER_LINE",
    "MarkerKind",
    "content_start",
    "could_be_fence",
    "could_become_marker",
    "is_bare_fence",
    "is_fence_line",
    "marker_kind",
]

MarkerKind = Literal["thought", "answer", "action", "input", "observation"]

_LEAD = r"(?P<lead>[ \t>#*_`]{0,40})"
_SEP = r"[ \t_-]{0,3}"
_NAME_WORDS = (
    "thought",
    "thoughts",
    "final answer",
    "answer",
    "action input",
    "action",
    "observation",
)
# Longer alternatives first: "action input" must be tried before "action".
_NAMES = rf"(?P<name>thoughts?|final{_SEP}answer|answer|action{_SEP}input|action|observation)"
_NUMBER = r"(?:[ \t]{0,3}#?[0-9]{1,4})?"
_CLOSE = r"(?P<close>[ \t]{0,3}[*_`]{0,4}[ \t]{0,3})"

MARKER_LINE = re.compile(rf"{_LEAD}{_NAMES}{_NUMBER}{_CLOSE}:", re.IGNORECASE)
"""A marker at the start of one line (``match``)."""

MARKERS = re.compile(rf"^{_LEAD}{_NAMES}{_NUMBER}{_CLOSE}:", re.IGNORECASE | re.MULTILINE)
"""Every marker of a text (``finditer``); ``start()`` is the start of its line."""


def _prefix_pattern(words: str) -> str:
    """A pattern for every prefix of ``words`` (nested optional groups)."""
    tokens = [_SEP if char == " " else re.escape(char) for char in words]
    pattern = ""
    for token in reversed(tokens):
        pattern = f"{token}(?:{pattern})?" if pattern else f"{token}"
    return pattern


# "\r" may end a line that is still undecided ("```\r" of a CRLF reply).
_PARTIAL = re.compile(
    rf"[ \t>#*_`\r]{{0,40}}(?:"
    rf"(?:thoughts?|final{_SEP}answer|answer|action{_SEP}input|action|observation)"
    rf"(?:[ \t]{{0,3}}#?[0-9]{{0,4}})?[ \t]{{0,3}}[*_`]{{0,4}}[ \t]{{0,3}}"
    rf"|{'|'.join(_prefix_pattern(words) for words in _NAME_WORDS)}"
    rf")?",
    re.IGNORECASE,
)

_FENCE = re.compile(r"[ \t>]*```[ \t]*[\w+.#-]*[ \t\r]*")
_LONGEST_FENCE = 80
_BARE_FENCE = re.compile(r"[ \t>]*```[ \t\r]*")
_FENCE_PREFIX = re.compile(r"[ \t>]*(?:`{1,2}|```[ \t]*[\w+.#-]*[ \t\r]*)?")


def marker_kind(match: re.Match[str]) -> MarkerKind:
    """What a marker match announces."""
    name = match.group("name").lower()
    if name.startswith("action"):
        return "input" if name.endswith("input") else "action"
    if name.startswith("thought"):
        return "thought"
    if name.startswith("observation"):
        return "observation"
    return "answer"


def content_start(match: re.Match[str], text: str) -> int:
    """Where the marker's content begins in ``text``: after the colon and its emphasis.

    ``**Final Answer:** 42`` closes its emphasis after the colon; that closing is
    skipped only when the line opened emphasis (or code) that did not close before
    the colon, so an answer that itself starts with ``*`` keeps it.
    """
    end = match.end()
    if strips_after_colon(match):
        while end < len(text) and text[end] in "*_`":
            end += 1
    return end


def strips_after_colon(match: re.Match[str]) -> bool:
    """Whether emphasis right after the colon belongs to the marker."""
    lead = match.group("lead")
    close = match.group("close")
    return any(c in "*_`" for c in lead) and not any(c in "*_`" for c in close)


def could_become_marker(partial_line: str) -> bool:
    """Whether more characters could still make this unfinished line a marker line."""
    return _PARTIAL.fullmatch(partial_line) is not None


def could_be_fence(partial_line: str) -> bool:
    """Whether an unfinished line may still turn out to be a code fence line."""
    return len(partial_line) <= _LONGEST_FENCE and _FENCE_PREFIX.fullmatch(partial_line) is not None


def is_bare_fence(line: str) -> bool:
    """A fence line with no language: the only kind that closes a block."""
    return _BARE_FENCE.fullmatch(line) is not None


def is_fence_line(line: str) -> bool:
    """A code fence line (```` ``` ```` or ```` ```json ````, perhaps quoted with ``>``)."""
    return len(line) <= _LONGEST_FENCE and _FENCE.fullmatch(line) is not None
