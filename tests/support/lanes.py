"""Which lane a test runs in, as pytest-xdist schedules it (tests/conftest.py marks the
lanes; tests/test_lanes.py and tests/llamacpp/test_lane.py check them)."""

from __future__ import annotations

import os
import zlib

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


# The fixtures that bring the real model (loaded in the process, or a real server).
MODEL_FIXTURES = frozenset(
    ("provider", "models_dir", "model_file", "llama_server", "own_server", "embedding_server")
)
BACKENDS = ("asyncio", "trio")


def one_backend_with_the_model(metafunc: pytest.Metafunc) -> None:
    """A test of the slow lane that runs the real model runs on one anyio backend, not on
    both: what differs between the backends is proven on the fakes by every other test,
    and the model's minutes would be spent twice for it. The lane as a whole still runs
    on both, each test on the one its name picks (the same in every run)."""
    names = set(metafunc.fixturenames)
    if "anyio_backend" in names and names & MODEL_FIXTURES:
        picked = BACKENDS[zlib.crc32(metafunc.function.__name__.encode()) % len(BACKENDS)]
        # As a mark, which pytest reads after this hook and before it parametrizes the
        # fixture (a mark of the test's own takes precedence over the fixture's params).
        metafunc.definition.add_marker(pytest.mark.parametrize("anyio_backend", [picked]))
