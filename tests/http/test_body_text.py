"""``encode_body`` writes a string that is not valid Unicode (a lone surrogate in tool
arguments a model sent) with U+FFFD in its place, and valid text exactly as it is."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from ollm_http import encode_body


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"args": {"q": "\ud800"}}, {"args": {"q": "\ufffd"}}),
        ({"\udc80key": ["a\ud83d", ("\ude00",)]}, {"\ufffdkey": ["a\ufffd", ["\ufffd"]]}),
        ({"pair": "\ud83d\ude00"}, {"pair": "\U0001f600"}),
    ],
)
def test_a_lone_surrogate_goes_as_a_replacement_character(body: Any, expected: Any) -> None:
    raw = encode_body(body, model="m", provider="p")
    assert msgspec.json.decode(bytes(raw)) == expected


def test_valid_text_goes_as_it_is() -> None:
    body = {"messages": [{"content": "café ☕ 😀", "args": {"n": 1}}]}
    assert bytes(encode_body(body, model="m", provider="p")) == msgspec.json.encode(body)
