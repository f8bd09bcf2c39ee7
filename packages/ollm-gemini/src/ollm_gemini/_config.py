"""Where the Gemini API is and how to reach it: arguments, then the environment, then defaults.

The key goes in the ``x-goog-api-key`` header, never in the URL: URLs end up in logs,
proxies' included.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ollm.errors import InvalidRequestError
from ollm_http import (
    ServerSettings,
    ServerSetup,
    Stack,  # noqa: F401  (the inherited fields' annotations name it)
    secret_setting,
)

__all__ = [
    "DEFAULT_API_VERSION",
    "DEFAULT_BASE_URL",
    "DEFAULT_MODEL",
    "ENV_API_KEY",
    "ENV_BASE_URL",
    "GeminiConfig",
]

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
DEFAULT_API_VERSION = "v1beta"
DEFAULT_MODEL = "gemini-2.5-flash"
ENV_API_KEY = "GEMINI_API_KEY"
ENV_GOOGLE_API_KEY = "GOOGLE_API_KEY"
ENV_BASE_URL = "OLLM_GEMINI_BASE_URL"
ENV_API_VERSION = "OLLM_GEMINI_API_VERSION"
ENV_MODEL = "OLLM_GEMINI_MODEL"
ENV_TIMEOUT = "OLLM_GEMINI_TIMEOUT"
ENV_CONNECT_TIMEOUT = "OLLM_GEMINI_CONNECT_TIMEOUT"
ENV_HTTP = "OLLM_GEMINI_HTTP"

# A thinking model can think for minutes before its first visible token.
DEFAULT_TIMEOUT = 600.0
DEFAULT_CONNECT_TIMEOUT = 10.0
_VERSIONS = ("v1beta", "v1", "v1alpha")
# A model's name: the resources the API has models under, and one name with no path in it.
_COLLECTIONS = ("models", "tunedModels")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-]*")


SETUP = ServerSetup(
    ENV_BASE_URL, DEFAULT_BASE_URL, "OLLM_GEMINI", DEFAULT_TIMEOUT, DEFAULT_CONNECT_TIMEOUT
)


@dataclass(frozen=True)
class GeminiConfig(ServerSettings):
    """The settings of the Gemini provider, resolved.

    The API's address, timeouts, HTTP stack and headers are ``ollm_http``'s
    ``ServerSettings``, read as every provider reads them. ``api_key_setting`` names
    where the key came from (or should), for messages; the key is not in the ``repr``.
    """

    base_url: str = DEFAULT_BASE_URL
    timeout: float = DEFAULT_TIMEOUT
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    api_key: str | None = field(default=None, repr=False)
    api_key_setting: str = ENV_API_KEY
    api_version: str = DEFAULT_API_VERSION
    default_model: str | None = DEFAULT_MODEL

    @property
    def where(self) -> str:
        """How messages name the setting of the address."""
        return ENV_BASE_URL

    @classmethod
    def resolve(
        cls,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        api_version: str | None = None,
        model: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        connect_timeout: float | None = None,
        http: str | None = None,
        verify: bool | str | None = None,
        affinity_header: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> GeminiConfig:
        """Each setting from its argument, else its variable, else the default.

        The key is ``api_key``, else ``GEMINI_API_KEY``, else ``GOOGLE_API_KEY`` (the
        names Google's own SDKs read).
        """
        env = os.environ if environ is None else environ
        if api_key is not None:
            key, setting = api_key, "the api_key argument"
        elif env.get(ENV_API_KEY):
            key, setting = env[ENV_API_KEY], ENV_API_KEY
        elif env.get(ENV_GOOGLE_API_KEY):
            key, setting = env[ENV_GOOGLE_API_KEY], ENV_GOOGLE_API_KEY
        else:
            key, setting = None, ENV_API_KEY
        url = base_url or env.get(ENV_BASE_URL) or DEFAULT_BASE_URL
        given: dict[str, Any] = {
            "timeout": timeout,
            "connect_timeout": connect_timeout,
            "http": http,
            "affinity_header": affinity_header,
        }
        server = ServerSettings.read(url, SETUP, env, verify=verify, headers=headers, **given)
        version = (api_version or env.get(ENV_API_VERSION) or DEFAULT_API_VERSION).strip("/ ")
        if version not in _VERSIONS:
            raise InvalidRequestError(
                f"The API version {version!r} ({ENV_API_VERSION}) is not one ollm knows; use "
                f"{', '.join(_VERSIONS)} (v1beta has every feature ollm uses)."
            )
        return cls(
            **server.settings(),
            api_key=secret_setting(key, setting),
            api_key_setting=setting,
            api_version=version,
            default_model=model or env.get(ENV_MODEL) or DEFAULT_MODEL,
        )

    def resource(self, model: str) -> str:
        """``models/NAME`` for ``NAME``; ``models/NAME`` and ``tunedModels/NAME`` as they are.

        Nothing else: the name goes into the URL's path with the key beside it, so a
        name that would lead to another resource (``files/abc``, ``cachedContents/c1``,
        ``./.``) is an ``InvalidRequestError``.
        """
        name = model.strip() if isinstance(model, str) else ""
        if not name:
            raise InvalidRequestError(
                f"The request names no model. Name one (ollm chat -m NAME), or set {ENV_MODEL}."
            )
        collection, slash, rest = name.rpartition("/")
        if (slash and collection not in _COLLECTIONS) or not _NAME.fullmatch(rest):
            raise InvalidRequestError(
                f"{model!r} is not a Gemini model name (names are like gemini-2.5-flash, "
                "models/gemini-2.5-flash or tunedModels/NAME). See the names with: "
                "ollm models list -p gemini"
            )
        return name if slash else f"models/{name}"

    def model_path(self, model: str) -> str:
        """``/v1beta/models/NAME``: the model's path under the API's version."""
        return f"/{self.api_version}/{self.resource(model)}"
