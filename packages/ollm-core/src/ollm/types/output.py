"""How a chat asks a model for typed output: the contract an output strategy fulfils.

A chat given ``output=T`` asks the model for a JSON value of the schema of ``T`` and
validates the reply on the client, always. How it asks is the output strategy's job:
the built-in ``native`` one hands the schema to the provider as its native constraint
(Ollama's ``format``, OpenAI's ``response_format``, Gemini's ``responseSchema``) and
states it in the system prompt too, for servers that ignore the constraint. A plugin
can register another through the ``ollm_output_strategies`` hook; ``ollm-react``
registers ``prompted``, which asks in the prompt alone and reads the value out of
prose (the mode for models without native support, and for ReAct's final answers).
The built-in ``tool`` asks for the value as the arguments of a forced tool call.

Beyond the protocol, a strategy may have: ``stream(events)``, which the runtime puts
around the provider's stream on the turns that use it (``tool`` turns its call back
into text there); ``uses_tools = True`` when it needs native tool calling (a model
without it is asked as ``auto`` asks, with a notice); ``answer_again``, how a correction asks
for the value again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import msgspec

from ollm.types.request import ProviderRequest

__all__ = ["OutputStrategy", "OutputStrategySpec"]


@runtime_checkable
class OutputStrategy(Protocol):
    """One way of asking a model for a JSON value of a schema, and reading it back."""

    @property
    def name(self) -> str:
        """The strategy's registry name (``native``, ``prompted``)."""
        ...

    @property
    def constrains(self) -> bool:
        """Whether the requests carry a native constraint the server should obey (then
        a reply that is not JSON at all means the server ignored it: the model is
        switched to ``prompted`` for the client's lifetime)."""
        ...

    def prepare(self, request: ProviderRequest, schema: dict[str, Any]) -> ProviderRequest:
        """``request`` asking for a JSON value of ``schema`` (a JSON Schema whose root is
        inlined; ``$defs`` may follow)."""
        ...

    def extract(self, text: str) -> str:
        """The JSON text in a reply's ``text`` (the reply itself, or the value it holds
        among prose or code fences); the runtime validates what this returns."""
        ...


class OutputStrategySpec(msgspec.Struct, frozen=True):
    """An output strategy; ``factory`` builds one for each chat."""

    name: str
    factory: Callable[[], OutputStrategy]
    description: str = ""
