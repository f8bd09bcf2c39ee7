"""ollm's own plugins use only what a third party has: the public modules of ollm.

The public face is ``ollm`` itself, ``ollm.errors``, ``ollm.types``, ``ollm.hookspecs``,
``ollm.logs`` and ``ollm.kit`` (the kit for plugin authors); everything else in core is
internal and may change (``ollm.runtime``, ``ollm.cli``, ``ollm.plugins``...). A
plugin that imports an internal module works until it silently does not: none of ollm's
own does.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import ollm
import ollm.kit

ROOT = Path(__file__).resolve().parents[2] / "packages"
PLUGINS = (
    "ollm-http",
    "ollm-ollama",
    "ollm-openai",
    "ollm-gemini",
    "ollm-anthropic",
    "ollm-llamacpp",
    "ollm-pool",
    "ollm-react",
    "ollm-mcp",
    "ollm-otel",
    "ollm-serve",
    "ollm-testutils",
)
PUBLIC = {"ollm", "ollm.errors", "ollm.types", "ollm.hookspecs", "ollm.logs", "ollm.kit"}
INTERNAL = (
    "ollm.runtime",
    "ollm.runtime.run",
    "ollm.runtime.turn",
    "ollm.runtime.tool_runner",
    "ollm.runtime.selection",
    "ollm.plugins",
    "ollm.plugins.loader",
    "ollm.cli",
    "ollm.registries",
    "ollm.tools",
)


def core_imports(path: Path) -> list[tuple[int, str]]:
    """The ``ollm`` modules a file imports (its own package's are not core's)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found += [(node.lineno, n) for n in names if n == "ollm" or n.startswith("ollm.")]
    return found


@pytest.mark.parametrize("distribution", PLUGINS)
def test_first_party_plugins_import_only_the_public_modules_of_ollm(distribution: str) -> None:
    wrong = [
        f"{path.relative_to(ROOT)}:{line}: {module}"
        for path in sorted((ROOT / distribution / "src").rglob("*.py"))
        for line, module in core_imports(path)
        if module not in PUBLIC
    ]
    assert wrong == []


def test_the_check_sees_an_internal_import(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin.py"
    plugin.write_text("from ollm._lazy import lazy_exports\nimport ollm.runtime.run\n")
    assert [m for _, m in core_imports(plugin)] == ["ollm._lazy", "ollm.runtime.run"]


def test_the_kit_gives_what_the_first_party_plugins_use() -> None:
    for name in ollm.kit.__all__:
        assert getattr(ollm.kit, name) is not None
        assert (getattr(ollm.kit, name).__doc__ or "").strip(), name


def test_typed_output_through_a_tool_is_one_piece_of_code_in_the_kit() -> None:
    """The tool output strategy's wrapping of a schema and its undoing are the kit's, and
    ollm-anthropic's own output tool uses them rather than a copy."""
    assert {"output_tool_parameters", "output_tool_text"} <= set(ollm.kit.__all__)
    used = {
        alias.name
        for path in (ROOT / "ollm-anthropic" / "src").rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and node.module == "ollm.kit"
        for alias in node.names
    }
    assert {"output_tool_parameters", "output_tool_text"} <= used
    schema = {"type": "array", "items": {"$ref": "#/$defs/P"}, "$defs": {"P": {}}}
    wrapped, is_wrapped = ollm.kit.output_tool_parameters(schema)
    assert is_wrapped
    assert wrapped == {
        "type": "object",
        "properties": {"value": {"type": "array", "items": {"$ref": "#/$defs/P"}}},
        "required": ["value"],
        "$defs": {"P": {}},
    }
    call = ollm.ToolCall("c1", "final_result", {"value": [1, 2]})
    assert ollm.kit.output_tool_text(call, True) == "[1,2]"
    assert ollm.kit.output_tool_text(call, False) == '{"value":[1,2]}'
    broken = ollm.ToolCall("c2", "final_result", {}, invalid_args="[1,")
    assert ollm.kit.output_tool_text(broken, True) == "[1,"
    plain = {"type": "object", "properties": {}}
    assert ollm.kit.output_tool_parameters(plain) == (plain, False)


@pytest.mark.parametrize("module", INTERNAL)
def test_internal_modules_say_so(module: str) -> None:
    doc = importlib.import_module(module).__doc__ or ""
    assert "Internal:" in doc, f"{module} does not say it is internal"


def test_the_error_tree_has_its_four_families() -> None:
    families = {
        ollm.TransportError: {"CONNECTION_FAILED", "TIMEOUT", "TLS_ERROR", "STREAM_INTERRUPTED"},
        ollm.ServerError: {
            "RATE_LIMITED",
            "AUTH_FAILED",
            "MODEL_NOT_FOUND",
            "BAD_RESPONSE",
            "CONTENT_BLOCKED",
            "TOOLS_UNSUPPORTED",
            "CONTEXT_EXCEEDED",
            "PROVIDER_ERROR",
        },
        ollm.ToolError: {
            "TOOL_NOT_FOUND",
            "INVALID_TOOL",
            "INVALID_ARGUMENTS",
            "TOOL_FAILED",
            "TOOLSET_FAILED",
        },
        ollm.UsageError: {
            "INVALID_REQUEST",
            "CONVERSATION_BUSY",
            "PROVIDER_NOT_FOUND",
            "UNSUPPORTED",
            "PLUGIN_ERROR",
            "INVALID_HISTORY",
            "TOKEN_LIMIT",
        },
    }
    for family, codes in families.items():
        for code in codes:
            error = ollm.error_from_code(code, "x")
            assert isinstance(error, family), (code, family)
            assert error.code == code
            others = [f for f in families if f is not family]
            assert not any(isinstance(error, f) for f in others)
    logs = ollm.error_from_code("LOGS_UNAVAILABLE", "x")
    assert type(logs) is ollm.LogsUnavailableError
    from ollm.logs import LogsUnavailableError

    assert LogsUnavailableError is ollm.LogsUnavailableError
    assert "TransportError" in (ollm.errors.__doc__ or "")


def _contract(name_start: str) -> dict[str, object]:
    import tomllib

    config = tomllib.loads((ROOT.parent / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if c["name"].startswith(name_start))


def test_the_import_contract_forbids_every_module_of_ollm_but_the_public_ones() -> None:
    """`./ollmw lint` holds what this file checks, through the import-linter contract:
    its forbidden list and PUBLIC together name every module at the top of ollm."""
    contract = _contract("Plugins reach ollm-core only through")
    forbidden = set(contract["forbidden_modules"])  # type: ignore[call-overload]
    core = ROOT / "ollm-core" / "src" / "ollm"
    tops = {f"ollm.{p.stem}" for p in core.glob("*.py") if p.stem != "__init__"}
    tops |= {f"ollm.{p.parent.name}" for p in core.glob("*/__init__.py")}
    assert "ollm.types.*" in forbidden  # the submodules of ollm.types; ollm.types is public
    assert tops - PUBLIC == forbidden - {"ollm.types.*"}
    assert set(contract["source_modules"]) == {  # type: ignore[call-overload]
        d.replace("-", "_") for d in PLUGINS
    }
