"""The real model's tests run in the slow lane: one worker of a parallel run takes them
all, so that two models never load at once (tests/conftest.py)."""

from __future__ import annotations

import pytest
from lanes import scheduled_in


def test_the_real_model_tests_are_marked_and_run_in_the_slow_lane(
    request: pytest.FixtureRequest,
) -> None:
    assert request.node.get_closest_marker("realmodel") is not None
    assert scheduled_in(request) == "slow-lane"
