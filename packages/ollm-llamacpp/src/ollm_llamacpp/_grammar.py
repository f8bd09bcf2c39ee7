"""Internal: a request's ``response_format`` as a llama.cpp grammar, so that every token
the model samples keeps the reply a JSON value of the schema (one try, not retries).

llama-cpp-python converts a JSON Schema to GBNF (``json_schema_to_gbnf``); ``"json"``
is its grammar of any JSON value. A schema it cannot convert (a keyword it does not
know) falls back to any JSON object or value: the runtime still validates the value,
and corrects it with a retry as it does for a backend that cannot constrain.
"""

from __future__ import annotations

import json
import logging
from functools import lru_cache
from typing import Any

from ollm.errors import InvalidRequestError
from ollm_llamacpp._errors import PROVIDER

__all__ = ["grammar_for", "grammar_text"]

log = logging.getLogger(__name__)


def grammar_text(response_format: str | dict[str, Any]) -> str:
    """The GBNF of ``response_format``: ``"json"`` (any JSON value) or a JSON Schema."""
    from llama_cpp import llama_grammar

    if response_format == "json":
        return str(llama_grammar.JSON_GBNF)
    if not isinstance(response_format, dict):
        raise InvalidRequestError(
            f"response_format must be 'json' or a JSON Schema object, not {response_format!r}.",
            provider=PROVIDER,
        )
    # Not sorted: the order of the properties is the order the grammar writes them in.
    schema = json.dumps(response_format, default=str)
    try:
        return _schema_grammar(schema)
    except Exception as exc:  # the converter's own errors are bare Exceptions
        log.debug("no grammar for the schema (%s); any JSON value instead", exc)
        return str(llama_grammar.JSON_GBNF)


# llama-cpp-python's converter lets a string hold any character but a quote or a
# backslash: a raw newline or tab too, which no JSON parser accepts. In the plain
# transcript of a base model, a newline then "User:" inside a string even ends the reply
# at the transcript's stop, mid-JSON. llama.cpp's own converter keeps control
# characters out, as JSON does (they are written escaped: \n, \t, \u0000).
_LOOSE_CHAR = 'char ::= [^"\\\\] |'
_JSON_CHAR = 'char ::= [^"\\\\\\x7F\\x00-\\x1F] |'


@lru_cache(maxsize=32)
def _schema_grammar(schema: str) -> str:
    from llama_cpp import llama_grammar

    return str(llama_grammar.json_schema_to_gbnf(schema)).replace(_LOOSE_CHAR, _JSON_CHAR)


def grammar_for(response_format: str | dict[str, Any] | None) -> str | None:
    """The grammar (GBNF) that constrains a reply to ``response_format``; ``None`` for
    none."""
    if response_format is None:
        return None
    return grammar_text(response_format)
