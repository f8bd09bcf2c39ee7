"""Read a tool's description and its parameters' descriptions from a docstring.

Google (``Args:``), NumPy (``Parameters`` underlined) and Sphinx (``:param x:``) styles
are understood; anything else becomes the description as it is.
"""

from __future__ import annotations

import inspect
import re

__all__ = ["Docstring", "parse_docstring"]

_GOOGLE_ARGS = re.compile(r"^(args|arguments|parameters|params|keyword args|kwargs)\s*:\s*$", re.I)
_GOOGLE_OTHER = re.compile(
    r"^(returns?|yields?|raises?|examples?|notes?|warnings?|see also|references|"
    r"attributes|todo|example)\s*:\s*$",
    re.I,
)
_NUMPY_UNDERLINE = re.compile(r"^\s*-{3,}\s*$")
_SPHINX_FIELD = re.compile(r"^:(\w+)(?:\s+([^:]*?))?:\s*(.*)$")
_GOOGLE_ENTRY = re.compile(r"^(\*{0,2}[A-Za-z_]\w*)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")
_NUMPY_ENTRY = re.compile(r"^([A-Za-z_][\w, ]*?)\s*(?::\s*(.*))?$")


class Docstring:
    """A parsed docstring: the description and one line per documented parameter."""

    __slots__ = ("description", "params")

    def __init__(self, description: str, params: dict[str, str]) -> None:
        self.description = description
        self.params = params

    def __repr__(self) -> str:
        return f"Docstring(description={self.description!r}, params={self.params!r})"


def parse_docstring(doc: str | None) -> Docstring:
    """Split ``doc`` into a description and per-parameter descriptions."""
    if not doc:
        return Docstring("", {})
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    i = 0
    in_description = True
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if _GOOGLE_ARGS.match(stripped) and not _is_numpy_header(lines, i):
            in_description = False
            i = _read_google(lines, i + 1, params)
            continue
        if _is_numpy_header(lines, i):
            in_description = False
            if stripped.lower() in ("parameters", "params", "arguments", "other parameters"):
                i = _read_numpy(lines, i + 2, params)
            else:
                i = _skip_numpy_section(lines, i + 2)
            continue
        field = _SPHINX_FIELD.match(stripped)
        if field:
            in_description = False
            i = _read_sphinx(lines, i, params)
            continue
        if _GOOGLE_OTHER.match(stripped):
            in_description = False
            i = _skip_google_section(lines, i + 1)
            continue
        if in_description:
            description.append(line)
        i += 1
    return Docstring(_join_paragraphs(description), params)


def _join_paragraphs(lines: list[str]) -> str:
    text = "\n".join(lines).strip()
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip()]
    return "\n\n".join(paragraphs)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _is_numpy_header(lines: list[str], i: int) -> bool:
    return (
        i + 1 < len(lines) and bool(lines[i].strip()) and bool(_NUMPY_UNDERLINE.match(lines[i + 1]))
    )


def _read_google(lines: list[str], i: int, params: dict[str, str]) -> int:
    entry_indent: int | None = None
    current: str | None = None
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        indent = _indent(line)
        if indent == 0:
            break
        if entry_indent is None:
            entry_indent = indent
        if indent <= entry_indent:
            match = _GOOGLE_ENTRY.match(line.strip())
            if match is None:
                break
            current = match.group(1).lstrip("*")
            params[current] = match.group(3).strip()
        elif current is not None:
            params[current] = (params[current] + " " + line.strip()).strip()
        i += 1
    return i


def _read_numpy(lines: list[str], i: int, params: dict[str, str]) -> int:
    current: list[str] = []
    while i < len(lines):
        line = lines[i]
        if _is_numpy_header(lines, i):
            break
        if not line.strip():
            i += 1
            continue
        if _indent(line) == 0:
            match = _NUMPY_ENTRY.match(line.strip())
            if match is None:
                break
            # "x, y : int" documents two parameters at once.
            current = [n.strip() for n in line.split(":", 1)[0].split(",") if n.strip()]
            for name in current:
                params[name] = ""
        else:
            for name in current:
                params[name] = (params[name] + " " + line.strip()).strip()
        i += 1
    return i


def _skip_numpy_section(lines: list[str], i: int) -> int:
    while i < len(lines) and not _is_numpy_header(lines, i):
        i += 1
    return i


def _skip_google_section(lines: list[str], i: int) -> int:
    while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > 0):
        i += 1
    return i


def _read_sphinx(lines: list[str], i: int, params: dict[str, str]) -> int:
    match = _SPHINX_FIELD.match(lines[i].strip())
    assert match is not None
    kind, target, text = match.group(1), (match.group(2) or "").strip(), match.group(3)
    i += 1
    while i < len(lines) and lines[i].strip() and _indent(lines[i]) > 0:
        text += " " + lines[i].strip()
        i += 1
    if kind in ("param", "parameter", "arg", "argument", "key", "keyword") and target:
        # ":param int x: ..." names the type first; the parameter is the last word.
        params[target.split()[-1]] = text.strip()
    return i
