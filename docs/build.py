"""The API reference: built from the docstrings with pdoc, and checked.

    ./ollmw docs            build it into docs/api/ (open docs/api/index.html)
    ./ollmw docs --check    also fail on an undocumented public name or a broken reference

The check, run in CI, looks at every public name (each package's ``__all__``) and the
public methods and properties of its classes: each must have a docstring. It resolves
every dotted name written in double backticks in those docstrings (``ollm.ChatClient``,
``ollm_http.HTTPClient``) and every link of the Markdown documents into this repository
(the READMEs and docs/*.md), and fails on any that leads nowhere, and on any warning of
pdoc (both print each one).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import re
import sys
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
_ROOTS = (
    "ollm",
    "ollm_http",
    "ollm_ollama",
    "ollm_openai",
    "ollm_gemini",
    "ollm_llamacpp",
    "ollm_pool",
    "ollm_react",
    "ollm_mcp",
    "ollm_otel",
    "ollm_testutils",
)
# The packages, and the core's modules whose names are public too.
PACKAGES = (*_ROOTS, "ollm.errors", "ollm.types", "ollm.logs", "ollm.hookspecs")
_NAMES = "|".join(_ROOTS)
_REFERENCE = re.compile(rf"``((?:{_NAMES})(?:\.[A-Za-z_][A-Za-z0-9_]*)+)(?:\(\))?``")
_LINK = re.compile(r"\]\((?!https?://|mailto:|#)([^)\s]+)\)")
# Where the repository is published (a placeholder until it is): the projects' URLs, and
# the absolute links of the READMEs that go to the package index.
REPOSITORY = "https://github.com/ollm-project/ollm"
_REPOSITORY_LINK = re.compile(
    rf"\]\({re.escape(REPOSITORY)}(?:/(?:blob|tree)/main/(?P<path>[^)#\s]+))?(?:#[^)\s]*)?\)"
)
# Members every class has, or that protocols and structs bring: not ours to document.
_INHERITED = {"__init__", "__call__"}


def build(output: Path) -> list[str]:
    """Render every package's reference into ``output``; pdoc's warnings, each once.

    pdoc warns when it cannot evaluate an annotation (the reference then shows it as a
    string): a method named ``list`` hides the builtin from the annotations of its class,
    so they say ``builtins.list[...]``.
    """
    import pdoc
    import pdoc.render

    pdoc.render.configure(docformat="restructuredtext", show_source=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pdoc.pdoc(*_ROOTS, output_directory=output)
    return list(dict.fromkeys(str(warning.message) for warning in caught))


def _documented(obj: Any) -> bool:
    doc = inspect.getdoc(obj)
    return bool(doc and doc.strip())


def _public_members(cls: type) -> list[tuple[str, Any]]:
    members = []
    for name, value in vars(cls).items():
        if name.startswith("_") or name in _INHERITED:
            continue
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if inspect.isfunction(value) or isinstance(value, property):
            members.append((name, value))
    return members


def check_docstrings() -> list[str]:
    """Public names (and their classes' public methods) without a docstring."""
    problems: list[str] = []
    seen: set[int] = set()
    for module_name in PACKAGES:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            if name.startswith("__"):
                continue
            obj = getattr(module, name)
            if id(obj) in seen or not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            seen.add(id(obj))
            where = f"{module_name}.{name}"
            if not _documented(obj):
                problems.append(f"{where} has no docstring")
            if inspect.isclass(obj):
                for member, value in _public_members(obj):
                    if not _documented(value):
                        problems.append(f"{where}.{member} has no docstring")
    return problems


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        try:
            for attribute in parts[split:]:
                obj = getattr(obj, attribute)
        except AttributeError:
            return False
        return True
    return False


def check_references() -> list[str]:
    """Dotted names in double backticks, in the sources' docstrings, that lead nowhere."""
    problems: list[str] = []
    for source in sorted((ROOT / "packages").glob("*/src/**/*.py")):
        text = source.read_text(encoding="utf-8")
        for match in _REFERENCE.finditer(text):
            if not _resolves(match.group(1)):
                line = text.count("\n", 0, match.start()) + 1
                problems.append(
                    f"{source.relative_to(ROOT)}:{line}: ``{match.group(1)}`` leads nowhere"
                )
    return problems


def check_links() -> list[str]:
    """Links of the Markdown documents that lead to no file.

    Relative links, and links into this repository (``REPOSITORY``/blob/main/...), must
    name a file or folder that exists. The packages' READMEs are their pages on the
    package index too, where a relative link leads nowhere: they link absolutely.
    """
    documents = [ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("packages/*/*.md")]
    documents += [*ROOT.glob("examples/*/README.md"), ROOT / "benchmarks" / "README.md"]
    problems: list[str] = []
    for document in documents:
        if not document.exists():
            continue
        text = document.read_text(encoding="utf-8")
        shipped = document.parent.parent.name == "packages" and document.name == "README.md"
        for match in _LINK.finditer(text):
            target = match.group(1).split("#", 1)[0]
            line = text.count("\n", 0, match.start()) + 1
            where = f"{document.relative_to(ROOT)}:{line}"
            if shipped:
                problems.append(f"{where}: {target}: link absolutely ({REPOSITORY}/blob/main/...)")
            elif target and not (document.parent / target).exists():
                problems.append(f"{where}: {target} does not exist")
        for match in _REPOSITORY_LINK.finditer(text):
            target = match.group("path") or "README.md"
            if not (ROOT / target).exists():
                line = text.count("\n", 0, match.start()) + 1
                where = f"{document.relative_to(ROOT)}:{line}"
                problems.append(f"{where}: {target} does not exist in the repository")
    return problems


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail on gaps and broken links")
    parser.add_argument("--output", default=str(ROOT / "docs" / "api"))
    args = parser.parse_args(argv)
    output = Path(args.output)
    problems = [f"pdoc: {warning}" for warning in build(output)]
    print(f"docs: the API reference is in {output / 'index.html'} ({len(problems)} pdoc warnings)")
    if args.check:
        problems += check_docstrings() + check_references() + check_links()
    for problem in problems:
        print(f"docs: {problem}", file=sys.stderr)
    if not args.check:
        return 0
    if problems:
        print(f"docs: {len(problems)} problems", file=sys.stderr)
        return 1
    print("docs: every public name is documented; every reference and link resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
