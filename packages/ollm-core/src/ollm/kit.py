"""The kit for plugin authors: what ollm's own plugins use beyond the names of ``ollm``.

A third party writing a provider, a tool pack or a toolset has exactly what ollm's own
plugins have; none of them imports a private ``ollm._*`` module (a test checks it).

- ``lazy_exports``: a package's names imported on first use (PEP 562), so that plugin
  discovery, which imports every registration module, stays cheap.
- ``UsageAnchors``: prompt-token estimates anchored on what the server last counted.
- ``new_call_id``: an id for a tool call whose server gave none (one format for all).
- ``quote``, ``one_line`` and ``excerpt``: a server's words, shortened to one line and
  safe, for an error message.
- ``check_toolset_name`` and ``valid_tool_name``: names every provider accepts.
- ``text_list``: the texts of an ``embed()`` call checked the same way everywhere.
- ``config_path`` and ``named_tables``: a plugin's configuration file in ollm's
  configuration folder (``~/.config/ollm/openai.toml``), or where a variable points, and
  its named tables read into typed settings, each mistake an error in words.
- ``schema_instructions``, ``extract_json`` and ``with_system``: what an output
  strategy (``ollm_output_strategies``) shares with the built-in one: the schema stated
  for the model, the JSON value read out of a reply, a request with more system prompt.
- ``output_tool_parameters`` and ``output_tool_text``: typed output as a tool's
  arguments (the ``tool`` output strategy's, or a provider's own output tool): the schema
  as an object schema (wrapped as ``{"value": ...}`` when its root is not an object), and
  the value's JSON read back from a call of that tool.
- ``nests_deeper_than``: whether JSON-like data nests past a limit, measured without
  recursion (``ollm serve`` refuses a request body that does).
- ``redaction``: a value as the chat's ``redact`` middleware makes it, for a middleware
  that records content (``ollm-otel``'s spans), whatever their order.

The HTTP side of a provider (connections, streams, retries, the mapping of failures to
ollm's errors) is the ``ollm-http`` distribution: ``ollm_http.HTTPProvider``.

Names load on first use: importing this module costs nothing.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from ollm._lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ollm.output.native import extract_json, schema_instructions, with_system
    from ollm.output.tool import output_tool_parameters, output_tool_text
    from ollm.registries.tokens import UsageAnchors, fallback_count, request_text
    from ollm.runtime.middleware import redaction
    from ollm.tools.toolset import check_toolset_name, valid_tool_name
    from ollm.types.depth import nests_deeper_than

__all__ = [
    "UsageAnchors",
    "check_toolset_name",
    "config_path",
    "excerpt",
    "extract_json",
    "fallback_count",
    "lazy_exports",
    "named_tables",
    "nests_deeper_than",
    "new_call_id",
    "one_line",
    "output_tool_parameters",
    "output_tool_text",
    "quote",
    "redaction",
    "request_text",
    "schema_instructions",
    "text_list",
    "valid_tool_name",
    "with_system",
]

_LAZY: dict[str, str] = {
    "UsageAnchors": "ollm.registries.tokens",
    "check_toolset_name": "ollm.tools.toolset",
    "extract_json": "ollm.output.native",
    "schema_instructions": "ollm.output.native",
    "with_system": "ollm.output.native",
    "output_tool_parameters": "ollm.output.tool",
    "output_tool_text": "ollm.output.tool",
    "fallback_count": "ollm.registries.tokens",
    "request_text": "ollm.registries.tokens",
    "redaction": "ollm.runtime.middleware",
    "valid_tool_name": "ollm.tools.toolset",
    "nests_deeper_than": "ollm.types.depth",
}

# The longest server message quoted whole in an error message.
QUOTE_LIMIT = 300

T = TypeVar("T")


def new_call_id() -> str:
    """A new tool-call id, ``call_`` and 24 hex digits (96 random bits), as OpenAI's look.

    For calls whose server sent no id (Ollama, some Gemini models): unique across a
    conversation, so that every result finds its call.
    """
    # os.urandom, not secrets: secrets imports hashlib and hmac (time at start-up).
    return f"call_{os.urandom(12).hex()}"


def quote(text: str, limit: int = QUOTE_LIMIT) -> str:
    """``text`` (a server's message) as one line, stripped, and cut at ``limit``
    characters with ``...``.

    A message of several lines (a validation dump, a Python traceback) is its one
    meaningful line (``one_line``): an error is one line, the whole body is for
    ``--debug``. Its own last full stop, ``!`` or ``?`` goes, so that it reads well
    inside a sentence of ollm's ("... failed: Sorry about that. Try again.", never
    "that!. Try").
    """
    # A control character (a terminal's escape) is no part of a message.
    text = "".join(c if c.isprintable() else " " for c in one_line(text)).strip()
    if len(text) > limit:
        return text[:limit] + "..."
    if text.endswith((".", "!", "?")) and not text.endswith("..."):
        text = text.rstrip(".!?").rstrip()
    return text


# A frame of a Python traceback, and the line of code under it.
_FRAME = re.compile(r'^File "[^"]*", line \d+')
# A pydantic error in a FastAPI validation dump (v1 and v2 shapes): where, and what.
_PYDANTIC = re.compile(r"""'type': '([^']*)', 'loc': \(([^)]*)\), 'msg': (?:'([^']*)'|"([^"]*)")""")
# Errors a union of message shapes repeats for each shape it is not (llama-cpp-python's
# 7 errors for one assistant message with "content": null): the others say more.
_UNION_NOISE = ("literal_error", "missing", "union_tag_invalid")
_VALIDATION_HEADER = re.compile(r"^\d+ validation errors?\b.*:?$")
_TRACEBACK = "Traceback (most recent call last):"
_TAG = re.compile(r"<[^>]*>")


