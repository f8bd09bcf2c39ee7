"""The real model's tests run in the slow lane: one worker of a parallel run takes them
all, so that two models never load at once (tests/conftest.py)."""

from __future__ import annotations

import pytest
from lanes import MODEL_FIXTURES, scheduled_in


def test_the_real_model_tests_are_marked_and_run_in_the_slow_lane(
    request: pytest.FixtureRequest,
) -> None:
    assert request.node.get_closest_marker("realmodel") is not None
    assert scheduled_in(request) == "slow-lane"


def test_each_test_of_the_real_model_runs_on_one_backend_and_the_lane_on_both(
    request: pytest.FixtureRequest,
) -> None:
    backends: dict[str, set[str]] = {}
    for item in request.session.items:
        params = getattr(item, "callspec", None)
        fixtures = set(getattr(item, "fixturenames", ()))
        lane = any(item.get_closest_marker(m) for m in ("realmodel", "realserver"))
        if (
            lane
            and params is not None
            and "anyio_backend" in params.params
            and fixtures & MODEL_FIXTURES
        ):
            name = f"{item.path}::{item.originalname}"  # type: ignore[attr-defined]
            backends.setdefault(name, set()).add(params.params["anyio_backend"])
    if not backends:
        pytest.skip("no test of the real model is collected in this run")
    assert all(len(each) == 1 for each in backends.values()), backends
    assert set().union(*backends.values()) == {"asyncio", "trio"}
