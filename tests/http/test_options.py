"""A request's options checked the same way by every HTTP provider, and its body encoded.

``option_number`` (a finite number, an ``int`` when asked; bools refused),
``stop_sequences`` (a string or a list of strings, always a list) and ``encode_body``
(JSON once, or an ``InvalidRequestError`` that names the model and the provider).
"""

from __future__ import annotations

import math
from typing import Any

import msgspec
import pytest

import ollm
from ollm_http import encode_body, option_number, stop_sequences

# option_number


@pytest.mark.parametrize(
    ("value", "integer"),
    [
        (0, False),
        (0, True),
        (-1, True),
        (40, True),
        (2**70, True),
        (3, False),
        (0.7, False),
        (0.0, False),
        (-2.5, False),
        (1e308, False),
        (-1e308, False),
    ],
)
def test_a_finite_number_is_returned_as_it_is(value: float, integer: bool) -> None:
    got = option_number("temperature", value, integer=integer)
    assert got == value
    assert type(got) is type(value)  # an int stays an int, a float a float


@pytest.mark.parametrize(
    ("value", "integer", "message"),
    [
        (True, False, "options.seed must be a number, not True."),
        (False, False, "options.seed must be a number, not False."),
        (True, True, "options.seed must be an integer, not True."),
        (False, True, "options.seed must be an integer, not False."),
        ("0.5", False, "options.seed must be a number, not '0.5'."),
        ("7", True, "options.seed must be an integer, not '7'."),
        (None, False, "options.seed must be a number, not None."),
        ([1], True, "options.seed must be an integer, not [1]."),
        (40.0, True, "options.seed must be an integer, not 40.0."),
        (0.5, True, "options.seed must be an integer, not 0.5."),
        (math.inf, True, "options.seed must be an integer, not inf."),
        (math.inf, False, "options.seed must be a finite number, not inf."),
        (-math.inf, False, "options.seed must be a finite number, not -inf."),
        (math.nan, False, "options.seed must be a finite number, not nan."),
    ],
)
def test_anything_else_is_refused_naming_the_option_and_the_value(
    value: object, integer: bool, message: str
) -> None:
    with pytest.raises(ollm.InvalidRequestError) as caught:
        option_number("seed", value, integer=integer)
    assert caught.value.message == message
    assert caught.value.code == "INVALID_REQUEST"


def test_integer_is_off_unless_asked() -> None:
    assert option_number("top_p", 0.9) == 0.9
    with pytest.raises(ollm.InvalidRequestError, match="must be a number, not 'x'"):
        option_number("top_p", "x")


# stop_sequences


@pytest.mark.parametrize(
    ("stop", "expected"),
    [
        ("END", ["END"]),
        ("", [""]),
        ("a\nb", ["a\nb"]),
        (["a", "b"], ["a", "b"]),
        (("a", "b"), ["a", "b"]),
        ([], []),
        ((), []),
        (["only"], ["only"]),
    ],
)
def test_stop_is_a_list_of_strings(stop: object, expected: list[str]) -> None:
    got = stop_sequences(stop)
    assert got == expected
    assert type(got) is list


def test_a_list_given_is_copied_not_shared() -> None:
    given = ["a"]
    got = stop_sequences(given)
    got.append("b")
    assert given == ["a"]


@pytest.mark.parametrize(
    "stop",
    [None, 5, b"END", ["a", 1], ["a", None], (None,), [b"a"], {"a"}, {"a": "b"}, [["a"]]],
)
def test_anything_else_is_refused_naming_the_value(stop: object) -> None:
    with pytest.raises(ollm.InvalidRequestError) as caught:
        stop_sequences(stop)
    assert caught.value.message == f"options.stop must be a list of strings, not {stop!r}."
    assert caught.value.code == "INVALID_REQUEST"


# encode_body


class _Options(msgspec.Struct):
    temperature: float
    stop: list[str]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"model": "m", "n": 1}, b'{"model":"m","n":1}'),
        ({"options": _Options(0.5, ["x"])}, b'{"options":{"temperature":0.5,"stop":["x"]}}'),
        ([1, "é", None, True], b'[1,"\xc3\xa9",null,true]'),
        ({}, b"{}"),
    ],
)
def test_a_body_is_encoded_as_json_once(body: Any, expected: bytes) -> None:
    raw = encode_body(body, model="llama3", provider="ollama")
    assert isinstance(raw, msgspec.Raw)
    assert bytes(raw) == expected
    # A Raw goes into a larger document as it is.
    assert msgspec.json.encode({"body": raw}) == b'{"body":' + expected + b"}"


def _nested() -> list[object]:
    loop: list[object] = []
    loop.append(loop)
    return loop


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ({"tool": object()}, "Encoding objects of type object is unsupported"),
        ({(1, 2): "key"}, "Only dicts with str-like or number-like keys are supported"),
        ({"args": _nested()}, "maximum recursion depth exceeded"),
    ],
    ids=["unsupported-type", "bad-key", "recursive"],  # lone surrogates: test_body_text.py
)
def test_a_body_that_is_not_json_names_the_model_and_the_provider(body: Any, why: str) -> None:
    with pytest.raises(ollm.InvalidRequestError) as caught:
        encode_body(body, model="llama3", provider="ollama")
    error = caught.value
    assert error.code == "INVALID_REQUEST"
    assert error.model == "llama3"
    assert error.provider == "ollama"
    assert error.message.startswith("The request to 'llama3' cannot be sent as JSON (")
    assert why in error.message
    assert error.message.endswith(
        "). Check the tool arguments, the options and their extra values."
    )
    # Raised from None: the encoder's traceback is not the user's business.
    assert error.__cause__ is None
    assert error.__suppress_context__ is True
