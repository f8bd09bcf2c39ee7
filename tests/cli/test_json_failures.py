"""`ollm chat --json`: a failure before the chat begins still ends with error and finish events."""

from __future__ import annotations

import json
import subprocess

import pytest
from cli_helpers import OLLM, ollm_env


@pytest.mark.parametrize(
    ("args", "env", "code"),
    [
        (["-p", "nope"], {}, "PROVIDER_NOT_FOUND"),
        (
            ["-p", "openai:missing"],
            {"OLLM_OPENAI_PROFILES": "/nonexistent.toml"},
            "PROVIDER_NOT_FOUND",
        ),
        (["-p", "openai"], {"OPENAI_BASE_URL": "not a url"}, "INVALID_REQUEST"),
    ],
)
def test_json_mode_ends_every_failure_with_error_and_finish(
    args: list[str], env: dict[str, str], code: str
) -> None:
    result = subprocess.run(
        [OLLM, "chat", *args, "-m", "m", "--json", "hi"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=ollm_env(**env),
    )
    assert result.returncode == 1, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [e["type"] for e in events] == ["error", "finish"]
    assert events[0]["code"] == code
    assert events[1]["reason"] == "error"
    assert "Traceback" not in result.stderr
