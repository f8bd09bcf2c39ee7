"""Every span, attribute and metric name ollm-otel writes is one of the pinned version of
the semantic conventions (``opentelemetry-semantic-conventions``, pinned in the
workspace's test dependencies to the release of ``SEMCONV_VERSION``)."""

from __future__ import annotations

import warnings
from types import ModuleType
from typing import Any

import pytest
from opentelemetry.semconv import schemas
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes, mcp_attributes
from opentelemetry.semconv._incubating.metrics import gen_ai_metrics
from opentelemetry.semconv.attributes import error_attributes, server_attributes
from otel_helpers import Telemetry, chat

import ollm_otel


def names(*modules: ModuleType) -> set[str]:
    return {
        value
        for module in modules
        for key, value in vars(module).items()
        if key.isupper() and isinstance(value, str)
    }


ATTRIBUTES = names(gen_ai_attributes, mcp_attributes, error_attributes, server_attributes)
METRICS = names(gen_ai_metrics)


def values(enum_name: str) -> set[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        enum: Any = getattr(gen_ai_attributes, enum_name)
        return {member.value for member in enum}


def test_the_pinned_version_is_the_registrys() -> None:
    from opentelemetry.semconv.version import __version__

    assert __version__ == "0.66b2"  # the release of the conventions 1.44.0
    assert f"https://opentelemetry.io/schemas/{ollm_otel.SEMCONV_VERSION}" == ollm_otel.SCHEMA_URL
    assert ollm_otel.SCHEMA_URL in {s.value for s in schemas.Schemas}
    latest = max(schemas.Schemas, key=lambda s: tuple(int(p) for p in s.name[1:].split("_")))
    assert latest.value == ollm_otel.SCHEMA_URL


@pytest.mark.anyio
async def test_every_name_written_is_in_the_conventions(telemetry: Telemetry) -> None:
    assert (await chat(telemetry.otel(capture_content=True))).ok
    spans = telemetry.spans()
    written = {key for span in spans for key in (span.attributes or {})}
    assert written - ATTRIBUTES == set()
    assert {"gen_ai.conversation.id", "gen_ai.operation.name"} <= written
    operations = {span.attributes["gen_ai.operation.name"] for span in spans}
    assert operations == {"invoke_agent", "chat", "execute_tool"}
    assert operations <= values("GenAiOperationNameValues")
    for span in spans:
        operation = str(span.attributes["gen_ai.operation.name"])
        assert span.name.split(" ")[0] == operation
    first, second = sorted(telemetry.named("chat"), key=lambda s: s.start_time or 0)
    assert first.attributes["gen_ai.usage.reasoning.output_tokens"] == 2
    assert second.attributes["gen_ai.usage.cache_read.input_tokens"] == 8
    assert second.attributes["gen_ai.usage.cache_creation.input_tokens"] == 4
    metrics = telemetry.metrics()
    assert set(metrics) <= METRICS
    assert {"gen_ai.client.operation.duration", "gen_ai.client.token.usage"} <= set(metrics)
    point_keys = {k for points in metrics.values() for p in points for k in p.attributes}
    assert point_keys - ATTRIBUTES == set()
    token_types = {p.attributes["gen_ai.token.type"] for p in metrics["gen_ai.client.token.usage"]}
    assert token_types <= values("GenAiTokenTypeValues")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("provider", "named"),
    [("gemini", "gcp.gemini"), ("openai", "openai"), ("anthropic", "anthropic")],
)
async def test_providers_are_named_as_the_conventions_name_them(
    telemetry: Telemetry, provider: str, named: str
) -> None:
    assert (await chat(telemetry.otel(), name=provider)).ok
    spans = telemetry.named("invoke_agent") + telemetry.named("chat")
    assert {s.attributes["gen_ai.provider.name"] for s in spans} == {named}
    assert named in values("GenAiProviderNameValues")
