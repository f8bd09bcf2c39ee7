"""Where an OpenAI-compatible server is and how to talk to it: arguments, profiles, environment.

One server is configured from the arguments, else the environment, else the defaults.
Several live side by side as named profiles in a TOML file (``-p openai:vllm``)::

    # ~/.config/ollm/openai.toml (or the file OLLM_OPENAI_PROFILES names)
    [vllm]
    base_url = "http://gpu-box:8000/v1"
    model = "Qwen/Qwen3-8B"
    api_key_env = "VLLM_API_KEY"
    context_window = 32768

    [lmstudio]
    base_url = "http://127.0.0.1:1234/v1"
    model = "qwen2.5-7b-instruct"
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal
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
    "DEFAULT_BASE_URL",
    "ENGINES",
    "ENV_API_KEY",
    "ENV_BASE_URL",
    "ENV_PROFILES",
    "Engine",
    "OpenAIConfig",
    "Profile",
    "load_profiles",
    "profiles_path",
]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
ENV_BASE_URL = "OPENAI_BASE_URL"
ENV_API_KEY = "OPENAI_API_KEY"
ENV_ORGANIZATION = "OPENAI_ORG_ID"
ENV_PROJECT = "OPENAI_PROJECT_ID"
ENV_MODEL = "OLLM_OPENAI_MODEL"
ENV_TIMEOUT = "OLLM_OPENAI_TIMEOUT"
ENV_CONNECT_TIMEOUT = "OLLM_OPENAI_CONNECT_TIMEOUT"
ENV_PROFILES = "OLLM_OPENAI_PROFILES"
ENV_HTTP = "OLLM_OPENAI_HTTP"

# A local model can think for minutes before its first token; a hosted one rarely does.
DEFAULT_TIMEOUT = 600.0
DEFAULT_CONNECT_TIMEOUT = 10.0

MaxTokensField = Literal["max_tokens", "max_completion_tokens"]
Engine = Literal["vllm", "llamacpp", "sglang", "ollama", "openai"]
"""The server's engine, for the options' names it takes (detected when not set)."""
ENGINES: tuple[Engine, ...] = ("vllm", "llamacpp", "sglang", "ollama", "openai")

# Settings that go from an argument or a profile to the config as they are.
_PASSED_ON = frozenset(
    {
        "tools",
        "vision",
        "thinking",
        "context_window",
        "max_tokens_field",
        "stream_usage",
        "stream",
        "affinity_user",
        "engine",
    }
)


class Profile(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One named server in the profiles file; every field is optional."""

    base_url: str | None = None
    api_key: str | None = None
    api_key_env: str | None = None
    organization: str | None = None
    project: str | None = None
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    model: str | None = None
    timeout: float | None = None
    connect_timeout: float | None = None
    tools: bool | None = None
    vision: bool | None = None
    thinking: bool | None = None
    context_window: int | None = None
    max_tokens_field: MaxTokensField | None = None
    stream_usage: bool | None = None
    stream: bool | None = None
    verify: bool | str | None = None
    http: str | None = None
    affinity_header: str | None = None
    affinity_user: bool | None = None
    engine: Engine | None = None
    description: str | None = None


SETUP = ServerSetup(
    ENV_BASE_URL,
    "http://127.0.0.1:8000/v1",
    "OLLM_OPENAI",
    DEFAULT_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT,
)


