"""``ollm chat --trace`` and the OpenTelemetry variables, in a child process: the spans
reach an OTLP collector, in the trace whose ``traceparent`` the model server got; a
collector that never answers does not fail the chat; and without any of it, nothing of
OpenTelemetry is imported."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest
from cli_helpers import OLLM
from otel_helpers import Collector, otel_free_env

from ollm_testutils import FakeOpenAIServer, OpenAIReply

MODEL = "gpt-test"


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as running:
        running.script(OpenAIReply(["Hello ", "there."]))
        yield running


def ollm_chat(
    server: FakeOpenAIServer, *flags: str, **env: str
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [OLLM, "chat", "-p", "openai", "-m", MODEL, *flags, "Hi"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        env=otel_free_env(OPENAI_BASE_URL=server.base_url, OTEL_METRICS_EXPORTER="none", **env),
    )
    assert done.returncode == 0, done.stderr
    assert "Hello there." in done.stdout
    assert "Traceback" not in done.stderr
    return done


@pytest.mark.parametrize("flags", [("--trace",), ()], ids=["--trace", "the endpoint alone"])
def test_the_chats_spans_reach_the_collector_in_the_servers_trace(
    server: FakeOpenAIServer, flags: tuple[str, ...]
) -> None:
    with Collector() as collector:
        ollm_chat(server, *flags, OTEL_EXPORTER_OTLP_ENDPOINT=collector.url)
        spans = collector.spans()
    assert sorted(s.name for s in spans) == [f"chat {MODEL}", "invoke_agent"]
    [sent] = server.chat_requests
    _, trace_id, span_id, _ = sent.headers["traceparent"].split("-")
    [request] = [s for s in spans if s.name.startswith("chat")]
    assert request.trace_id.hex() == trace_id
    assert request.span_id.hex() == span_id
    assert {s.trace_id.hex() for s in spans} == {trace_id}


def test_a_collector_that_never_answers_does_not_fail_the_chat(
    server: FakeOpenAIServer,
) -> None:
    with Collector(hang=True) as collector:
        # The bound itself is tested in process (test_export.py): here, that the chat
        # answers and ends well while its spans cannot leave.
        ollm_chat(server, "--trace", OTEL_EXPORTER_OTLP_ENDPOINT=collector.url,
                  OLLM_OTEL_FLUSH_TIMEOUT="0.2")  # fmt: skip
        assert collector.paths == ["/v1/traces"]  # it was tried, and the chat went on


def test_without_tracing_nothing_of_opentelemetry_is_imported(server: FakeOpenAIServer) -> None:
    script = (
        "import sys\n"
        "from ollm.cli import main\n"
        "code = main(['chat', '-p', 'openai', '-m', 'gpt-test', 'Hi'])\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
        "print(sorted(m for m in sys.modules if m.startswith('ollm_otel')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        env=otel_free_env(OPENAI_BASE_URL=server.base_url),
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-2] == "[]"
    assert lines[-1] in ("[]", "['ollm_otel', 'ollm_otel._version', 'ollm_otel.plugin']")
    assert "traceparent" not in server.chat_requests[0].headers


def test_plugins_lists_otel_and_trace_without_ollm_otel_says_what_to_install(
    server: FakeOpenAIServer,
) -> None:
    listed = subprocess.run(
        [OLLM, "plugins"], capture_output=True, text=True, timeout=120, env=otel_free_env()
    )
    assert "otel" in listed.stdout
    blocked = subprocess.run(
        [OLLM, "chat", "-p", "openai", "-m", MODEL, "--trace", "Hi"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        env=otel_free_env(OPENAI_BASE_URL=server.base_url, OLLM_BLOCK_PLUGINS="otel"),
    )
    assert blocked.returncode != 0
    assert "pip install 'ollm-otel[export]'" in blocked.stderr
    assert "Traceback" not in blocked.stderr


def test_variables_set_for_other_programs_never_fail_a_chat_but_trace_does(
    server: FakeOpenAIServer,
) -> None:
    # An exporter ollm-otel cannot start (as when its SDK is not installed): the variables
    # alone give a warning and an untraced chat; --trace, asked for, fails in words.
    unwell = {"OTEL_TRACES_EXPORTER": "zipkin"}
    done = ollm_chat(server, **unwell)
    assert "warning: traces are off" in done.stderr
    assert "traceparent" not in server.chat_requests[0].headers
    asked = subprocess.run(
        [OLLM, "chat", "-p", "openai", "-m", MODEL, "--trace", "Hi"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        env=otel_free_env(OPENAI_BASE_URL=server.base_url, **unwell),
    )
    assert asked.returncode == 1, asked.stderr
    assert "zipkin" in asked.stderr
    assert "Traceback" not in asked.stderr


def _chat_with(
    server: FakeOpenAIServer, *flags: str, backend: str = "asyncio", **env: str
) -> subprocess.CompletedProcess[str]:
    """``ollm chat`` with the OTEL_* variables given alone (metrics left at their default)."""
    return subprocess.run(
        [OLLM, "--backend", backend, "chat", "-p", "openai", "-m", MODEL, *flags, "Hi"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        env=otel_free_env(OPENAI_BASE_URL=server.base_url, **env),
    )


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_trace_without_an_endpoint_exports_nowhere_and_says_so_in_one_line(
    server: FakeOpenAIServer, backend: str
) -> None:
    # The SDK's default endpoint is localhost:4318: a collector there (when the port is
    # free on this machine) must get nothing, and without one no retry line may show.
    try:
        default: Collector | None = Collector(port=4318).start()
    except OSError:
        default = None
    try:
        done = _chat_with(server, "--trace", backend=backend)
    finally:
        if default is not None:
            default.stop()
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello there.\n"
    if default is not None:
        assert default.paths == []
    [line] = [line for line in done.stderr.splitlines() if line.strip()]
    assert line.startswith("warning: Traces and metrics go nowhere: no OTEL_EXPORTER_OTLP_ENDPOINT")
    assert "OTEL_TRACES_EXPORTER=console" in line
    assert "traceparent" in server.chat_requests[0].headers  # the chat itself is traced


def test_the_console_exporter_writes_spans_and_metrics_on_stderr(
    server: FakeOpenAIServer,
) -> None:
    done = _chat_with(server, OTEL_TRACES_EXPORTER="console", OTEL_METRICS_EXPORTER="console")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello there.\n"  # the reply alone: the spans are not on stdout
    assert f'"name": "chat {MODEL}"' in done.stderr
    assert '"name": "invoke_agent"' in done.stderr
    assert '"name": "gen_ai.client.operation.duration"' in done.stderr
    assert "nowhere" not in done.stderr
    assert "Traceback" not in done.stderr
    json_events = _chat_with(server, "--json", "--trace", OTEL_TRACES_EXPORTER="console")
    assert json_events.returncode == 0, json_events.stderr
    assert all(line.startswith('{"type":') for line in json_events.stdout.splitlines())
    assert '"name": "invoke_agent"' in json_events.stderr


def test_an_endpoint_that_refuses_prints_no_raw_library_lines(server: FakeOpenAIServer) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    # Nothing listens there: the exporter retries within the flush bound, and its
    # libraries log each retry (urllib3's pool, the exporter's "Transient error").
    done = _chat_with(server, "--trace", OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello there.\n"
    assert "HTTPConnectionPool" not in done.stderr
    assert "Transient error" not in done.stderr
    debug = subprocess.run(
        [OLLM, "--debug", "chat", "-p", "openai", "-m", MODEL, "--trace", "Hi"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        env=otel_free_env(
            OPENAI_BASE_URL=server.base_url, OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}"
        ),
    )
    assert "Transient error" in debug.stderr  # --debug shows them, with their logger
