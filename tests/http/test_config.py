"""ollm_http's configuration on its own: credentials in a URL, timeouts, header checks."""

from __future__ import annotations

import base64
import math

import pytest

from ollm import ErrorCode
from ollm.errors import InvalidRequestError
from ollm_http import ErrorContext, HTTPConfig, Timeouts
from ollm_http._config import split_credentials


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://host:80/x", ("http://host:80/x", None)),
        (
            "http://alice:s%40cret@127.0.0.1:8080/v1?x=1",
            ("http://127.0.0.1:8080/v1?x=1", basic("alice", "s@cret")),
        ),
        ("http://alice@host", ("http://host", basic("alice", ""))),  # a user alone
        ("http://:pw@host", ("http://host", basic("", "pw"))),  # a password alone
        ("http://u:p@[::1]:11434/api", ("http://[::1]:11434/api", basic("u", "p"))),
        ("https://u:p@example.com", ("https://example.com", basic("u", "p"))),
    ],
)
def test_credentials_in_a_url_become_a_basic_authorization(
    url: str, expected: tuple[str, str | None]
) -> None:
    assert split_credentials(url) == expected


def test_every_timeout_reaches_httpx_and_infinity_is_none() -> None:
    timeouts = Timeouts(connect=1.0, read=2.0, write=3.0, pool=math.inf)
    assert timeouts.as_httpx() == {"connect": 1.0, "read": 2.0, "write": 3.0, "pool": None}


def test_a_configured_header_with_a_line_break_is_refused_for_its_provider() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        HTTPConfig("http://h", headers={"X-Key": "abc\n"}, context=ErrorContext(code_name="ollama"))
    assert caught.value.code == ErrorCode.INVALID_REQUEST
    assert caught.value.provider == "ollama"
    assert "The HTTP header 'X-Key' has a line break or NUL character in its value" in str(
        caught.value
    )
