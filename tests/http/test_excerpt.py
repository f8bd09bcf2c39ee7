"""``excerpt``: a server's bytes quoted for an error message, at most ``limit``
characters, ``...`` after a cut, undecodable bytes replaced, control characters escaped."""

from __future__ import annotations

import pytest

from ollm_http import excerpt


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", "''"),
        (b"abc", "'abc'"),
        (b'say "hi"\n', "'say \"hi\"\\n'"),
        (b"it's", '"it\'s"'),
        (b'it\'s "x"', "'it\\'s \"x\"'"),
        (b"\x00\t\r\x1b", "'\\x00\\t\\r\\x1b'"),
        (b"back\\slash", "'back\\\\slash'"),
        (b"\xff ok \xc3", "'\ufffd ok \ufffd'"),
        ("caf\u00e9".encode(), "'caf\u00e9'"),
    ],
)
def test_a_short_body_is_quoted_whole_and_escaped(data: bytes, expected: str) -> None:
    assert excerpt(data) == expected


def test_the_default_limit_is_200_characters() -> None:
    assert excerpt(b"a" * 200) == "'" + "a" * 200 + "'"
    assert excerpt(b"a" * 201) == "'" + "a" * 200 + "'..."
    assert excerpt(b"a" * 5000) == "'" + "a" * 200 + "'..."


@pytest.mark.parametrize(
    ("data", "limit", "expected"),
    [
        (b"hello world", 11, "'hello world'"),
        (b"hello world", 12, "'hello world'"),
        (b"hello world", 10, "'hello worl'..."),
        (b"hello world", 5, "'hello'..."),
        (b"hello world", 1, "'h'..."),
        (b"hello world", 0, "''..."),
        (b"", 0, "''"),
        (b"\n\n\n", 2, "'\\n\\n'..."),  # the cut counts characters, before escaping
    ],
)
def test_a_long_body_is_cut_at_the_limit_and_marked(data: bytes, limit: int, expected: str) -> None:
    assert excerpt(data, limit) == expected
    assert excerpt(data, limit=limit) == expected


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("\u00e9" * 5, 5, "'" + "\u00e9" * 5 + "'"),  # 2 bytes a character
        ("\u00e9" * 6, 5, "'" + "\u00e9" * 5 + "'..."),
        ("\u20ac" * 4, 4, "'" + "\u20ac" * 4 + "'"),  # 3 bytes a character
        ("\U0001f600" * 3, 3, "'" + "\U0001f600" * 3 + "'"),  # 4 bytes a character
        ("\U0001f600" * 4, 3, "'" + "\U0001f600" * 3 + "'..."),
        ("\U0001f600" * 201, 200, "'" + "\U0001f600" * 200 + "'..."),
        ("a" + "\U0001f600" * 200, 200, "'a" + "\U0001f600" * 199 + "'..."),
    ],
)
def test_the_limit_counts_characters_not_bytes(text: str, limit: int, expected: str) -> None:
    assert excerpt(text.encode(), limit) == expected
