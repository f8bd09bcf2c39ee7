"""The ``ollm`` command line (placeholder until the CLI lands)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ollm`` console script."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--version"]:
        from ollm._version import __version__

        print(f"ollm {__version__}")
        return 0
    from ollm.plugins import discover

    registries = discover()
    for record in registries.plugins:
        print(
            f"{record.name:12} {record.status:8} {record.distribution or ''} {record.error or ''}"
        )
    return 0
