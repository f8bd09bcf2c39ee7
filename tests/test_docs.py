"""The documentation keeps up with the code: every public name documented, every
reference in a docstring and every relative link of the Markdown resolving."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def docs_build() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_build", ROOT / "docs" / "build.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_public_name_has_a_docstring() -> None:
    assert docs_build().check_docstrings() == []


def test_every_reference_in_a_docstring_resolves() -> None:
    assert docs_build().check_references() == []


def test_every_relative_link_of_the_documents_resolves() -> None:
    assert docs_build().check_links() == []
