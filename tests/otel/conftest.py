"""The ``telemetry`` fixture: in-memory OpenTelemetry providers, shut down after each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from otel_helpers import Telemetry


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    made = Telemetry()
    yield made
    made.tracer_provider.shutdown()
    made.meter_provider.shutdown()
