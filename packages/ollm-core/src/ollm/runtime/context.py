"""What a chat needs from its client, and nothing more: the run context.

A ``ChatClient`` keeps one ``RunContext`` for all its chats; a ``ChatRun`` reaches the
client only through it (the providers and tools it resolves, the capabilities it caches,
the models known to refuse native tools), never through the client's private methods.

Internal: not part of ollm's public API (a step of ``ollm.ChatClient.chat``); its layout
may change in any release.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from ollm.registries import Registries
from ollm.runtime.settings import ChatSettings, ToolItem
from ollm.runtime.toolsets import ToolsetSessions, select_tools
from ollm.tools.tool import Tool
from ollm.tools.toolset import Toolset
from ollm.types.models import ModelCapabilities
from ollm.types.provider import ModelInspection, ProviderAdapter

if TYPE_CHECKING:
    from ollm.runtime.compaction import ContextView
    from ollm.runtime.middleware import Layer

__all__ = ["ClientServices", "RunContext"]

log = logging.getLogger(__name__)


class ClientServices(Protocol):
    """What a run context uses of its client (a ``ChatClient``): its registries and
    toolsets. The client builds the context, so the context names it by this."""

    @property
    def registries(self) -> Registries:
        """The client's registries (plugins are discovered the first time)."""
        ...

    @property
    def toolsets(self) -> tuple[Toolset, ...]:
        """The client's own toolsets, open for all its chats."""
        ...

    @property
    def settings(self) -> ChatSettings:
        """The client's settings (a middleware reads them through its context)."""
        ...


class RunContext:
    """The client's services and memory, shared by its chats.

    - ``provider(given)``: the provider a chat names (a registered name, an object, or
      the default);
    - ``tools(items, chat_toolsets)``: the tools a chat offers, opening the toolsets it
      needs (the client's stay open, a chat's own close with it);
    - ``capabilities(provider, model)``: what the model can do, asked once per client;
    - ``middleware(items)``: the layers of the middleware a chat names (each installed
      one built once per client);
    - ``refused``: the (provider, model) pairs that refused native tools (ReAct then);
    - ``format_ignored``: the (provider, model) pairs whose server ignored the native
      output constraint (typed output is asked for in the prompt then);
    - ``approved``: the tools a person approved for every chat of the client;
    - ``views``: what requests send of each conversation, once compacted;
    - ``windows``: the window ``context_window="auto"`` last asked for, by provider
      and model (it never shrinks within a client).
    """

    __slots__ = (
        "_built",
        "_capabilities",
        "_toolset_sessions",
        "approved",
        "client",
        "compact_next",
        "format_ignored",
        "refused",
        "views",
        "windows",
    )

    def __init__(self, client: ClientServices) -> None:
        self.client = client
        self._toolset_sessions = ToolsetSessions()
        self._capabilities: dict[tuple[str, str], ModelCapabilities] = {}
        self._built: dict[str, object] = {}
        self.refused: set[tuple[str, str]] = set()
        self.format_ignored: set[tuple[str, str]] = set()
        self.approved: set[str] = set()
        # The window context_window="auto" last asked for, by (provider, model).
        self.windows: dict[tuple[str, str], int] = {}
        # What requests send of each conversation (compaction), by conversation id.
        self.views: dict[str, ContextView] = {}
        # The conversations whose next request is compacted whatever its size.
        self.compact_next: set[str] = set()

    @property
    def registries(self) -> Registries:
        """The client's registries (plugins are discovered the first time)."""
        return self.client.registries

    def provider(self, provider: str | ProviderAdapter | None) -> ProviderAdapter:
        """The provider ``provider`` names (``None``: the default)."""
        if provider is None or isinstance(provider, str):
            return self.registries.providers.get(provider)
        return provider

    def middleware(self, items: Sequence[str | object]) -> list[Layer]:
        """The layers of ``items``: objects as they are, names built from the installed
        middleware the first time this client uses them (``PluginError`` if unknown)."""
        from ollm.runtime.middleware import layer_of  # only a chat with middleware needs it

        layers: list[Layer] = []
        for item in items:
            if isinstance(item, str):
                built = self._built.get(item)
                if built is None:
                    built = self._built[item] = self.registries.middleware.create(item)
                layers.append(layer_of(built, item))
            else:
                layers.append(layer_of(item))
        return layers

    async def tools(
        self,
        items: Sequence[ToolItem],
        chat_toolsets: Callable[[], ToolsetSessions],
        notices: list[str] | None = None,
    ) -> dict[str, Tool]:
        """The tools ``items`` name, by name; toolsets opened as needed (a tool renamed
        because its name was taken is said in ``notices``)."""
        if not items:
            return {}
        mine = self.client.toolsets

        async def open_toolset(toolset: Toolset) -> dict[str, Tool]:
            if any(toolset is known for known in mine):
                return await self._toolset_sessions.tools(toolset)
            return await chat_toolsets().tools(toolset)

        return await select_tools(
            items,  # type: ignore[arg-type]  # functions were made tools by the client
            self.registries.tools,
            mine,
            open_toolset,
            notices,
        )

    async def capabilities(self, provider: ModelInspection, model: str) -> ModelCapabilities | None:
        """What ``model`` can do, as ``provider`` reports it (``None``: unknown)."""
        key = (getattr(provider, "name", ""), model)
        cached = self._capabilities.get(key)
        if cached is not None:
            return cached
        try:
            capabilities = await provider.model_capabilities(model)
        except Exception:
            # Unknown is fine: the request itself will say what is wrong, if anything.
            log.debug("capabilities of %r are unknown", model, exc_info=True)
            return None
        self._capabilities[key] = capabilities
        return capabilities

    async def aclose(self) -> None:
        """Close the toolsets the client opened."""
        await self._toolset_sessions.aclose()
