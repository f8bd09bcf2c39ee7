"""The SDK set up from the ``OTEL_*`` variables: an exporter that hangs or fails never
fails or holds up a chat, and the flush at exit gives up at its bound."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import anyio.to_thread
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from otel_helpers import chat

from ollm_otel import Exporting, Otel, configure

NO_METRICS = {"OTEL_METRICS_EXPORTER": "none"}


class Hanging(SpanExporter):
    """Blocks in ``export`` until released; keeps what it was given."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.names: list[str] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.started.set()
        self.release.wait()
        self.names += [span.name for span in spans]
        return SpanExportResult.SUCCESS


class Failing(SpanExporter):
    def __init__(self) -> None:
        self.calls = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.calls += 1
        raise ConnectionError("the collector is down")


def otel_on(exporting: Exporting) -> Otel:
    return Otel(
        tracer_provider=exporting.tracer_provider,
        meter_provider=exporting.meter_provider,
        environ={},
    )


@pytest.mark.anyio
async def test_a_hanging_exporter_holds_up_neither_the_chat_nor_the_exit() -> None:
    hanging = Hanging()
    exporting = configure(NO_METRICS, span_exporter=hanging, install=False)
    # The exporter is stuck before the chat starts.
    exporting.tracer_provider.get_tracer("test").start_span("before").end()
    threading.Thread(target=exporting.tracer_provider.force_flush, daemon=True).start()
    await anyio.to_thread.run_sync(hanging.started.wait)

    result = await chat(otel_on(exporting))
    assert result.ok
    # The flush gives up at its bound while the exporter still hangs (a minute is only
    # a guard: a flush without a bound would wait for ever)...
    with anyio.fail_after(60):
        finished = await anyio.to_thread.run_sync(exporting.shutdown, 0.05, abandon_on_cancel=True)
    assert not finished
    assert not hanging.release.is_set()
    # ...and once it answers, nothing of the chat was lost.
    hanging.release.set()
    assert await anyio.to_thread.run_sync(exporting.shutdown, 60)
    assert sorted(hanging.names) == sorted(
        ["before", "invoke_agent", "chat scripted", "chat scripted", "execute_tool lookup"]
    )


@pytest.mark.anyio
async def test_a_failing_exporter_does_not_fail_the_chat() -> None:
    failing = Failing()
    exporting = configure(NO_METRICS, span_exporter=failing, install=False)
    assert (await chat(otel_on(exporting))).ok
    assert await anyio.to_thread.run_sync(exporting.shutdown, 60)
    assert failing.calls >= 1


@pytest.mark.parametrize(
    ("environ", "said"),
    [
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER='zipkin' is not an exporter"),
        ({"OTEL_METRICS_EXPORTER": "prometheus"}, "use otlp, console or none"),
        ({"OLLM_OTEL_FLUSH_TIMEOUT": "soon"}, "'soon' is not a number of seconds"),
        ({"OLLM_OTEL_FLUSH_TIMEOUT": "-1"}, "is not a number of seconds"),
    ],
)
def test_settings_it_cannot_use_are_refused_in_words(environ: dict[str, str], said: str) -> None:
    with pytest.raises(ValueError) as caught:
        configure(environ, install=False)
    assert said in str(caught.value)


@pytest.mark.parametrize(
    ("environ", "warned"),
    [
        ({}, "Traces and metrics go nowhere"),
        (NO_METRICS, "Traces go nowhere"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/v1/traces"}, None),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}, None),
        ({"OTEL_TRACES_EXPORTER": "console"}, None),  # metrics quietly off beside it
    ],
)
def test_otlp_without_an_endpoint_exports_nowhere_with_one_warning(
    environ: dict[str, str], warned: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("WARNING", logger="ollm_otel"):
        exporting = configure(environ, install=False)
    exporting.shutdown(60)
    said = [r.getMessage() for r in caplog.records if r.name == "ollm_otel"]
    if warned is None:
        assert said == []
    else:
        [line] = said
        assert line.startswith(warned)
        assert "OTEL_EXPORTER_OTLP_ENDPOINT" in line
        assert "OTEL_TRACES_EXPORTER=console" in line
