"""Where a Messages API server is and how to reach it: arguments, a profile, the environment.

Anthropic's own API is configured from the arguments, else the environment
(``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``), else the defaults. Servers that speak the
same wire (a gateway, a local server that imitates it) live side by side as named
profiles in a TOML file (``-p anthropic:local``)::

    # ~/.config/ollm/anthropic.toml (or the file OLLM_ANTHROPIC_PROFILES names)
    [local]
    base_url = "http://127.0.0.1:8080"
    model = "qwen3-coder"
    api_key_env = "LOCAL_KEY"
    max_tokens = 2048

A profile's key is its ``api_key``, else the variable its ``api_key_env`` names; never
``ANTHROPIC_API_KEY``, so a key for Anthropic is not sent to another server by accident.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgspec

from ollm.errors import InvalidRequestError, ProviderNotFoundError
from ollm.kit import config_path, named_tables
from ollm_http import (
    ServerSettings,
    ServerSetup,
    Stack,  # noqa: F401  (the inherited fields' annotations name it)
    secret_setting,
)

__all__ = [
    "API_VERSION",
    "DEFAULT_BASE_URL",
    "DEFAULT_MODEL",
    "ENV_API_KEY",
    "ENV_BASE_URL",
    "ENV_PROFILES",
    "AnthropicConfig",
    "Profile",
    "load_profiles",
    "profiles_path",
]

DEFAULT_BASE_URL = "https://api.anthropic.com"
# The one version of the Messages API there is; a header every request carries.
API_VERSION = "2023-06-01"
DEFAULT_MODEL = "claude-sonnet-4-6"
ENV_API_KEY = "ANTHROPIC_API_KEY"
# A bearer token instead of a key, as gateways in front of the API take it (and the
# agent tools that speak Messages send it).
ENV_AUTH_TOKEN = "ANTHROPIC_AUTH_TOKEN"
ENV_BASE_URL = "ANTHROPIC_BASE_URL"
ENV_MODEL = "OLLM_ANTHROPIC_MODEL"
ENV_TIMEOUT = "OLLM_ANTHROPIC_TIMEOUT"
ENV_CONNECT_TIMEOUT = "OLLM_ANTHROPIC_CONNECT_TIMEOUT"
ENV_MAX_TOKENS = "OLLM_ANTHROPIC_MAX_TOKENS"
ENV_PROMPT_CACHE = "OLLM_ANTHROPIC_PROMPT_CACHE"
ENV_PROFILES = "OLLM_ANTHROPIC_PROFILES"

# Thinking can take minutes before the first visible token.
DEFAULT_TIMEOUT = 600.0
DEFAULT_CONNECT_TIMEOUT = 10.0

SETUP = ServerSetup(
    ENV_BASE_URL, DEFAULT_BASE_URL, "OLLM_ANTHROPIC", DEFAULT_TIMEOUT, DEFAULT_CONNECT_TIMEOUT
)


class Profile(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One named server in the profiles file; every field is optional but ``base_url``."""

    base_url: str | None = None
    api_key: str | None = None
    api_key_env: str | None = None
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    model: str | None = None
    max_tokens: int | None = None
    prompt_cache: bool | None = None
    timeout: float | None = None
    connect_timeout: float | None = None
    verify: bool | str | None = None
    http: str | None = None
    affinity_header: str | None = None
    context_window: int | None = None
    description: str | None = None


