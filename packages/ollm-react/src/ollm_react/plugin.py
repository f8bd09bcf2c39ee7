"""The ``react`` plugin: registers the ReAct tool-calling strategy with ollm.

Discovery imports this module at start-up, so it imports nothing of its own until a
chat asks for a strategy: the factories import the parser and the strategy then.
Four tool strategies are registered: ``react``, which the runtime also picks for a model
that cannot call tools natively; ``react-example``, the same with a worked example in
the instructions, for very small models; ``json-react``, each step a JSON object the
backend constrains (a grammar, Ollama's ``format``, ``response_format``), which the
runtime picks for a model whose capabilities name it (ollm-llamacpp's); and
``recover``, native tool calling that also runs the calls a model wrote as text, which
the runtime uses in place of plain native tool calling unless a chat turns it off
(``recover_text_tool_calls=False``). One output strategy too: ``prompted``, typed
output asked for in the prompt alone, which the runtime uses with ReAct and for a model
whose server ignored the native JSON Schema constraint.
"""

from __future__ import annotations

from ollm.hookspecs import hookimpl
from ollm.types import OutputStrategy, OutputStrategySpec, StrategySpec, ToolStrategy

__all__ = ["ollm_output_strategies", "ollm_tool_strategies"]


def _react() -> ToolStrategy:
    from ollm_react._strategy import ReActStrategy

    return ReActStrategy()


def _react_with_example() -> ToolStrategy:
    from ollm_react._strategy import ReActStrategy

    return ReActStrategy(worked_example=True, name="react-example")


def _json_react() -> ToolStrategy:
    from ollm_react._json_react import JsonReActStrategy

    return JsonReActStrategy()


def _prompted() -> OutputStrategy:
    from ollm_react._output import PromptedOutput

    return PromptedOutput()


def _recover() -> ToolStrategy:
    from ollm_react._recover import RecoveringStrategy

    return RecoveringStrategy()


@hookimpl
def ollm_tool_strategies() -> list[StrategySpec]:
    """ReAct, for models without native tool calling; recovery of calls written as text."""
    return [
        StrategySpec(
            "recover",
            _recover,
            "Native tool calling that also runs calls written as text (<tool_call>, JSON...)",
        ),
        StrategySpec("react", _react, "Tool calling through the ReAct text protocol"),
        StrategySpec(
            "react-example",
            _react_with_example,
            "ReAct with a worked example in the instructions, for very small models",
        ),
        StrategySpec(
            "json-react",
            _json_react,
            "ReAct steps as JSON objects the backend constrains (llama.cpp grammar, Ollama "
            "format, response_format): every call parseable, its arguments of the schema",
        ),
    ]


@hookimpl
def ollm_output_strategies() -> list[OutputStrategySpec]:
    """Typed output asked for in the prompt alone: for ReAct, and servers that ignore
    the native constraint."""
    return [
        OutputStrategySpec(
            "prompted", _prompted, "Typed output asked for in the prompt, read out of prose"
        )
    ]
