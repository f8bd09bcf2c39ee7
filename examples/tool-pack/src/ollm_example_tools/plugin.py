"""The plugin module the entry point names. Discovery imports it at every start of ollm,
so it stays small: the tools module is imported only when ollm asks for the tools."""

from __future__ import annotations

from typing import Any

import ollm


@ollm.hookimpl
def ollm_tools() -> list[Any]:
    """The pack's tools: ``ollm chat -t word_count -t change_case -t repeat``."""
    from ollm_example_tools.tools import TOOLS

    return list(TOOLS)
