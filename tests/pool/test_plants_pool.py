"""What each failure before a reply started calls for, code by code, as the failover
module's table says: bugs planted by hand that the first tests let through
(tests/plants.toml, module ``pool``)."""

from __future__ import annotations

import pytest

from ollm.errors import ErrorCode
from ollm_pool._failover import USES_BUDGET, kind_of

EXPECTED = {
    ErrorCode.CONNECTION_FAILED: "unreachable",
    ErrorCode.TIMEOUT: "unreachable",
    ErrorCode.TLS_ERROR: "unreachable",
    ErrorCode.PROVIDER_ERROR: "failed",
    ErrorCode.BAD_RESPONSE: "failed",
    ErrorCode.AUTH_FAILED: "failed",
    ErrorCode.RATE_LIMITED: "rate_limited",
    ErrorCode.MODEL_NOT_FOUND: "model_missing",
    # The server refused it as too long, or the member's own count before sending.
    ErrorCode.CONTEXT_EXCEEDED: "context",
    ErrorCode.TOKEN_LIMIT: "context",
    ErrorCode.TOOLS_UNSUPPORTED: "tools",
    ErrorCode.INVALID_REQUEST: "final",
    ErrorCode.CONTENT_BLOCKED: "final",
}


@pytest.mark.parametrize(("code", "kind"), EXPECTED.items())
def test_each_failure_calls_for_what_the_table_says(code: str, kind: str) -> None:
    assert kind_of(code) == kind


def test_only_failures_of_the_server_use_the_retry_budget() -> None:
    assert {"unreachable", "failed", "rate_limited"} == USES_BUDGET
