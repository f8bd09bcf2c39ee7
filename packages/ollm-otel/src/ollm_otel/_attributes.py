"""The attributes of a span that come from the chat rather than from its events: the
provider's name as the conventions give it, its address, the request's parameters, the
usage, and which tools are an MCP server's.

Internal: used by ``ollm_otel.Otel``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from ollm import MiddlewareContext
from ollm.types import ProviderRequest, Usage
from ollm_otel import _names as n

__all__ = ["mcp_prefixes", "options", "provider", "server", "usage"]


def provider(name: str) -> str:
    """``name`` as the conventions call that provider (ollm's own name otherwise)."""
    return n.PROVIDERS.get(name, name)


def options(request: ProviderRequest) -> dict[str, Any]:
    """The request's parameters that it sets, and the type of output it asks for."""
    options = request.options
    found: dict[str, Any] = {}
    for attribute, value in (
        (n.REQUEST_MAX_TOKENS, options.max_tokens),
        (n.REQUEST_TEMPERATURE, options.temperature),
        (n.REQUEST_TOP_P, options.top_p),
        (n.REQUEST_TOP_K, options.top_k),
        (n.REQUEST_SEED, options.seed),
    ):
        if value is not None:
            found[attribute] = value
    if options.stop:
        found[n.REQUEST_STOP_SEQUENCES] = list(options.stop)
    found[n.OUTPUT_TYPE] = "json" if request.response_format is not None else "text"
    return found


def usage(usage: Usage) -> dict[str, int]:
    """The token counts a reply reported."""
    found = {
        n.USAGE_INPUT_TOKENS: usage.prompt_tokens,
        n.USAGE_OUTPUT_TOKENS: usage.completion_tokens,
    }
    if usage.cached_tokens is not None:
        found[n.USAGE_CACHE_READ_INPUT_TOKENS] = usage.cached_tokens
    if usage.cache_creation_tokens is not None:
        found[n.USAGE_CACHE_CREATION_INPUT_TOKENS] = usage.cache_creation_tokens
    if usage.reasoning_tokens is not None:
        found[n.USAGE_REASONING_OUTPUT_TOKENS] = usage.reasoning_tokens
    return found


def mcp_prefixes(ctx: MiddlewareContext) -> tuple[str, ...]:
    """The prefixes of the client's MCP servers' tools (``git_`` for the server ``git``):
    its toolsets that ollm-mcp made, known by their module (ollm_mcp is not imported)."""
    toolsets = getattr(ctx.client, "toolsets", ())
    return tuple(
        f"{toolset.name}_"
        for toolset in toolsets
        if type(toolset).__module__.startswith("ollm_mcp.")
        and isinstance(getattr(toolset, "name", None), str)
    )


def server(ctx: MiddlewareContext) -> dict[str, Any]:
    """``server.address`` and ``server.port`` of the chat's provider, when it has a URL."""
    try:
        chosen = ctx.client.settings.provider
        provider = (
            ctx.client.registries.providers.get(chosen or None)
            if chosen is None or isinstance(chosen, str)
            else chosen
        )
        url = getattr(provider, "url", None)
        if not isinstance(url, str):
            return {}
        parts = urlsplit(url)
        found: dict[str, Any] = {}
        if parts.hostname:
            found[n.SERVER_ADDRESS] = parts.hostname
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
        if port:
            found[n.SERVER_PORT] = port
        return found
    except Exception:  # a provider that cannot say: no address, and the chat goes on
        return {}
