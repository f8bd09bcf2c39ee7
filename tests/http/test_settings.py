"""The settings every HTTP provider reads: a base URL, seconds, whether a host is local."""

from __future__ import annotations

import math

import pytest

import ollm
from ollm_http import check_base_url, is_loopback, seconds_setting


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000/v1"),
        ("  https://api.example.com  ", "https://api.example.com"),
        ("http://[::1]:11434", "http://[::1]:11434"),
        ("http://host:1", "http://host:1"),
        ("http://host:65535/", "http://host:65535"),
        ("http://host/pathX/", "http://host/pathX"),
    ],
)
def test_a_good_base_url_is_kept_without_its_trailing_slash(given: str, expected: str) -> None:
    assert check_base_url(given, "SETTING", "http://x") == expected


@pytest.mark.parametrize(
    ("given", "needle"),
    [
        ("ftp://host", "not an http:// or https:// address"),
        ("http://", "not an http:// or https:// address"),
        ("127.0.0.1:8000", "not an http:// or https:// address"),
        ("http://host:99999", "port that is not between 1 and 65535"),
        ("http://host:0", "port that is not between 1 and 65535"),
        # what the URL parser itself refuses is words too, never a ValueError
        ("http://[::1", "is not a valid address (Invalid IPv6 URL)"),
        ("http://[zz]:80", "is not a valid address ('zz' does not appear to be an IPv4 or IPv6"),
    ],
)
def test_a_bad_base_url_names_the_setting_and_the_shape(given: str, needle: str) -> None:
    with pytest.raises(ollm.InvalidRequestError) as caught:
        check_base_url(given, "MY_URL", "http://127.0.0.1:9/v1")
    message = caught.value.message
    assert needle in message
    assert "MY_URL" in message
    assert repr(given.strip().rstrip("/")) in message
    if "address" in needle:
        assert "http://127.0.0.1:9/v1" in message


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://localhost:1", True),
        ("http://127.0.0.1", True),
        ("http://127.8.9.10:5", True),
        ("http://[::1]:1", True),
        ("http://10.0.0.1", False),
        ("https://api.openai.com/v1", False),
        ("http://localhost.example.com", False),
        ("not a url", False),
    ],
)
def test_loopback_hosts(url: str, local: bool) -> None:
    assert is_loopback(url) is local


def test_seconds_come_from_the_argument_then_the_variable_then_the_default() -> None:
    assert seconds_setting(5, "7", "VAR", 9.0) == 5.0
    assert seconds_setting(None, "7.5", "VAR", 9.0) == 7.5
    assert seconds_setting(None, None, "VAR", 9.0) == 9.0
    assert seconds_setting(None, "", "VAR", 9.0) == 9.0
    assert seconds_setting(0.5, None, "VAR", 9.0) == 0.5
    assert seconds_setting(None, "0.25", "VAR", 9.0) == 0.25


@pytest.mark.parametrize(
    ("argument", "text", "needle"),
    [
        (None, "soon", "VAR is 'soon'; it must be a number of seconds"),
        (None, "0", "VAR is 0.0; it must be a positive number"),
        (None, "-3", "VAR is -3.0; it must be a positive number"),
        (None, "nan", "VAR is nan; it must be a positive number"),
        (0, None, "the timeout argument is 0.0"),
        (-1.5, "7", "the timeout argument is -1.5"),
        (math.nan, None, "the timeout argument is nan"),
    ],
)
def test_bad_seconds_say_where_they_came_from(
    argument: float | None, text: str | None, needle: str
) -> None:
    with pytest.raises(ollm.InvalidRequestError) as caught:
        seconds_setting(argument, text, "VAR", 9.0)
    assert needle in caught.value.message
