"""Secrets that must never be shown: random ones for hypothesis, and the check.

For the properties that a secret put in a URL's userinfo or in a header never
appears in an error's message, a ``repr()``, an event or a log line, whatever failed.
"""

from __future__ import annotations

import base64
import logging
import string
import traceback
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from hypothesis import strategies as st

_ALPHABET = string.ascii_letters + string.digits + "-_.~"


def secrets() -> st.SearchStrategy[str]:
    """Random secrets: usable in a URL's userinfo and in a header as they are, and long
    enough never to appear in a message by chance."""
    return st.text(alphabet=_ALPHABET, min_size=16, max_size=48)


def shown_forms(secret: str, user: str = "alice") -> list[str]:
    """How a secret could be shown: itself, and inside ``user``'s Basic authorization."""
    return [secret, base64.b64encode(f"{user}:{secret}".encode()).decode("ascii")]


def assert_not_shown(secret: str, texts: Iterable[str], *, user: str = "alice") -> None:
    """Fail, naming the text, if any form of ``secret`` shows in any of ``texts``."""
    forms = shown_forms(secret, user)
    for text in texts:
        for form in forms:
            assert form not in text, f"a secret shows in: {text}"


def error_texts(exc: BaseException) -> list[str]:
    """What a user or a log may see of an exception: its text, repr and traceback."""
    return [str(exc), repr(exc), "".join(traceback.format_exception(exc))]


class _Collector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@contextmanager
def logged(*names: str) -> Iterator[list[str]]:
    """Every line (with any traceback) the loggers ``names`` write inside the block."""
    collector = _Collector()
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(collector)
        logger.setLevel(logging.DEBUG)
    try:
        yield collector.lines
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.removeHandler(collector)
            logger.setLevel(level)
