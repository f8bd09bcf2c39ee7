"""``ollm.cli.driving.drive``: the second Ctrl-C waits for the chat to close (its partial
reply is then in the history, for the log) before it propagates."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import AsyncIterator

import anyio
import pytest
from anyio.from_thread import start_blocking_portal

from ollm.cli.driving import deferred_interrupts, drive


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_second_ctrl_c_returns_only_once_the_iterator_has_closed(backend: str) -> None:
    state = {"closed": False, "interrupted": 0}

    async def flood() -> AsyncIterator[int]:
        try:
            n = 0
            while True:
                n += 1
                yield n
        finally:
            # A close that takes several turns of the loop (a provider stream, toolsets,
            # the history's bookkeeping), as a real chat's does.
            with anyio.CancelScope(shield=True):
                for _ in range(50):
                    await anyio.sleep(0.001)
            state["closed"] = True

    def on_item(item: int) -> None:
        if item in (3, 6):  # Ctrl-C, twice, while items are drawn
            raise KeyboardInterrupt

    def on_interrupt() -> None:
        state["interrupted"] += 1

    with start_blocking_portal(backend) as portal:
        with pytest.raises(KeyboardInterrupt):
            drive(portal, flood(), on_item, on_interrupt)
        assert state["closed"], "the second Ctrl-C propagated before the iterator closed"
    assert state["interrupted"] == 1


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_items_arrive_in_order_and_an_error_propagates(backend: str) -> None:
    seen: list[int] = []

    async def numbers() -> AsyncIterator[int]:
        for n in range(100):
            yield n
            await anyio.sleep(0)
        raise ValueError("the stream broke")

    with (
        start_blocking_portal(backend) as portal,
        pytest.raises(ValueError, match="the stream broke"),
    ):
        drive(portal, numbers(), seen.append, lambda: None)
    assert seen == list(range(100))


needs_main_thread = pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread()
    or signal.getsignal(signal.SIGINT) is not signal.default_int_handler,
    reason="Ctrl-C raises KeyboardInterrupt only in the main thread, by default",
)


@needs_main_thread
def test_a_ctrl_c_during_a_log_write_is_raised_once_the_write_is_whole() -> None:
    written: list[str] = []

    def write() -> None:
        with deferred_interrupts():
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C half way through the write
            written.append("whole")

    with pytest.raises(KeyboardInterrupt):
        write()
    assert written == ["whole"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@needs_main_thread
def test_a_second_ctrl_c_during_a_log_write_raises_at_once() -> None:
    written: list[str] = []

    def write() -> None:
        with deferred_interrupts():
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
            written.append("not reached")

    with pytest.raises(KeyboardInterrupt):
        write()
    assert written == []
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@needs_main_thread
def test_a_log_write_without_ctrl_c_raises_nothing() -> None:
    with deferred_interrupts():
        pass
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
