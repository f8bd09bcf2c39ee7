"""The progress display of ``ollm models pull``: a bar per layer, with bytes and rate."""

from __future__ import annotations

import os
from typing import Any

from ollm.cli.terminal import Terminal
from ollm.types.models import PullProgress
from ollm.types.provider import ModelManagement

__all__ = ["PullDisplay", "show_pull"]


class PullDisplay:
    """Draws pull progress: one tqdm bar per layer on a terminal, status lines elsewhere.

    Odd steps (a size that shrinks, ``completed`` above ``total``, a step without a
    digest in the middle of a layer) are drawn as best they can be, never fatal.
    """

    def __init__(self, terminal: Terminal, name: str) -> None:
        self.terminal = terminal
        self.name = name
        self.bar: Any = None
        self.digest: str | None = None
        self.last_status: str | None = None
        self.interactive = terminal.err_color or _isatty(terminal.err)

    def update(self, step: PullProgress) -> None:
        """Show one step."""
        if step.digest and step.total:
            self._layer(step)
            return
        self.close()
        if step.status and step.status != self.last_status:
            self.last_status = step.status
            self.terminal.info(step.status, "dim")

    def _layer(self, step: PullProgress) -> None:
        total = max(step.total or 0, step.completed or 0)
        # Off a terminal, one line per layer: later steps of the same layer print nothing.
        if step.digest != self.digest or (self.interactive and self.bar is None):
            self.close()
            self.digest = step.digest
            if not self.interactive:
                self.terminal.info(f"{step.status} ({_human(total)})", "dim")
                return
            from tqdm import tqdm  # only `ollm models pull` pays for it

            self.bar = tqdm(
                total=total,
                desc=step.status,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                file=self.terminal.err,
                leave=True,
                **_size_of(self.terminal.err),
            )
        if self.bar is not None:
            if total != self.bar.total:
                self.bar.total = total
            completed = min(step.completed or 0, total)
            self.bar.update(completed - self.bar.n)

    def close(self) -> None:
        """Finish the current bar, if any."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def show_pull(provider: ModelManagement, name: str, backend: str, terminal: Terminal) -> bool:
    """Pull ``name`` with its progress drawn; ``False`` when Ctrl-C stopped it (one Ctrl-C
    ends a pull: its stream is closed), ``True`` when it is done."""
    from anyio.from_thread import start_blocking_portal

    from ollm.cli.driving import drive

    display = PullDisplay(terminal, name)

    def interrupted() -> None:
        raise KeyboardInterrupt

    with start_blocking_portal(backend) as portal:
        try:
            drive(portal, provider.stream_pull(name), display.update, interrupted)
        except KeyboardInterrupt:
            return False
        finally:
            display.close()
            aclose = getattr(provider, "aclose", None)
            if aclose is not None:
                portal.call(aclose)
    return True


# A terminal that reports no size (0 columns or 0 rows: some containers, editors' shells
# and CI pseudo-terminals) gets this one; tqdm would draw nothing at all in it.
_FALLBACK_SIZE = {"ncols": 80, "nrows": 24}


def _size_of(stream: Any) -> dict[str, Any]:
    """How wide the bars are: the terminal's width as it changes, else a fixed one."""
    try:
        size = os.get_terminal_size(stream.fileno())
    except (AttributeError, ValueError, OSError):
        return _FALLBACK_SIZE
    if size.columns <= 1 or size.lines <= 1:
        return _FALLBACK_SIZE
    return {"dynamic_ncols": True}


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024:
            return f"{value:.0f} {unit}"
        value /= 1024
    return f"{value:.1f} TB"


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