def one_line(text: str) -> str:
    """The meaningful line of a server's message, stripped.

    One line stays as it is. Of several: a FastAPI or pydantic validation dump gives
    its first error's place and words (``body.response_format.type: Input should be
    'text' or 'json_object'``, with ``(and N more)``); a Python traceback its
    exception's line; anything else its first line that is not a traceback's frame,
    its code or a header ending with a colon.
    """
    lines = [line.strip() for line in text.strip().splitlines()]
    lines = [line for line in lines if line]
    if len(lines) <= 1:
        return lines[0] if lines else ""
    found = _PYDANTIC.findall(text)
    if found:
        telling = [error for error in found if error[0] not in _UNION_NOISE]
        _, loc, single, double = (telling or found)[0]
        where = ".".join(part.strip(" '\"") for part in loc.split(",") if part.strip(" '\""))
        said = f"{where}: {single or double}" if where else single or double
        return said + (f" (and {len(found) - 1} more)" if len(found) > 1 else "")
    if _VALIDATION_HEADER.match(lines[0]) and len(lines) >= 3 and " " not in lines[1]:
        # pydantic v2's own text: the header, the field's place, then what is wrong.
        return f"{lines[1]}: {lines[2].split(' [type=')[0]}"
    if _TRACEBACK in lines:
        # The exception's line is the last one that is not a frame or its code.
        after = lines[lines.index(_TRACEBACK) + 1 :]
        plain = [
            line
            for number, line in enumerate(after)
            if not _FRAME.match(line) and not (number and _FRAME.match(after[number - 1]))
        ]
        if plain:
            return plain[-1]
    skip_next = False
    for number, line in enumerate(lines):
        if skip_next:
            skip_next = False
            continue
        if _FRAME.match(line):
            skip_next = True  # the frame's line of code, or a route under it
            continue
        if line == _TRACEBACK or _VALIDATION_HEADER.match(line):
            continue
        if line.endswith(":") and number + 1 < len(lines):
            continue  # a header: what follows says it
        words = _TAG.sub(" ", line).strip() if line.startswith("<") else line
        if words:
            return " ".join(words.split())  # an HTML page's first words
    return lines[0]


