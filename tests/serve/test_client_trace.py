"""A served request is one trace with its caller: the client's ``traceparent`` is the
parent of the ``otel`` middleware's spans (W3C Trace Context)."""

from __future__ import annotations

import pytest
from otel_helpers import Telemetry

import ollm
from ollm_serve import create_app
from ollm_testutils import Reply, ScriptedProvider

from .conftest import asgi_client

pytestmark = pytest.mark.anyio

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


def _app(scripted: ScriptedProvider, telemetry: Telemetry) -> object:
    registries = ollm.discover()
    registries.providers.register(scripted)
    registries.middleware.register(ollm.MiddlewareSpec("traced", telemetry.otel), replace=True)
    return create_app(("scripted",), registries=registries, middleware=["traced"])


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (
            "/v1/chat/completions",
            {"model": "mock-model", "messages": [{"role": "user", "content": "hi"}]},
        ),
        (
            "/api/chat",
            {
                "model": "mock-model",
                "messages": [{"role": "user", "content": "hi"}],
                "stream": False,
            },
        ),
    ],
)
async def test_the_clients_traceparent_is_the_parent_of_the_chats_spans(
    scripted: ScriptedProvider, path: str, body: dict[str, object]
) -> None:
    telemetry = Telemetry()
    scripted.add(Reply("Hello."))
    async with asgi_client(_app(scripted, telemetry)) as http:  # type: ignore[arg-type]
        answer = await http.post(
            path, json=body, headers={"traceparent": f"00-{TRACE}-{PARENT}-01"}
        )
    assert answer.status_code == 200, answer.text
    (agent,) = telemetry.named("invoke_agent")
    assert f"{agent.context.trace_id:032x}" == TRACE
    assert agent.parent is not None
    assert f"{agent.parent.span_id:016x}" == PARENT
    # Every span of the request is in the client's trace.
    assert {f"{span.context.trace_id:032x}" for span in telemetry.spans()} == {TRACE}


async def test_without_a_traceparent_a_served_request_starts_its_own_trace(
    scripted: ScriptedProvider,
) -> None:
    telemetry = Telemetry()
    scripted.add(Reply("Hello."))
    async with asgi_client(_app(scripted, telemetry)) as http:  # type: ignore[arg-type]
        body = {"model": "mock-model", "messages": [{"role": "user", "content": "hi"}]}
        answer = await http.post("/v1/chat/completions", json=body)
    assert answer.status_code == 200, answer.text
    (agent,) = telemetry.named("invoke_agent")
    assert agent.parent is None
    assert f"{agent.context.trace_id:032x}" != TRACE
