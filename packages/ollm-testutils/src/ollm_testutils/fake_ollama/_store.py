"""The fake server's models: which exist, which are local, which are loaded and until when."""

from __future__ import annotations

import dataclasses
import threading
from datetime import UTC, datetime, timedelta

from ollm_testutils.fake_ollama._script import OllamaModel
from ollm_testutils.fake_ollama._wire import normalized_name

__all__ = ["DEFAULT_CONTEXT", "ModelStore", "expiry"]

DEFAULT_CONTEXT = 4096
_FOREVER = datetime(2318, 1, 1, tzinfo=UTC)


def expiry(keep_alive: float | None) -> datetime:
    """When a model loaded with ``keep_alive`` seconds unloads (default five minutes)."""
    seconds = 300.0 if keep_alive is None else keep_alive
    if seconds < 0:
        return _FOREVER
    return datetime.now(UTC) + timedelta(seconds=seconds)


def _key(name: str) -> str:
    return normalized_name(name).lower()


class ModelStore:
    """Models by name (``llama3.2`` is ``llama3.2:latest``), safe to use from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._models: dict[str, OllamaModel] = {}
        self._loaded: dict[str, tuple[datetime, int]] = {}

    def add(self, model: OllamaModel) -> OllamaModel:
        """Add or replace ``model`` (its name is normalized)."""
        model.name = normalized_name(model.name)
        if model.modified_at is None:
            model.modified_at = datetime.now(UTC)
        with self._lock:
            self._models[model.name.lower()] = model
        return model

    def all(self) -> list[OllamaModel]:
        """Every model, local or only pullable."""
        with self._lock:
            return list(self._models.values())

    def find(self, name: str, *, local_only: bool = True) -> OllamaModel | None:
        """The model called ``name``, or ``None``."""
        with self._lock:
            model = self._models.get(_key(name))
        if model is None or (local_only and not model.local):
            return None
        return model

    def local(self) -> list[OllamaModel]:
        """The local models, most recently modified first (as ``/api/tags`` lists them)."""
        models = [model for model in self.all() if model.local]
        return sorted(models, key=lambda m: m.modified_at or datetime.min, reverse=True)

    def remove(self, name: str) -> bool:
        """Delete a local model; False if there is none by that name.

        A model the registry has stays pullable, as after ``ollama rm``.
        """
        key = _key(name)
        with self._lock:
            model = self._models.get(key)
            if model is None or not model.local:
                return False
            if model.pullable:
                model.local = False
            else:
                del self._models[key]
            self._loaded.pop(key, None)
        return True

    def copy(self, source: str, destination: str) -> bool:
        """Copy a local model under a new name; False if the source is missing."""
        model = self.find(source)
        if model is None:
            return False
        copy = dataclasses.replace(
            model,
            name=destination,
            modified_at=datetime.now(UTC),
            parameters=dict(model.parameters),
            pullable=False,
        )
        self.add(copy)
        return True

    def make_local(self, model: OllamaModel) -> None:
        """The model was pulled."""
        model.local = True
        model.modified_at = datetime.now(UTC)

    def load(self, model: OllamaModel, keep_alive: float | None, num_ctx: object) -> None:
        """The model is in memory until ``keep_alive`` runs out, with that context."""
        context = num_ctx if isinstance(num_ctx, int) and not isinstance(num_ctx, bool) else None
        key = model.name.lower()
        with self._lock:
            if context is None:
                context = self._loaded[key][1] if key in self._loaded else DEFAULT_CONTEXT
            self._loaded[key] = (expiry(keep_alive), context)

    def context(self, model: OllamaModel) -> int:
        """The window ``model`` is loaded with (the default when it is not loaded)."""
        with self._lock:
            loaded = self._loaded.get(model.name.lower())
        return loaded[1] if loaded is not None else DEFAULT_CONTEXT

    def unload(self, model: OllamaModel) -> None:
        """The model left memory."""
        with self._lock:
            self._loaded.pop(model.name.lower(), None)

    def unload_all(self) -> None:
        """Nothing is in memory."""
        with self._lock:
            self._loaded.clear()

    def running(self) -> list[tuple[OllamaModel, datetime, int]]:
        """Loaded models, when they expire and their context length, latest expiry first."""
        now = datetime.now(UTC)
        running = []
        with self._lock:
            for key, (expires, context) in self._loaded.items():
                model = self._models.get(key)
                if model is not None and expires > now:
                    running.append((model, expires, context))
        return sorted(running, key=lambda item: item[1], reverse=True)
