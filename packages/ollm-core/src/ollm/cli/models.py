"""``ollm models``: list, show, pull (with a progress bar), rm and ps."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import anyio
import msgspec

from ollm.cli import EXIT_INTERRUPTED, EXIT_OK
from ollm.cli.config import CliConfig, load_registries
from ollm.cli.progress import show_pull
from ollm.cli.terminal import Terminal
from ollm.errors import CapabilityError
from ollm.types.models import ModelInfo, RunningModel
from ollm.types.provider import ModelListing, ModelManagement, RunningModels

__all__ = ["run_models"]

T = TypeVar("T")


def run_models(args: argparse.Namespace, terminal: Terminal) -> int:
    """Run ``ollm models ACTION``; return the exit code."""
    config = CliConfig.from_args(args)
    provider = load_registries().providers.get(config.provider)
    action = args.action
    if action in ("list", "show"):
        if not isinstance(provider, ModelListing):
            raise CapabilityError(
                f"Provider {provider.name!r} cannot list models. "
                "Use one that does, for example: ollm models -p ollama list"
            )
        if action == "list":
            models = _call(config, provider, provider.list_models)
            _print_list(models, terminal, args.json, no_models_hint(provider))
        else:
            model = _call(config, provider, lambda: provider.show_model(args.name))
            _print_show(model, terminal, args.json)
        return EXIT_OK
    if action in ("pull", "rm") and not isinstance(provider, ModelManagement):
        raise CapabilityError(
            f"Provider {provider.name!r} cannot {'download' if action == 'pull' else 'delete'} "
            "models: its server serves the models it was started with. Do it on the server "
            "itself, or use a provider that manages models (ollm models -p ollama ...)."
        )
    if action == "pull":
        assert isinstance(provider, ModelManagement)
        return _pull(provider, args.name, config, terminal)
    if action == "rm":
        assert isinstance(provider, ModelManagement)
        _call(config, provider, lambda: provider.delete_model(args.name))
        if args.json:
            terminal.write(msgspec.json.encode({"deleted": args.name}).decode() + "\n")
        else:
            terminal.write(f"Deleted {args.name}\n")
    elif action == "ps":
        if not isinstance(provider, RunningModels):
            raise CapabilityError(f"Provider {provider.name!r} cannot list running models.")
        running = _call(config, provider, provider.running_models)
        _print_ps(running, terminal, args.json)
    return EXIT_OK


def _call(config: CliConfig, provider: Any, fn: Callable[[], Awaitable[T]]) -> T:
    """Run one provider call on a fresh event loop, then close the provider."""

    async def run() -> T:
        try:
            return await fn()
        finally:
            aclose = getattr(provider, "aclose", None)
            if aclose is not None:
                with anyio.CancelScope(shield=True):
                    await aclose()

    return anyio.run(run, backend=config.backend)


def _pull(provider: ModelManagement, name: str, config: CliConfig, terminal: Terminal) -> int:
    if not show_pull(provider, name, config.backend, terminal):
        terminal.info(f"Pull of {name} stopped; run the same command to resume.", "dim")
        return EXIT_INTERRUPTED
    terminal.info(f"Pulled {name}.", "green")
    return EXIT_OK


def no_models_hint(provider: object) -> str:
    """What to do when ``provider`` has no model yet: its own ``models_hint`` (a GGUF
    folder has no pull), else Ollama's way."""
    hint = getattr(provider, "models_hint", None)
    if isinstance(hint, str) and hint:
        return hint
    return "Get one with: ollm models pull llama3.2"


def _print_list(models: list[ModelInfo], terminal: Terminal, as_json: bool, hint: str) -> None:
    if as_json:
        terminal.write(msgspec.json.encode(models).decode() + "\n")
        return
    if not models:
        terminal.write(f"No models yet. {hint}\n")
        return
    # Columns a provider fills only for some models (a GGUF file's header says them all):
    # shown when one of the listed models has a value.
    extra = [
        (header, cells)
        for header, cells in (
            ("FAMILY", [m.family or "" for m in models]),
            ("PARAMS", [m.parameter_size or "" for m in models]),
            ("QUANT", [m.quantization or "" for m in models]),
            ("CONTEXT", [_context(m) for m in models]),
            ("TEMPLATE", [_template(m) for m in models]),
        )
        if any(cells)
    ]
    rows = [("NAME", "SIZE", "MODIFIED", *(header for header, _ in extra), "CAPABILITIES")]
    for index, model in enumerate(models):
        caps = model.capabilities
        names = []
        if caps is not None:
            names = [k for k in ("tools", "vision", "thinking", "embedding") if getattr(caps, k)]
        rows.append(
            (
                model.name,
                _size(model.size_bytes),
                _ago(model.modified_at),
                *(cells[index] for _, cells in extra),
                ", ".join(names),
            )
        )
    _table(rows, terminal)