@dataclass(frozen=True)
class AnthropicConfig(ServerSettings):
    """The settings of one Messages API server, resolved.

    ``max_tokens`` is the reply's limit when a request sets none (``None``: the model's
    default, see ``default_max_tokens``); ``prompt_cache`` marks the system prompt, the
    tools and the conversation's prefix for Anthropic's prompt cache. The key is never in
    the ``repr``.
    """

    base_url: str = DEFAULT_BASE_URL
    timeout: float = DEFAULT_TIMEOUT
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    api_key: str | None = field(default=None, repr=False)
    api_key_setting: str = ENV_API_KEY
    auth_token: str | None = field(default=None, repr=False)
    default_model: str | None = DEFAULT_MODEL
    max_tokens: int | None = None
    prompt_cache: bool = False
    context_window: int | None = None
    profile: str | None = None

    @property
    def provider_name(self) -> str:
        """``anthropic``, or ``anthropic:PROFILE``."""
        return "anthropic" if self.profile is None else f"anthropic:{self.profile}"

    @property
    def official(self) -> bool:
        """Whether this is Anthropic's own API."""
        return (urlsplit(self.base_url).hostname or "").endswith("api.anthropic.com")

    @property
    def where(self) -> str:
        """How messages name the setting of the address."""
        if self.profile is not None:
            return f"base_url of the profile {self.profile!r} in {profiles_path()}"
        return ENV_BASE_URL

    @classmethod
    def resolve(
        cls,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        auth_token: str | None = None,
        model: str | None = None,
        max_tokens: int | None = None,
        prompt_cache: bool | None = None,
        context_window: int | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        connect_timeout: float | None = None,
        http: str | None = None,
        verify: bool | str | None = None,
        affinity_header: str | None = None,
        profile: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> AnthropicConfig:
        """Arguments first, then the profile (if one is named), then the environment.

        ``auth_token`` (``ANTHROPIC_AUTH_TOKEN``, not read for a profile) is sent as
        ``Authorization: Bearer``, beside the key or instead of it.
        """
        env = os.environ if environ is None else environ
        chosen = _profile(profile, env) if profile is not None else Profile()
        if profile is None:
            url = base_url or env.get(ENV_BASE_URL) or DEFAULT_BASE_URL
            setting = "the api_key argument" if api_key is not None else ENV_API_KEY
            key = api_key if api_key is not None else env.get(ENV_API_KEY)
            default_model = model or env.get(ENV_MODEL) or DEFAULT_MODEL
        else:
            if not (base_url or chosen.base_url):
                raise InvalidRequestError(
                    f"The profile {profile!r} in {profiles_path(env)} has no base_url. Add "
                    'one, for example: base_url = "http://127.0.0.1:8080"'
                )
            url = base_url or chosen.base_url or DEFAULT_BASE_URL
            setting = (
                "the api_key argument"
                if api_key is not None
                else chosen.api_key_env
                if chosen.api_key_env and chosen.api_key is None
                else f"api_key (or api_key_env) of the profile {profile!r}"
            )
            key = api_key if api_key is not None else chosen.api_key
            if key is None and chosen.api_key_env:
                key = env.get(chosen.api_key_env)
            default_model = model or chosen.model or DEFAULT_MODEL
        setup = SETUP if profile is None else replace(SETUP, url_setting=f"profile {profile!r}")
        server = ServerSettings.read(
            url,
            setup,
            env,
            verify=verify if verify is not None else chosen.verify,
            headers={**chosen.headers, **(headers or {})},
            timeout=timeout if timeout is not None else chosen.timeout,
            connect_timeout=(
                connect_timeout if connect_timeout is not None else chosen.connect_timeout
            ),
            http=http if http is not None else chosen.http,
            affinity_header=(
                affinity_header if affinity_header is not None else chosen.affinity_header
            ),
        )
        limit = _max_tokens(
            max_tokens if max_tokens is not None else chosen.max_tokens,
            env.get(ENV_MAX_TOKENS),
        )
        cache = prompt_cache if prompt_cache is not None else chosen.prompt_cache
        if cache is None:
            cache = _switch(env.get(ENV_PROMPT_CACHE), ENV_PROMPT_CACHE)
        return cls(
            **server.settings(),
            api_key=secret_setting(key, setting),
            api_key_setting=setting,
            auth_token=secret_setting(
                auth_token if auth_token is not None or profile else env.get(ENV_AUTH_TOKEN),
                "the auth_token argument" if auth_token is not None else ENV_AUTH_TOKEN,
            ),
            default_model=default_model,
            max_tokens=limit,
            prompt_cache=bool(cache),
            context_window=context_window if context_window is not None else chosen.context_window,
            profile=profile,
        )


def _max_tokens(given: object, variable: str | None) -> int | None:
    value: object = given if given is not None else variable
    where = "the max_tokens setting" if given is not None else ENV_MAX_TOKENS
    if value is None or value == "":
        return None
    try:
        number: int = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        number = 0
    if isinstance(value, bool) or number < 1:
        raise InvalidRequestError(
            f"{where} is {value!r}; it must be a whole number of tokens, 1 or more."
        )
    return number


def _switch(value: str | None, where: str) -> bool | None:
    if value is None or not value.strip():
        return None
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise InvalidRequestError(f"{where} is {value!r}; use 1 (on) or 0 (off).")


def profiles_path(environ: Mapping[str, str] | None = None) -> Path:
    """The profiles file: ``OLLM_ANTHROPIC_PROFILES``, else ``anthropic.toml`` in ollm's
    config folder."""
    return config_path("anthropic.toml", ENV_PROFILES, environ)


def load_profiles(environ: Mapping[str, str] | None = None) -> dict[str, Profile]:
    """Every profile in the profiles file (none when there is no file)."""
    return named_tables(
        profiles_path(environ),
        Profile,
        what="The Anthropic profiles file",
        item="profile",
        variable=ENV_PROFILES,
        shape="Fix it: each profile is a table, for example [local] with base_url = "
        '"http://127.0.0.1:8080".',
        table='Write each profile as [{name}] followed by its settings (base_url = "...").',
    )


def _profile(name: str, environ: Mapping[str, str]) -> Profile:
    profiles = load_profiles(environ)
    found = profiles.get(name)
    if found is not None:
        return found
    path = profiles_path(environ)
    known: Any = ", ".join(sorted(profiles)) or "none"
    raise ProviderNotFoundError(
        f"There is no Anthropic profile {name!r} in {path} (known profiles: {known}). "
        f'Create it with a table [{name}] holding base_url = "http://HOST:PORT", or set '
        f"{ENV_PROFILES} to the file that has it."
    )
