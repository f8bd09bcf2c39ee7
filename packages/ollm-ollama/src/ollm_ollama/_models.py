"""Model management on an Ollama server: list, show, pull, delete, copy, running models.

Each function takes the provider (an ``ollm_http.HTTPProvider``) and raises a typed
``OllmError`` when the server says no. Replies become ollm's ``ModelInfo``, ``RunningModel`` and
``PullProgress``; Ollama's quirks stay here (``parameters`` as one string of lines, the
trained context length under ``<arch>.context_length``, empty 200 bodies, pull errors
on a 200 stream).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections.abc import AsyncGenerator
from datetime import datetime
from typing import Any

import msgspec

from ollm.errors import (
    InvalidRequestError,
    ModelNotFoundError,
    OllmError,
    ProviderError,
    StreamInterruptedError,
)
from ollm.kit import excerpt
from ollm.types import ModelInfo, PullProgress, RunningModel
from ollm_http import HTTPProvider, RetryPolicy, Timeouts
from ollm_ollama._convert import capabilities_from, parse_parameters
from ollm_ollama._errors import PROVIDER, describe_error_value
from ollm_ollama._wire import (
    ModelDetails,
    PsResponse,
    PullLine,
    RunningEntry,
    ShowResponse,
    TagModel,
    TagsResponse,
    VersionResponse,
    decoder,
)

__all__ = [
    "canonical_name",
    "check_name",
    "copy_model",
    "delete_model",
    "fetch_show",
    "list_models",
    "model_info_from_show",
    "model_stop",
    "modelfile_num_ctx",
    "running_models",
    "server_version",
    "stream_pull",
    "trained_context_length",
]

log = logging.getLogger(__name__)


class _ModelRequest(msgspec.Struct, omit_defaults=True):
    model: str
    stream: bool | None = None


class _CopyRequest(msgspec.Struct):
    source: str
    destination: str


_LIBRARY_PREFIX = "registry.ollama.ai/library/"


def canonical_name(name: str) -> str:
    """``llama3.2`` -> ``llama3.2:latest``, for comparing names the server normalizes."""
    name = name.strip().lower()
    if name.startswith(_LIBRARY_PREFIX):
        name = name[len(_LIBRARY_PREFIX) :]
    if ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    return name


def check_name(name: object, what: str = "model") -> str:
    """``name`` if it is a usable model name; ``InvalidRequestError`` otherwise."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidRequestError(
            f"Give the {what} name as text, for example 'llama3.2' (got {name!r})."
        )
    return name.strip()


# -- reading -----------------------------------------------------------------------------


async def list_models(http: HTTPProvider) -> list[ModelInfo]:
    """``GET /api/tags``: the models on the server."""
    tags: TagsResponse = await http.call("GET", "/api/tags", TagsResponse)
    return [_model_info_from_tag(entry) for entry in tags.models or ()]


def _model_info_from_tag(entry: TagModel) -> ModelInfo:
    details = entry.details or ModelDetails()
    extra = _details(details)
    if entry.model and entry.model != entry.name:
        extra["model"] = entry.model
    if entry.remote_model:
        extra["remote_model"] = entry.remote_model
    if entry.remote_host:
        extra["remote_host"] = entry.remote_host
    return ModelInfo(
        name=entry.name or entry.model or "",
        size_bytes=entry.size,
        modified_at=_time(entry.modified_at),
        digest=entry.digest,
        family=details.family or None,
        parameter_size=details.parameter_size or None,
        quantization=details.quantization_level or None,
        format=details.format or None,
        # capabilities in list entries exist only since v0.30: absent means unknown.
        capabilities=(
            capabilities_from(entry.capabilities) if entry.capabilities is not None else None
        ),
        details=extra,
    )


def _details(details: ModelDetails) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if details.families:
        extra["families"] = list(details.families)
    if details.parent_model:
        extra["parent_model"] = details.parent_model
    if details.context_length:
        extra["context_length"] = details.context_length
    if details.embedding_length:
        extra["embedding_length"] = details.embedding_length
    return extra


def _time(value: datetime | None) -> datetime | None:
    # Go's zero time ("0001-01-01T00:00:00Z") means "unknown".
    if value is None or value.year <= 1:
        return None
    return value


async def fetch_show(
    http: HTTPProvider,
    name: str,
    *,
    timeouts: Timeouts | None = None,
    retry: RetryPolicy | None = None,
) -> ShowResponse:
    """``POST /api/show`` (raises ``ModelNotFoundError`` for a model the server lacks)."""
    show: ShowResponse = await http.call(
        "POST",
        "/api/show",
        ShowResponse,
        json=_ModelRequest(model=name),
        model=name,
        timeouts=timeouts,
        retry=retry,
    )
    return show


def trained_context_length(show: ShowResponse) -> int | None:
    """The model's trained maximum context: ``model_info["<arch>.context_length"]``."""
    info = show.model_info or {}
    arch = info.get("general.architecture")
    value = info.get(f"{arch}.context_length") if isinstance(arch, str) else None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def modelfile_num_ctx(show: ShowResponse) -> int | None:
    """A ``num_ctx`` set in the model's Modelfile, if any."""
    for key, value in parse_parameters(show.parameters):
        if key == "num_ctx":
            try:
                number = int(float(value))
            except ValueError:
                return None
            return number if number > 0 else None
    return None


def model_stop(show: ShowResponse) -> list[str]:
    """The model's own stop strings (a request's ``stop`` replaces them on Ollama)."""
    return [value for key, value in parse_parameters(show.parameters) if key == "stop"]


