"""Shared test settings: both anyio backends, and hypothesis profiles."""

from __future__ import annotations

import os
import signal

import pytest
from hypothesis import HealthCheck, settings

# Properties run at least 100 examples; no deadline, because the machines are shared
# and timing is not what these tests check.
#
# - "ci" (the default, and what `./ollmw test` and CI run): derandomized, so a run is
#   repeatable to the example; a failure prints its minimal example and the
#   `@reproduce_failure` blob that replays it.
# - "dev": random examples, more of them, remembered in .hypothesis/ between runs:
#   HYPOTHESIS_PROFILE=dev ./ollmw test
# - "thorough": 1,000 examples per property.
settings.register_profile(
    "ci",
    max_examples=100,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "dev", parent=settings.get_profile("ci"), derandomize=False, max_examples=300
)
settings.register_profile("thorough", parent=settings.get_profile("dev"), max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# A runner started in the background (`cmd &`, nohup, some CI agents) has SIGINT ignored,
# and an ignored signal stays ignored in every child: the Ctrl-C tests would then test
# nothing (or hang). A handler, unlike "ignore", is reset to the default in a child, so
# the programs these tests start get Ctrl-C as a user's terminal would give it.
signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Every async test runs on asyncio and on trio."""
    return str(request.param)
