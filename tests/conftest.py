"""Shared test settings: both anyio backends, hypothesis profiles, and the lanes of a
parallel run."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

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


# Lanes under pytest-xdist (`./ollmw test` runs `-n auto --dist loadgroup`): a test goes
# to any worker, but
# - the real model's tests (tests/llamacpp, marked `realmodel`) and the real server's
#   (`realserver`) form one slow lane, one worker, so that two models never load at once
#   on a machine whose cores they want all of;
# - the tests of a file that share a fixture wider than a test (a module's wheels built
#   once, a session's server) stay in one worker, so that it is made once, not per worker.
SLOW_LANE = ("realmodel", "realserver")
REAL_MODEL_TESTS = Path(__file__).resolve().parent / "llamacpp"
WIDER_SCOPES = ("class", "module", "package", "session")


# First among the hooks: pytest-xdist's own (its worker's) reads the groups to schedule
# by (it appends ``@group`` to each test's id), so a group marked after it is no group
# at all: the lane's tests would then spread over every worker, each loading a model.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(REAL_MODEL_TESTS):
            item.add_marker(pytest.mark.realmodel)
        if item.get_closest_marker("xdist_group") is not None:
            continue
        if _in_slow_lane(item):
            item.add_marker(pytest.mark.xdist_group("slow-lane"))
        elif _shares_a_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.partition("::")[0]))
    # The slow lane first: one worker starts on it at once while the others share the
    # rest, instead of its taking a worker when most of the rest is done (the run then
    # lasts as long as the lane alone, not the lane plus what came before it).
    items.sort(key=lambda item: not _in_slow_lane(item))


def _in_slow_lane(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(lane) is not None for lane in SLOW_LANE)


def _shares_a_fixture(item: pytest.Item) -> bool:
    """Whether ``item`` uses a fixture made once for more than one test."""
    info = getattr(item, "_fixtureinfo", None)  # pytest's record of the item's fixtures
    if info is None:
        return False
    return any(
        definition.scope in WIDER_SCOPES
        for definitions in info.name2fixturedefs.values()
        for definition in definitions
    )


def pytest_sessionfinish(session: pytest.Session) -> None:
    # The fork server of the tests' `ollm` (tests/support/cli_helpers.py), if started.
    helpers = sys.modules.get("cli_helpers")
    if helpers is not None:
        helpers.stop_fork_server()