def model_info_from_show(name: str, show: ShowResponse) -> ModelInfo:
    """``/api/show`` as a ``ModelInfo``; the trained context is ``details["context_length"]``."""
    details = show.details or ModelDetails()
    grouped: dict[str, list[str]] = {}
    for key, value in parse_parameters(show.parameters):
        grouped.setdefault(key, []).append(value)
    parameters = {
        key: values[0] if len(values) == 1 and key != "stop" else json.dumps(values)
        for key, values in grouped.items()
    }
    extra = _details(details)
    info = show.model_info or {}
    trained = trained_context_length(show)
    if trained is not None:
        extra["context_length"] = trained
    arch = info.get("general.architecture")
    if isinstance(arch, str):
        extra["architecture"] = arch
        embedding = info.get(f"{arch}.embedding_length")
        if isinstance(embedding, int):
            extra["embedding_length"] = embedding
    count = info.get("general.parameter_count")
    if isinstance(count, int):
        extra["parameter_count"] = count
    if show.capabilities is not None:
        extra["capabilities"] = list(show.capabilities)
    if "stop" in grouped:
        extra["stop"] = grouped["stop"]
    for key in ("template", "system", "remote_model", "remote_host"):
        value = getattr(show, key)
        if value:
            extra[key] = value
    return ModelInfo(
        name=name,
        modified_at=_time(show.modified_at),
        family=details.family or None,
        parameter_size=details.parameter_size or None,
        quantization=details.quantization_level or None,
        format=details.format or None,
        capabilities=capabilities_from(show.capabilities, modelfile_num_ctx(show)),
        parameters=parameters,
        details=extra,
    )


async def running_models(
    http: HTTPProvider, *, timeouts: Timeouts | None = None, retry: RetryPolicy | None = None
) -> list[RunningModel]:
    """``GET /api/ps``: the models loaded now, latest to expire first."""
    ps: PsResponse = await http.call("GET", "/api/ps", PsResponse, timeouts=timeouts, retry=retry)
    return [_running(entry) for entry in ps.models or ()]


def _running(entry: RunningEntry) -> RunningModel:
    return RunningModel(
        name=entry.name or entry.model or "",
        size_bytes=entry.size,
        vram_bytes=entry.size_vram,
        expires_at=_time(entry.expires_at),
        context_window=entry.context_length or None,
    )


async def server_version(
    http: HTTPProvider, *, timeouts: Timeouts | None = None, retry: RetryPolicy | None = None
) -> str:
    """``GET /api/version``."""
    answer: VersionResponse = await http.call(
        "GET", "/api/version", VersionResponse, timeouts=timeouts, retry=retry
    )
    return answer.version or ""


# -- changing ----------------------------------------------------------------------------


async def delete_model(http: HTTPProvider, name: str) -> None:
    """``DELETE /api/delete`` (200 with an empty body; 404 for a missing model)."""
    await http.call("DELETE", "/api/delete", None, json=_ModelRequest(model=name), model=name)


async def copy_model(http: HTTPProvider, source: str, destination: str) -> None:
    """``POST /api/copy`` (200 with an empty body; 404 for a missing source)."""
    await http.call(
        "POST",
        "/api/copy",
        None,
        json=_CopyRequest(source=source, destination=destination),
        model=source,
    )


# Verifying the digest of a large download sends nothing for minutes: no read timeout.
_PULL_READ = math.inf


async def stream_pull(
    http: HTTPProvider, name: str, timeouts: Timeouts
) -> AsyncGenerator[PullProgress, None]:
    """``POST /api/pull``, each progress line as it arrives; raises if the pull fails."""
    stream = http.stream("ndjson", model=name)
    decode = decoder(PullLine).decode
    succeeded = False
    try:
        await stream.open(
            "POST",
            "/api/pull",
            json=_ModelRequest(model=name, stream=True),
            timeouts=dataclasses.replace(timeouts, read=_PULL_READ),
        )
        reads, frames = stream.reads, stream.frames
        while True:
            try:
                data = await reads()
            except OllmError:
                raise
            except Exception as exc:
                raise stream.error(exc) from None
            for line in frames(data):
                if not line or line.isspace():
                    continue
                try:
                    step: PullLine = decode(line)
                except msgspec.DecodeError as exc:
                    # A progress line only reports; stopping here would cancel the
                    # download on the server. Say so, and keep pulling: the end of the
                    # stream ("success" or an error) is what decides.
                    log.warning(
                        "skipped a pull progress line from %s that is not in Ollama's "
                        "format (%s): %s",
                        http.url,
                        exc,
                        excerpt(line),
                    )
                    continue
                if step.error is not None:
                    raise _pull_error(http, name, describe_error_value(step.error) or "")
                status = step.status or ""
                if status == "success":
                    succeeded = True
                yield PullProgress(
                    status=status,
                    digest=step.digest or None,
                    total=step.total,
                    completed=step.completed,
                )
            if data is None:
                break
    finally:
        await stream.aclose()
    if not succeeded:
        raise StreamInterruptedError(
            f"Pulling {name!r} from Ollama at {http.url} stopped before it finished. Run the "
            f"pull again (ollm models pull {name}): it resumes where it stopped.",
            provider=PROVIDER,
            model=name,
        )


def _pull_error(http: HTTPProvider, name: str, text: str) -> Exception:
    lowered = text.lower()
    if "file does not exist" in lowered or "not found" in lowered:
        return ModelNotFoundError(
            f"Model {name!r} was not found in the registry: Ollama said {text!r}. Check the "
            "name at https://ollama.com/library (for example llama3.2 or qwen3:8b).",
            provider=PROVIDER,
            model=name,
        )
    return ProviderError(
        f"Pulling {name!r} failed: Ollama at {http.url} said {text!r}. Check the server's "
        "network connection and disk space, then run the pull again.",
        provider=PROVIDER,
        model=name,
    )
