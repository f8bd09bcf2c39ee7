"""``Timeouts.uniform`` (one provider setting for every phase but connecting) and
``Timeouts.quick`` (for requests that answer at once: at least 10 s a phase)."""

from __future__ import annotations

import math

import pytest

from ollm_http import Timeouts


@pytest.mark.parametrize(
    ("connect", "seconds"),
    [(3.0, 60.0), (1.0, 2.0), (60.0, 3.0), (None, 5.0), (5.0, None), (None, None), (2.0, math.inf)],
)
def test_uniform_gives_connect_to_connecting_and_seconds_to_every_other_phase(
    connect: float | None, seconds: float | None
) -> None:
    timeouts = Timeouts.uniform(connect, seconds)
    assert timeouts == Timeouts(connect=connect, read=seconds, write=seconds, pool=seconds)
    assert type(timeouts) is Timeouts


def test_uniform_waits_forever_where_asked() -> None:
    assert Timeouts.uniform(4.0, math.inf).as_httpx() == {
        "connect": 4.0,
        "read": None,
        "write": None,
        "pool": None,
    }


@pytest.mark.parametrize(
    ("connect", "rest"),
    [
        (0.5, 10.0),
        (2.0, 10.0),
        (9.5, 10.0),
        (10.0, 10.0),  # the floor itself
        (10.5, 10.5),  # just above it: the connect timeout wins
        (30.0, 30.0),
    ],
)
def test_quick_gives_every_phase_at_least_10_s_and_keeps_connect(
    connect: float, rest: float
) -> None:
    timeouts = Timeouts.quick(connect)
    assert timeouts == Timeouts(connect=connect, read=rest, write=rest, pool=rest)
    assert type(timeouts) is Timeouts


class _Named(Timeouts):
    """A provider's own kind of timeouts: the class methods build it, not the base."""


def test_the_class_methods_build_the_class_they_are_called_on() -> None:
    assert type(_Named.uniform(1.0, 2.0)) is _Named
    assert type(_Named.quick(1.0)) is _Named
    assert type(_Named.quick(20.0)) is _Named
    assert _Named.quick(1.0) == _Named(connect=1.0, read=10.0, write=10.0, pool=10.0)
