"""Which member takes a request: a pure function of what the pool knows of each.

Among the members that may take it now (their circuit lets a request through, and no
``Retry-After`` holds them back), in this order of precedence:

1. a half-open member (its backoff is over): the request is its probe;
2. one this request has not tried yet (after a failure, another member first);
3. one with a free slot (fewer requests in flight than its declared parallelism);
4. one where the model is loaded (``/api/ps``; a server that cannot say counts as
   loaded): loading a model takes seconds;
5. the fewest requests in flight for its parallelism;
6. the conversation's own member: rendezvous hashing of the conversation id (or, for a
   request without one, of its first message) and the member's name, so that each turn
   of a conversation goes where its prompt is cached, and a member joining or leaving
   moves only the conversations it takes or had.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Candidate", "affinity_score", "best"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """What the choice reads of one member."""

    name: str
    probe: bool = False
    tried: bool = False
    in_flight: int = 0
    parallel: int = 4
    loaded: bool | None = None


def affinity_score(key: str, name: str) -> int:
    """The member's weight for ``key`` (a conversation): the highest wins.

    A digest, so that it is the same in every process (Python's own ``hash`` of a
    string changes from one run to the next).
    """
    digest = hashlib.blake2b(f"{key}\0{name}".encode("utf-8", "surrogatepass"), digest_size=8)
    return int.from_bytes(digest.digest(), "big")


def best(candidates: Sequence[Candidate], key: str) -> int:
    """The index in ``candidates`` of the member that takes the request (see the module)."""
    if not candidates:
        raise ValueError("no candidate to choose from")
    orders = [
        (
            not c.probe,
            c.tried,
            c.in_flight >= c.parallel,
            c.loaded is False,
            c.in_flight / c.parallel,
        )
        for c in candidates
    ]
    first = min(orders)
    tied = [index for index, order in enumerate(orders) if order == first]
    if len(tied) == 1:
        return tied[0]
    # Only among equals: the conversation's own member (a digest per member).
    return max(tied, key=lambda index: affinity_score(key, candidates[index].name))
