"""What the model reads: the tool instructions, the corrections, the last call to answer.

Written for small local models (react-guide.md): the exact tool names with their JSON
Schemas, one action per reply, JSON with double quotes and no code fences, never an
Observation of its own, and, on request, one worked example with the first tool,
because very small models otherwise copy a made-up tool's name literally.

The shapes of a reply are said in words, never as template lines with placeholders
such as ``Final Answer: <your answer for the user>``: a 270M model copies such a line
whole, and the placeholder would be its answer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ollm.types import ToolSchema
from ollm_react._arguments import example_input
from ollm_react._parser import FormatProblem
from ollm_react._placeholder import ANSWER_WORDS
from ollm_react._schema import without_patterns

__all__ = [
    "build_instructions",
    "feedback",
    "render_schema",
    "wrap_up_prompt",
]


def _worked_example(tool: ToolSchema) -> str:
    """One whole exchange, as the turns of a transcript, with ``tool``'s real name.

    A very small model copies the example's tool name (a made-up tool's too, or a
    placeholder such as ``<the tool name>``), and fills in values shaped like the
    example's: so the example calls the first real tool, with the shape of its
    arguments, on a made-up question, and shows a whole answer.
    """
    return (
        "Use only the tools listed above, with their real names and arguments.\n"
        "Example of a whole exchange (made-up tool input and result):\n"
        "User: What is the capital of Peru?\n"
        f"Assistant: Thought: I need the {tool.name} tool for this.\n"
        f"Action: {tool.name}\n"
        f"Action Input: {example_input(tool.parameters)}\n"
        'User: Observation: {"result": "Lima"}\n'
        "Assistant: Thought: The Observation has what I need.\n"
        "Final Answer: Lima."
    )


def render_schema(parameters: object) -> str:
    """A tool's JSON Schema as the instructions show it: whole, but for the regular
    expressions of ``pattern`` (noise to a small model, and a grammar or the runtime's
    validation holds the model to them anyway)."""
    return json.dumps(without_patterns(parameters), ensure_ascii=False, default=str)


def build_instructions(
    tools: Sequence[ToolSchema],
    *,
    worked_example: bool = False,
    tool_choice: str = "auto",
) -> str:
    """The system-prompt section that teaches the ReAct protocol for these tools."""
    names = ", ".join(tool.name for tool in tools)
    listed = "\n\n".join(
        f"- {tool.name}: {tool.description.strip() or '(no description)'}\n"
        f"  Arguments (JSON Schema): {render_schema(tool.parameters)}"
        for tool in tools
    )
    parts = [
        "You can use tools to answer. The tools are:",
        listed,
        (
            "To use a tool, reply with three lines, then stop: a line that starts with "
            "Thought: and gives your short reasoning, a line that starts with Action: and "
            f"gives the tool name (one of: {names}), and a line that starts with Action "
            "Input: and gives the arguments as one JSON object. The tool's result comes "
            "back in the next message, on a line that starts with Observation:."
        ),
        (
            "When you have what you need, or need no tool, reply with a line that starts "
            "with Thought: and gives your short reasoning, then a line that starts with "
            f"Final Answer: and gives {ANSWER_WORDS}."
        ),
        (
            "Rules:\n"
            "- One Action per reply; wait for its Observation before the next one.\n"
            "- Action Input is plain JSON with double quotes: no code fences, no comments.\n"
            "- Use a tool name exactly as listed.\n"
            '- Never write "Observation:" yourself; it comes from the tool.'
        ),
    ]
    choice = _choice_rule(tool_choice, tools)
    if choice:
        parts.append(choice)
    if worked_example and tools:
        parts.append(_worked_example(tools[0]))
    return "\n\n".join(parts)


def _choice_rule(tool_choice: str, tools: Sequence[ToolSchema]) -> str:
    if tool_choice == "required":
        return "- Use at least one tool before you give the Final Answer."
    if tool_choice not in ("auto", "none", "") and any(t.name == tool_choice for t in tools):
        return f"- Use the tool {tool_choice} before you give the Final Answer."
    return ""


def shapes(tools: Sequence[ToolSchema], tool: ToolSchema | None = None) -> str:
    """The two allowed reply shapes, with the real tool names."""
    names = ", ".join(t.name for t in tools) or "(none)"
    if tool is not None:
        action = (
            f"To use {tool.name}, write a Thought line, then these two lines "
            "(with the arguments your question needs):\n"
            f"Action: {tool.name}\n"
            f"Action Input: {example_input(tool.parameters)}"
        )
    else:
        action = (
            "To use a tool, write a Thought line, then a line that starts with Action: and "
            f"gives the tool name (one of: {names}), then a line that starts with Action "
            "Input: and gives the arguments as one JSON object."
        )
    return f"Reply in exactly one of these two shapes.\n{action}\n{_ANSWER_SHAPE}"


_ANSWER_SHAPE = (
    "To answer, write a line that starts with Thought: and gives your short reasoning, "
    "then a line that starts with Final Answer: and gives the answer itself."
)


_FIXES = {
    "empty": "Write a Thought, then an Action with its Action Input, or a Final Answer.",
    "empty_answer": "Write the answer itself after 'Final Answer:'.",
    "thought_only": "After the Thought, write an Action with its Action Input, or a Final Answer.",
    "input_before_action": "Write the Action line (the tool name) before its Action Input.",
    "missing_tool": "Write the tool name after 'Action:'.",
    "missing_input": "After the Action line, write 'Action Input:' and the arguments as JSON "
    "(use {} when the tool takes no arguments).",
    "bad_input": "Write the Action Input again as one JSON object with double quotes.",
    "placeholder": "Write the real answer to the question after 'Final Answer:', in words.",
}


def feedback(problem: FormatProblem, tools: Sequence[ToolSchema]) -> str:
    """The Observation that tells the model exactly what was wrong and how to reply."""
    if problem.kind == "unknown_tool":
        names = ", ".join(t.name for t in tools) or "(none)"
        hint = f" Did you mean {problem.suggestion}?" if problem.suggestion else ""
        what = (
            f"Observation: Error: {problem.detail}.{hint} "
            f"The tools are: {names}. Use one of these names exactly."
        )
        return f"{what}\n{shapes(tools)}"
    tool = next((t for t in tools if t.name == problem.tool), None)
    what = f"Observation: Error: your reply could not be used: {problem.detail}."
    fix = _FIXES.get(problem.kind)
    # Joined here, not by editing the whole text: the detail may quote the model's words.
    if fix:
        what = f"{what} {fix}"
    return f"{what}\n{shapes(tools, tool)}"


def wrap_up_prompt() -> str:
    """The last request's user message, at the turn limit: no more tools, answer now."""
    return (
        "Observation: You have used all the tool calls allowed for this question. "
        "Do not use any tool now. Reply with your best answer from what you already "
        f"know. {_ANSWER_SHAPE}"
    )
