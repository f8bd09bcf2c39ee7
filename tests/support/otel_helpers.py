"""In-memory OpenTelemetry for the tests of ollm-otel: what a chat exports, read back."""

from __future__ import annotations

import threading
from typing import Any

from cli_helpers import ollm_env
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ollm
from ollm_otel import Otel
from ollm_testutils import Reply, ScriptedProvider
from ollm_testutils.httpserver import Connection, FakeServer, HttpRequest, Response


class Telemetry:
    """A tracer and a meter provider that keep what they get, and an ``Otel`` on them."""

    def __init__(self) -> None:
        self.spans_out = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans_out))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def otel(self, **options: object) -> Otel:
        return Otel(
            tracer_provider=self.tracer_provider,
            meter_provider=self.meter_provider,
            environ={},
            **options,  # type: ignore[arg-type]
        )

    def spans(self) -> list[ReadableSpan]:
        return list(self.spans_out.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name.split(" ")[0] == prefix]

    def metrics(self) -> dict[str, list[object]]:
        """Each metric's data points, by name."""
        data = self.reader.get_metrics_data()
        found: dict[str, list[object]] = {}
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    found.setdefault(metric.name, []).extend(metric.data.data_points)
        return found


KEY = "sk-" + "A1b2C3d4E5f6G7h8J9k0" * 2


def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: The city.
    """
    return f"{city}: sunny, and the key is {KEY}"


def provider(name: str = "scripted") -> ScriptedProvider:
    return ScriptedProvider(
        Reply(
            tool_calls=[("lookup", {"city": "Paris"})],
            usage=ollm.Usage(12, 3, 15, reasoning_tokens=2),
        ),
        Reply(
            f"Sunny. Your key: {KEY}",
            usage=ollm.Usage(30, 5, 35, cached_tokens=8, cache_creation_tokens=4),
        ),
        name=name,
    )


async def chat(
    *middleware: object, prompt: str = "Weather in Paris?", name: str = "scripted"
) -> ollm.ChatResult:
    """A scripted chat: one call of ``lookup``, whose result has a key in it, then an answer."""
    client = ollm.ChatClient(
        ollm.Registries(),
        provider=provider(name),
        model="scripted",
        tools=[lookup],
        system="Be brief.",
        middleware=list(middleware),
    )
    async with client:
        return await client.run(prompt)


class Collector(FakeServer):
    """An OTLP/HTTP collector on 127.0.0.1 (at ``port``, else a free one): keeps the
    spans exported to it; one made with ``hang=True`` never answers (until it stops)."""

    def __init__(self, *, hang: bool = False, port: int = 0) -> None:
        self.hang = hang
        self.paths: list[str] = []
        self.span_list: list[Any] = []
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        super().__init__(port=port)

    def _handle(self, request: HttpRequest, response: Response, connection: Connection) -> None:
        with self._lock:
            self.paths.append(request.path)
        if self.hang:
            self._stopping.wait()
            return
        if request.path == "/v1/traces":
            export = ExportTraceServiceRequest()
            export.ParseFromString(request.body)
            with self._lock:
                for resource in export.resource_spans:
                    for scope in resource.scope_spans:
                        self.span_list.extend(scope.spans)
        response.send(200, b"", "application/x-protobuf")

    def stop(self) -> None:
        self._stopping.set()
        super().stop()

    def spans(self) -> list[Any]:
        with self._lock:
            return list(self.span_list)


def otel_free_env(**extra: str) -> dict[str, str]:
    """``ollm_env`` without any ``OTEL_*`` variable of the machine's."""
    env = {k: v for k, v in ollm_env().items() if not k.startswith("OTEL_")}
    env.update(extra)
    return env
