"""Run one Python block of the documentation as a script: ``run_block.py FILE DOCUMENT``.

The file holds the block (and the blocks it continues) at their lines of the document,
so a traceback names the document and the line. Code that awaits at its top level runs
on asyncio, as in ``python -m asyncio``. A block that implements ollm hooks is then
loaded as a plugin, strictly, as discovery would load it: a hook that fails fails here.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import sys
import traceback
import types


def main(path: str, document: str) -> None:
    try:
        run(path, document)
    except BaseException as exc:
        # Only the document's lines: this runner and asyncio's are noise to a reader.
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == document]
        sys.stderr.write("".join(traceback.format_list(frames)))
        sys.stderr.write("".join(traceback.format_exception_only(exc)))
        sys.exit(1)


def run(path: str, document: str) -> None:
    with open(path, encoding="utf-8") as file:
        text = file.read()
    code = compile(text, document, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    module = types.ModuleType("__main__")
    module.__file__ = path
    sys.modules["__main__"] = module
    if code.co_flags & inspect.CO_COROUTINE:
        asyncio.run(eval(code, module.__dict__))
    else:
        exec(code, module.__dict__)
    if any(hasattr(value, "ollm_impl") for value in vars(module).values()):
        import ollm

        ollm.discover(settings=ollm.PluginSettings(strict=True), plugins=[module], entry_points=[])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
