"""Internal: what counts as a placeholder, never an answer: a template's words in angle
brackets (``<the answer for the user>``), or the instructions' own words for the answer,
which a small model copies (issue 44). The batch parser and json-react refuse such an
answer; the stream holds an answer back while it may still turn out one."""

from __future__ import annotations

import re

__all__ = ["ANSWER_WORDS", "could_become_placeholder", "is_placeholder"]

# A whole reply of words in angle brackets, with a space among them: a template's
# placeholder (``<your answer for the user>``), never an answer (nor an HTML tag).
_PLACEHOLDER = re.compile(r"<\s*[^\W\d_][\w ,.'’:;/-]*\s[\w ,.'’:;/-]*>")
#: How the instructions of both strategies describe the answer. A small model copies
#: it as its answer ("the answer itself, written out for the user"): so a reply that
#: is these words, or a run of three or more of them, is a placeholder too.
ANSWER_WORDS = "the answer itself, written out for the user"
#: A longer answer is never taken for a placeholder (so a stream holds back at most this
#: much of an answer while it is undecided).
_LONGEST = 200
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")  # punctuation aside
_DESCRIBED = _WORD.findall(ANSWER_WORDS.lower())
_DESCRIPTION = f" {' '.join(_DESCRIBED)} "


def is_placeholder(answer: str) -> bool:
    """Whether ``answer`` is only a template's placeholder, such as ``<the answer>``,
    or the instructions' own words for the answer."""
    text = answer.strip()
    if len(text) > _LONGEST:
        return False
    if _PLACEHOLDER.fullmatch(text) is not None:
        return True
    words = _WORD.findall(text.lower())
    return len(words) >= 3 and f" {' '.join(words)} " in _DESCRIPTION


def could_become_placeholder(start: str) -> bool:
    """Whether an answer that starts with ``start`` may still be a placeholder: the
    stream holds it back until it is decided (a real answer shows after a word or two)."""
    text = start.strip()
    if len(text) > _LONGEST:
        return False
    if text.startswith("<"):
        return ">" not in text or is_placeholder(text)
    words = _WORD.findall(text.lower())
    if not words:
        return True  # nothing but space or punctuation yet
    *whole, last = words
    return any(
        _DESCRIBED[i : i + len(whole)] == whole
        and i + len(whole) < len(_DESCRIBED)
        and _DESCRIBED[i + len(whole)].startswith(last)
        for i in range(len(_DESCRIBED))
    )
