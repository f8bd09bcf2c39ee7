"""Writing to the terminal: the answer on stdout, everything else on stderr, colour if wanted."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from typing import TextIO

__all__ = ["Terminal", "for_the_command_line", "replace_undecodable"]

_CODES = {"dim": "2", "bold": "1", "red": "31", "yellow": "33", "green": "32", "cyan": "36"}

# A byte the decoder could not read is kept by Python as a lone surrogate (the
# "surrogateescape" error handler: the process's arguments, and standard input as ollm
# reads it). No other way into a str read from outside makes one.
_UNDECODABLE = re.compile("[\ud800-\udfff]")

# What the library says to a Python caller, and what a user of the command line does
# instead (the messages of ollm's core; a provider's messages are its own).
_LIBRARY_WORDS = (
    ("(context_window=...)", "(--context-window N)"),
    ("(provider=NAME, or set_default(NAME))", "(-p NAME, or OLLM_PROVIDER=NAME)"),
    ("(middleware_timeout=...)", "(--middleware-timeout SECONDS)"),
)


def replace_undecodable(text: str) -> tuple[str, int]:
    """``text`` with each byte that could not be decoded as U+FFFD, and how many there were."""
    return _UNDECODABLE.subn("\ufffd", text)


def for_the_command_line(message: str) -> str:
    """A library message in the command line's words: flags, not Python arguments."""
    for library, command_line in _LIBRARY_WORDS:
        message = message.replace(library, command_line)
    return message


class Terminal:
    """The two output streams, and whether each takes colour.

    Colour only on a terminal, and never when ``NO_COLOR`` is set (https://no-color.org).
    """

    def __init__(
        self,
        out: TextIO | None = None,
        err: TextIO | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        env = os.environ if environ is None else environ
        plain = bool(env.get("NO_COLOR")) or env.get("TERM") == "dumb"
        self.out_color = not plain and _isatty(self.out)
        self.err_color = not plain and _isatty(self.err)
        self._open: str | None = None

    def style(self, text: str, *styles: str, stream: str = "err") -> str:
        """``text`` in the given styles, if that stream takes colour."""
        color = self.err_color if stream == "err" else self.out_color
        if not color or not styles:
            return text
        codes = ";".join(_CODES[s] for s in styles)
        return f"\x1b[{codes}m{text}\x1b[0m"

    def write(self, text: str) -> None:
        """Part of the answer, on stdout, as it arrives."""
        if not text:
            return
        if self._open == "err":
            self._newline()
        _put(self.out, text)
        self.out.flush()
        self._open = None if text.endswith("\n") else "out"

    def write_err(self, text: str, *styles: str) -> None:
        """Inline text on stderr (the model's reasoning, as it arrives)."""
        if not text:
            return
        if self._open == "out":
            self._newline()
        _put(self.err, self.style(text, *styles))
        self.err.flush()
        self._open = None if text.endswith("\n") else "err"

    def end_line(self) -> None:
        """Finish whichever line is open."""
        if self._open is not None:
            self._newline()

    def _newline(self) -> None:
        stream = self.out if self._open == "out" else self.err
        stream.write("\n")
        stream.flush()
        self._open = None

    def info(self, text: str, *styles: str) -> None:
        """A line for the user on stderr (not part of the answer)."""
        self.end_line()
        _put(self.err, self.style(text, *styles) + "\n")
        self.err.flush()

    def warn(self, text: str) -> None:
        """A warning line on stderr."""
        self.info(f"{self.style('warning:', 'bold', 'yellow')} {text}")

    def error(self, message: str, code: str | None = None) -> None:
        """One line: ``error[CODE]: message`` (the message says what to do next).

        ``code`` is the error's stable code (``MODEL_NOT_FOUND``), the one ``--json``
        shows; a usage error has none and reads ``error: message``.
        """
        self.end_line()
        prefix = self.style(f"error[{code}]:" if code else "error:", "bold", "red")
        _put(self.err, f"{prefix} {for_the_command_line(message)}\n")
        self.err.flush()

    def decoded(self, text: str, source: str, encoding: str | None = None) -> str:
        """``text`` read from ``source``, each undecodable byte replaced by U+FFFD.

        Says so in one line on stderr when there were any, so nothing that cannot be
        encoded again (in a request's JSON, in the log) goes further.
        """
        clean, count = replace_undecodable(text)
        self.note_replaced(count, source, encoding)
        return clean

    def note_replaced(self, count: int, source: str, encoding: str | None = None) -> None:
        """Say (once, on stderr) that ``count`` undecodable bytes of ``source`` became U+FFFD."""
        if not count:
            return
        name = _encoding_name(encoding)
        bytes_ = "1 byte that is" if count == 1 else f"{count} bytes that are"
        self.info(
            f"note: {source} had {bytes_} not valid {name}; each was replaced with U+FFFD, "
            "the replacement character.",
            "dim",
        )

    def symbol(self, fancy: str, plain: str) -> str:
        """``fancy`` where stderr can encode it, else ``plain``."""
        encoding = (getattr(self.err, "encoding", None) or "").lower()
        return fancy if "utf" in encoding else plain


def _put(stream: TextIO, text: str) -> None:
    """Write ``text``; what the stream cannot encode (a lone surrogate from a model, a
    character outside its code page) is written as U+FFFD, or ``?``, never raised on."""
    try:
        stream.write(text)
    except UnicodeEncodeError:
        from ollm.types.text import valid_unicode

        encoding = getattr(stream, "encoding", None) or "utf-8"
        stream.write(valid_unicode(text).encode(encoding, "replace").decode(encoding))


def _encoding_name(encoding: str | None) -> str:
    import codecs

    try:
        name = codecs.lookup(encoding or "utf-8").name
    except LookupError:
        name = encoding or "utf-8"
    return {"utf-8": "UTF-8"}.get(name, name)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
