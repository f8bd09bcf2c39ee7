"""``PromptedOutput``: typed output asked for in the prompt alone, read out of prose.

The output strategy for models without a native constraint: ReAct chats (whose Final
Answer is the value; a JSON constraint would forbid the protocol itself), and models
whose server ignored the constraint. The runtime validates what ``extract`` returns and
sends the corrections.
"""

from __future__ import annotations

from typing import Any

from ollm.kit import extract_json, schema_instructions, with_system
from ollm.types import ProviderRequest

__all__ = ["PromptedOutput"]


class PromptedOutput:
    """The schema in the system prompt; the value found in the reply (or Final Answer)."""

    name = "prompted"
    constrains = False

    def prepare(self, request: ProviderRequest, schema: dict[str, Any]) -> ProviderRequest:
        """``request`` with the schema stated in its system prompt, and no constraint."""
        final = (
            "Your final answer (after any tool calls; with the ReAct format, the text after "
            "Final Answer:) must be that JSON value alone."
        )
        instructions = f"{schema_instructions(schema)}\n{final}"
        return with_system(request, instructions)

    def extract(self, text: str) -> str:
        """The JSON value in the answer: the answer itself, a fenced block, or the
        object or array among its prose."""
        return extract_json(text)