@dataclass(frozen=True)
class OpenAIConfig(ServerSettings):
    """The settings of one OpenAI-compatible server, resolved.

    The server's address, timeouts, HTTP stack and headers are ``ollm_http``'s
    ``ServerSettings``, read as every provider reads them. ``api_key_setting`` names
    where the key comes from (or should), for messages. ``official`` is true for
    OpenAI's own API, which refuses parameters that other servers accept (``top_k``,
    ``chat_template_kwargs``). ``affinity_user`` sends each chat's conversation id as
    the request's ``user`` field (a router, a LiteLLM proxy, keeps one user on one
    server). The key is never in the ``repr``.
    """

    timeout: float = DEFAULT_TIMEOUT
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    api_key: str | None = field(default=None, repr=False)
    api_key_setting: str = ENV_API_KEY
    organization: str | None = None
    project: str | None = None
    default_model: str | None = None
    tools: bool | None = None
    vision: bool | None = None
    thinking: bool | None = None
    context_window: int | None = None
    max_tokens_field: MaxTokensField | None = None
    stream_usage: bool | None = None
    stream: bool = True
    affinity_user: bool = False
    engine: Engine | None = None
    profile: str | None = None

    @property
    def provider_name(self) -> str:
        """The provider's name as ``-p`` takes it: ``openai``, or ``openai:PROFILE``."""
        return "openai" if self.profile is None else f"openai:{self.profile}"

    @property
    def official(self) -> bool:
        """Whether this is OpenAI's own API."""
        return (urlsplit(self.base_url).hostname or "").endswith("api.openai.com")

    @property
    def known_engine(self) -> Engine | None:
        """The engine the settings name: ``engine``, else ``openai`` for OpenAI's API."""
        if self.engine is not None:
            return self.engine
        return "openai" if self.official else None

    @property
    def where(self) -> str:
        """How messages name the setting of the address (the profile, or the variable)."""
        if self.profile is not None:
            return f"base_url of the profile {self.profile!r} in {profiles_path()}"
        return ENV_BASE_URL

    @classmethod
    def resolve(
        cls,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        organization: str | None = None,
        project: str | None = None,
        headers: Mapping[str, str] | None = None,
        model: str | None = None,
        timeout: float | None = None,
        connect_timeout: float | None = None,
        profile: str | None = None,
        http: str | None = None,
        affinity_header: str | None = None,
        environ: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> OpenAIConfig:
        """Arguments first, then the profile (if one is named), then the environment.

        A profile's API key is its ``api_key``, else the variable its ``api_key_env``
        names; it never falls back to ``OPENAI_API_KEY``, so a key for OpenAI is not
        sent to another server by accident.
        """
        env = os.environ if environ is None else environ
        chosen = Profile()
        if profile is not None:
            chosen = _profile(profile, env)
        if profile is None:
            url = base_url or env.get(ENV_BASE_URL) or DEFAULT_BASE_URL
            key_setting = "the api_key argument" if api_key is not None else ENV_API_KEY
            key = api_key if api_key is not None else env.get(ENV_API_KEY)
            org = organization or env.get(ENV_ORGANIZATION)
            proj = project or env.get(ENV_PROJECT)
            default_model = model or env.get(ENV_MODEL)
        else:
            if not (base_url or chosen.base_url):
                raise InvalidRequestError(
                    f"The profile {profile!r} in {profiles_path(env)} has no base_url. Add "
                    'one, for example: base_url = "http://127.0.0.1:8000/v1"'
                )
            url = base_url or chosen.base_url or DEFAULT_BASE_URL
            key_setting = (
                "the api_key argument"
                if api_key is not None
                else chosen.api_key_env
                if chosen.api_key_env and chosen.api_key is None
                else f"api_key (or api_key_env) of the profile {profile!r}"
            )
            key = api_key if api_key is not None else chosen.api_key
            if key is None and chosen.api_key_env:
                key = env.get(chosen.api_key_env)
            org = organization or chosen.organization
            proj = project or chosen.project
            default_model = model or chosen.model
        given: dict[str, Any] = {
            "timeout": timeout if timeout is not None else chosen.timeout,
            "connect_timeout": (
                connect_timeout if connect_timeout is not None else chosen.connect_timeout
            ),
            "http": http if http is not None else chosen.http,
            "affinity_header": (
                affinity_header if affinity_header is not None else chosen.affinity_header
            ),
            "verify": chosen.verify if overrides.get("verify") is None else overrides["verify"],
        }
        setup = SETUP if profile is None else replace(SETUP, url_setting=f"profile {profile!r}")
        server = ServerSettings.read(
            url, setup, env, headers={**chosen.headers, **(headers or {})}, **given
        )
        unknown = overrides.keys() - _PASSED_ON - {"verify"}
        if unknown:
            raise TypeError(f"OpenAIConfig.resolve() got unexpected arguments {sorted(unknown)}")
        engine = overrides.get("engine")
        if engine is not None and engine not in ENGINES:
            raise InvalidRequestError(
                f"engine={engine!r} is not an engine ollm knows: use one of "
                f"{', '.join(ENGINES)}, or leave it out to have it detected."
            )
        # What the model and server can do: the argument, else the profile, else the default.
        values: dict[str, Any] = {}
        for name in _PASSED_ON:
            value = overrides.get(name)
            value = getattr(chosen, name) if value is None else value
            if value is not None:
                values[name] = value
        return cls(
            **server.settings(),
            api_key=secret_setting(key, key_setting),
            api_key_setting=key_setting,
            organization=org or None,
            project=proj or None,
            default_model=default_model or None,
            profile=profile,
            **values,
        )


def profiles_path(environ: Mapping[str, str] | None = None) -> Path:
    """The profiles file: ``OLLM_OPENAI_PROFILES``, else ``openai.toml`` in ollm's config folder."""
    return config_path("openai.toml", ENV_PROFILES, environ)


def load_profiles(environ: Mapping[str, str] | None = None) -> dict[str, Profile]:
    """Every profile in the profiles file (none when there is no file)."""
    return named_tables(
        profiles_path(environ),
        Profile,
        what="The OpenAI profiles file",
        item="profile",
        variable=ENV_PROFILES,
        shape="Fix it: each profile is a table, for example [vllm] with base_url = "
        '"http://127.0.0.1:8000/v1".',
        table='Write each profile as [{name}] followed by its settings (base_url = "...").',
    )


def _profile(name: str, environ: Mapping[str, str]) -> Profile:
    profiles = load_profiles(environ)
    profile = profiles.get(name)
    if profile is not None:
        return profile
    path = profiles_path(environ)
    if not profiles:
        raise ProviderNotFoundError(
            f"There is no OpenAI-compatible profile {name!r}: {path} has none. Create it "
            f'with a table [{name}] holding base_url = "http://HOST:PORT/v1" (and model = '
            f'"..."), or set {ENV_PROFILES} to the file that has it.'
        )
    raise ProviderNotFoundError(
        f"There is no OpenAI-compatible profile {name!r} in {path}. Known profiles: "
        f"{', '.join(sorted(profiles))}."
    )
