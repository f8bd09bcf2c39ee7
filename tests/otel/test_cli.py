"""``ollm chat --trace`` and the OpenTelemetry variables, in a child process: the spans
reach an OTLP collector, in the trace whose ``traceparent`` the model server got; a
collector that never answers does not fail the chat; and without any of it, nothing of
OpenTelemetry is imported."""

from __future__ import annotations

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