def _context(model: ModelInfo) -> str:
    window = model.capabilities.context_window if model.capabilities is not None else None
    return f"{window:,}" if window else ""


def _template(model: ModelInfo) -> str:
    """Whether the model's file carries its chat template (``details["chat_template"]``)."""
    found = model.details.get("chat_template")
    if found is None:
        return ""
    return "yes" if found else "none"


def _print_show(model: ModelInfo, terminal: Terminal, as_json: bool) -> None:
    if as_json:
        terminal.write(msgspec.json.encode(model).decode() + "\n")
        return
    lines = [("name", model.name)]
    for label, value in (
        ("family", model.family),
        ("parameters", model.parameter_size),
        ("quantization", model.quantization),
        ("format", model.format),
        ("size", _size(model.size_bytes) if model.size_bytes else None),
        ("modified", _ago(model.modified_at) if model.modified_at else None),
    ):
        if value:
            lines.append((label, str(value)))
    caps = model.capabilities
    if caps is not None:
        known = [
            k
            for k in ("completion", "tools", "vision", "thinking", "embedding")
            if getattr(caps, k)
        ]
        if known:
            lines.append(("capabilities", ", ".join(known)))
        if caps.context_window:
            lines.append(("context window", f"{caps.context_window:,} tokens"))
    trained = model.details.get("context_length")
    if trained:
        lines.append(("trained context", f"{trained:,} tokens"))
    for key, value in model.parameters.items():
        lines.append((f"param {key}", value))
    width = max(len(label) for label, _ in lines)
    for label, value in lines:
        terminal.write(f"{label:{width}}  {value}\n")


def _print_ps(running: list[RunningModel], terminal: Terminal, as_json: bool) -> None:
    if as_json:
        terminal.write(msgspec.json.encode(running).decode() + "\n")
        return
    if not running:
        terminal.write("No model is loaded.\n")
        return
    rows = [("NAME", "SIZE", "IN VRAM", "CONTEXT", "UNTIL")]
    for model in running:
        rows.append(
            (
                model.name,
                _size(model.size_bytes),
                _size(model.vram_bytes),
                f"{model.context_window:,}" if model.context_window else "",
                _until(model.expires_at),
            )
        )
    _table(rows, terminal)


def _until(expires_at: datetime | None) -> str:
    """When a loaded model is unloaded: a time today, a date later, "forever" (keep_alive -1)."""
    if expires_at is None:
        return ""
    now = datetime.now(UTC)
    if expires_at.year >= 2200 or (expires_at - now).days > 365 * 50:
        return "forever"
    local = expires_at.astimezone()
    if local.date() == now.astimezone().date():
        return local.strftime("%H:%M:%S")
    return local.strftime("%Y-%m-%d %H:%M")


def _table(rows: Sequence[tuple[str, ...]], terminal: Terminal) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for index, row in enumerate(rows):
        line = "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip()
        terminal.write((terminal.style(line, "bold", stream="out") if index == 0 else line) + "\n")


def _size(size: int | None) -> str:
    if not size:
        return ""
    value = float(size)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit in ("B", "KB") else f"{value:.1f} {unit}"
        value /= 1000
    return ""  # pragma: no cover


def _ago(when: datetime | None) -> str:
    if when is None:
        return ""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    seconds = (datetime.now(UTC) - when).total_seconds()
    for limit, size, unit in ((120, 1, "seconds"), (7200, 60, "minutes"), (172800, 3600, "hours")):
        if seconds < limit:
            return f"{max(0, int(seconds // size))} {unit} ago"
    return f"{int(seconds // 86400)} days ago"
