"""The lanes of a parallel run (tests/conftest.py): a test that shares a fixture made once
for its file stays with its file, in one worker; any other goes to any worker. The real
model's lane is checked in tests/llamacpp/test_lane.py."""

from __future__ import annotations

import pytest
from lanes import scheduled_in


@pytest.fixture(scope="module")
def made_once() -> object:
    return object()


def test_a_test_that_shares_a_fixture_of_its_module_stays_with_its_file(
    request: pytest.FixtureRequest, made_once: object
) -> None:
    assert scheduled_in(request) == "tests/test_lanes.py"


def test_a_test_of_its_own_goes_to_any_worker(request: pytest.FixtureRequest) -> None:
    assert scheduled_in(request) is None
    assert request.node.get_closest_marker("realmodel") is None
