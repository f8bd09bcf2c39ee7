"""Which lane a test runs in, as pytest-xdist schedules it (tests/conftest.py marks the
lanes; tests/test_lanes.py and tests/llamacpp/test_lane.py check them)."""

from __future__ import annotations

import os

import pytest

__all__ = ["scheduled_in"]


def scheduled_in(request: pytest.FixtureRequest) -> str | None:
    """The group pytest-xdist schedules the test by (``None``: any worker).

    In a worker of a ``--dist loadgroup`` run, that is what xdist appended to the test's
    id (``@group``) when it read the groups: a marker it did not see by then, or an id
    that pytest did not let it change (pytest 9.2 with xdist 3.8), schedules nothing.
    In a run without xdist, the marker's group.
    """
    if os.environ.get("PYTEST_XDIST_WORKER") and request.config.getoption("loadgroup", False):
        _, at, group = request.node.nodeid.rpartition("@")
        return group if at else None
    marker = request.node.get_closest_marker("xdist_group")
    return None if marker is None else str(marker.args[0])