def excerpt(data: bytes | str, limit: int = 200) -> str:
    """Up to ``limit`` characters of ``data`` (a server's bytes or text), quoted with ``repr``.

    For an error message about a reply that is not what was expected: undecodable
    bytes become U+FFFD, and a cut is marked with ``...``.
    """
    if isinstance(data, str):
        text = data[: limit + 1]
        cut = len(data) > limit
    else:
        text = data[: limit * 4].decode("utf-8", "replace")
        # Bytes left out are a cut too: 4-byte characters can fill the limit exactly.
        cut = len(text) > limit or len(data) > limit * 4
    if cut:
        return repr(text[:limit]) + "..."
    return repr(text)


def config_path(
    name: str, variable: str | None = None, environ: Mapping[str, str] | None = None
) -> Path:
    """The configuration file ``name``: where ``variable`` points, if it is set, else in
    ollm's configuration folder (``$XDG_CONFIG_HOME/ollm``, ``~/.config/ollm``, or
    ``%APPDATA%\\ollm`` on Windows). ``environ`` defaults to ``os.environ``."""
    env = os.environ if environ is None else environ
    explicit = env.get(variable) if variable else None
    if explicit:
        return Path(explicit).expanduser()
    if sys.platform == "win32" and env.get("APPDATA"):
        base = Path(env["APPDATA"])
    elif env.get("XDG_CONFIG_HOME"):
        base = Path(env["XDG_CONFIG_HOME"])
    else:
        base = Path(env.get("HOME") or Path.home()) / ".config"
    return base / "ollm" / name


def named_tables(
    path: Path,
    kind: type[T],
    *,
    what: str,
    item: str,
    variable: str,
    shape: str,
    table: str,
) -> dict[str, T]:
    """The tables of the TOML file ``path``, each converted to ``kind`` (a ``msgspec.Struct``)
    by name; ``{}`` when there is no file.

    Every mistake is an ``InvalidRequestError`` naming the file: one that cannot be read
    (point ``variable`` elsewhere), that is not TOML (``shape`` says what it should look
    like), a value that is not a table (``table``, formatted with ``name``, says how to
    write one), an ``item`` with a wrong or unknown setting (the known ones are listed).
    ``what`` names the file in messages (``"The pools file"``).
    """
    import tomllib

    import msgspec

    from ollm.errors import InvalidRequestError

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidRequestError(
            f"{what} {path} cannot be read ({exc}). Fix it, or point {variable} at another file."
        ) from None
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidRequestError(f"{what} {path} is not valid TOML ({exc}). {shape}") from None
    found: dict[str, T] = {}
    for name, value in data.items():
        if not isinstance(value, dict):
            raise InvalidRequestError(
                f"In {what[:1].lower()}{what[1:]} {path}, {name!r} is not a table. "
                + table.format(name=name)
            )
        try:
            found[name] = msgspec.convert(value, kind)
        except msgspec.ValidationError as exc:
            fields = getattr(kind, "__struct_fields__", ())
            raise InvalidRequestError(
                f"The {item} {name!r} in {path} is not valid: {exc}. Known settings: "
                f"{', '.join(fields)}."
            ) from None
    return found


def text_list(texts: object, what: str = "embed()") -> list[str]:
    """``texts`` as a list of strings, or ``InvalidRequestError`` saying what ``what`` takes.

    One string is refused (it would be embedded character by character by some
    servers, or be an error from others): wrap it in a list.
    """
    from ollm.errors import InvalidRequestError

    if isinstance(texts, (str, bytes)):
        raise InvalidRequestError(
            f"{what} takes a list of texts, not one string: wrap it in a list ([text])."
        )
    try:
        items: list[object] = list(texts)  # type: ignore[call-overload]
    except TypeError:
        raise InvalidRequestError(
            f"{what} takes a list of texts, not a {type(texts).__name__}."
        ) from None
    strings = [text for text in items if isinstance(text, str)]
    if len(strings) != len(items):
        raise InvalidRequestError(f"{what} takes a list of strings.")
    return strings


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
