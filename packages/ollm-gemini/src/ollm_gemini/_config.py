"""Where the Gemini API is and how to reach it: arguments, then the environment, then defaults.

The key goes in the ``x-goog-api-key`` header, never in the URL: URLs end up in logs,
proxies' included.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from ollm.errors import InvalidRequestError
from ollm_http import check_base_url, is_loopback, seconds_setting

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
# What a model name must not hold: it goes into the URL's path.
_UNSAFE = re.compile(r"[^A-Za-z0-9._\-/]")


@dataclass(frozen=True)
class GeminiConfig:
    """The settings of the Gemini provider, resolved.

    ``api_key_setting`` names where the key came from (or should), for messages.
    """

    base_url: str = DEFAULT_BASE_URL
    api_key: str | None = None
    api_key_setting: str = ENV_API_KEY
    api_version: str = DEFAULT_API_VERSION
    default_model: str | None = DEFAULT_MODEL
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    http: Literal["builtin", "httpx"] = "builtin"
    verify: bool | str = True

    @property
    def loopback(self) -> bool:
        """Whether the API is on this machine (a test server, a local gateway)."""
        return is_loopback(self.base_url)

    @property
    def where(self) -> str:
        """How messages name the setting of the address."""
        return f"{ENV_BASE_URL} (or base_url=...)"

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
        environ: Mapping[str, str] | None = None,
    ) -> GeminiConfig:
        """Each setting from its argument, else its variable, else the default.

        The key is ``api_key``, else ``GEMINI_API_KEY``, else ``GOOGLE_API_KEY`` (the
        names Google's own SDKs read).
        """
        env = os.environ if environ is None else environ
        if api_key is not None:
            key, setting = api_key, "api_key=..."
        elif env.get(ENV_API_KEY):
            key, setting = env[ENV_API_KEY], ENV_API_KEY
        elif env.get(ENV_GOOGLE_API_KEY):
            key, setting = env[ENV_GOOGLE_API_KEY], ENV_GOOGLE_API_KEY
        else:
            key, setting = None, ENV_API_KEY
        url = check_base_url(
            base_url or env.get(ENV_BASE_URL) or DEFAULT_BASE_URL, ENV_BASE_URL, DEFAULT_BASE_URL
        )
        version = (api_version or env.get(ENV_API_VERSION) or DEFAULT_API_VERSION).strip("/ ")
        if version not in _VERSIONS:
            raise InvalidRequestError(
                f"{ENV_API_VERSION} (or api_version=...) is {version!r}; use one of "
                f"{', '.join(_VERSIONS)} (v1beta has every feature ollm uses)."
            )
        stack = http or env.get(ENV_HTTP) or "builtin"
        if stack not in ("builtin", "httpx"):
            raise InvalidRequestError(
                f"{ENV_HTTP} (or http=...) is {stack!r}; use 'builtin' or 'httpx'."
            )
        return cls(
            base_url=url,
            api_key=key.strip() or None if key is not None else None,
            api_key_setting=setting,
            api_version=version,
            default_model=model or env.get(ENV_MODEL) or DEFAULT_MODEL,
            headers=dict(headers or {}),
            timeout=seconds_setting(timeout, env.get(ENV_TIMEOUT), ENV_TIMEOUT, DEFAULT_TIMEOUT),
            connect_timeout=seconds_setting(
                connect_timeout,
                env.get(ENV_CONNECT_TIMEOUT),
                ENV_CONNECT_TIMEOUT,
                DEFAULT_CONNECT_TIMEOUT,
            ),
            http=stack,  # type: ignore[arg-type]
            verify=True if verify is None else verify,
        )

    def resource(self, model: str) -> str:
        """``models/NAME`` for ``NAME``; ``models/NAME`` and ``tunedModels/NAME`` as they are."""
        name = model.strip().strip("/") if isinstance(model, str) else ""
        if not name:
            raise InvalidRequestError(
                "The request names no model. Pass model=... (ollm chat -m NAME), or set "
                f"{ENV_MODEL}."
            )
        if _UNSAFE.search(name) or ".." in name or name.count("/") > 1:
            raise InvalidRequestError(
                f"{model!r} is not a Gemini model name (names are like gemini-2.5-flash). "
                "See the names with: ollm models list -p gemini"
            )
        return name if "/" in name else f"models/{name}"

    def model_path(self, model: str) -> str:
        """``/v1beta/models/NAME``: the model's path under the API's version."""
        return f"/{self.api_version}/{self.resource(model)}"
