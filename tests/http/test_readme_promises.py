"""Every promise of ollm-http's README points at a test that exists (none renamed away)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "packages" / "ollm-http" / "README.md"


def test_every_test_the_readme_names_exists() -> None:
    named = set(re.findall(r"(tests/http/\w+\.py)::(\w+)", README.read_text(encoding="utf-8")))
    assert len(named) >= 20
    for path, name in sorted(named):
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        defined = {
            node.name
            for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        assert name in defined, f"the README names {path}::{name}, which does not exist"
