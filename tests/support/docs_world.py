"""The world the documentation's code blocks run in (tests/docs/): fake servers, a folder per
document.

Every server a document talks to is a fake of ollm-testutils on 127.0.0.1: Ollama
(``OLLAMA_HOST``), OpenAI-compatible (``OPENAI_BASE_URL``, and the addresses the
documents give for vLLM, SGLang, LM Studio and a LiteLLM proxy), Gemini
(``OLLM_GEMINI_BASE_URL``, key ``test-key``), Anthropic's Messages API
(``ANTHROPIC_BASE_URL``, key ``test-key``); the models the documents name exist there.
``uvx mcp-server-git`` starts a stand-in MCP server (mcp_git.py). Each document gets a
folder of its own (its working directory and ``HOME``, its conversation log, the modules
its path-comment blocks define, its ollm-openai profiles, a ``servers.json`` and a
``notes.txt``), shared by its blocks.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from cli_helpers import fork_server_on, start_fork_server

from ollm_testutils import (
    FakeAnthropicServer,
    FakeGeminiServer,
    FakeOllamaServer,
    FakeOpenAIServer,
)

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "tests" / "docs"


def _load_codeblocks() -> None:
    """docs/codeblocks.py, importable as ``codeblocks``."""
    if "codeblocks" in sys.modules:
        return
    spec = importlib.util.spec_from_file_location("codeblocks", ROOT / "docs" / "codeblocks.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["codeblocks"] = module
    spec.loader.exec_module(module)


_load_codeblocks()
import codeblocks  # noqa: E402

# Addresses the documents give for servers of the reader's own: the fake OpenAI-compatible
# server answers in their place.
OPENAI_ADDRESSES = (
    "http://127.0.0.1:8000/v1",  # vLLM's default
    "http://gpu-box:8000/v1",
    "http://gpu-box:30000/v1",  # SGLang
    "http://proxy:4000/v1",  # a LiteLLM proxy
    "http://127.0.0.1:1234/v1",  # LM Studio
    "http://router:8001/v1",  # vLLM production-stack's router
    "http://gateway:30000/v1",  # SGLang's gateway
)
# The Ollama hosts the documents put in a pool: the fake Ollama server answers for each.
OLLAMA_ADDRESSES = ("http://gpu-a:11434", "http://gpu-b:11434")
# The variables that point at servers and hold their keys: the world sets them, and a
# document's `export` of one (`export GEMINI_API_KEY=...`) leaves them alone.
SERVER_VARIABLES = frozenset(
    (
        "OLLAMA_HOST",
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "OLLM_GEMINI_BASE_URL",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_API_KEY",
    )
)
SERVERS_JSON = '{"mcpServers": {"git": {"command": "uvx", "args": ["mcp-server-git"]}}}\n'
UVX = f"""#!{sys.executable}
import runpy, sys
if sys.argv[1:2] != ["mcp-server-git"]:
    sys.exit("uvx: the docs' tests have only mcp-server-git")
runpy.run_path({str(HERE / "mcp_git.py")!r}, run_name="__main__")
"""


@dataclass(frozen=True)
class Servers:
    """The fake servers every document talks to."""

    ollama: FakeOllamaServer
    openai: FakeOpenAIServer
    gemini: FakeGeminiServer
    anthropic: FakeAnthropicServer

    @property
    def replacements(self) -> dict[str, str]:
        """What the documents' addresses become in the code that runs."""
        return {
            **dict.fromkeys(OPENAI_ADDRESSES, self.openai.base_url),
            **dict.fromkeys(OLLAMA_ADDRESSES, self.ollama.url),
        }


@dataclass(frozen=True)
class Sandbox:
    """One document's folder, and the environment its blocks run in."""

    root: Path
    env: dict[str, str]
    servers: Servers


def environment(root: Path, servers: Servers) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("OLLM_", "OLLAMA_", "OPENAI_", "GEMINI_", "GOOGLE_", "ANTHROPIC_"))
    }
    env.update(
        {
            "NO_COLOR": "1",
            "PYTHONUNBUFFERED": "1",
            "HOME": str(root / "home"),
            "XDG_CONFIG_HOME": str(root / "home" / ".config"),
            "PATH": os.pathsep.join([*_bin_folders(root), os.environ.get("PATH", "")]),
            "PYTHONPATH": str(root / "src"),
            "OLLM_LOGS_PATH": str(root / "logs.db"),
            "OLLM_OPENAI_PROFILES": str(root / "openai.toml"),
            "OLLM_POOLS": str(root / "pools.toml"),
            "OLLAMA_HOST": servers.ollama.host,
            "OPENAI_BASE_URL": servers.openai.base_url,
            "OPENAI_API_KEY": "sk-test",
            "LITELLM_MASTER_KEY": "sk-test",
            "OLLM_GEMINI_BASE_URL": servers.gemini.url,
            "GEMINI_API_KEY": "test-key",
            "ANTHROPIC_BASE_URL": servers.anthropic.url,
            "ANTHROPIC_API_KEY": "test-key",
            "OLLM_ANTHROPIC_PROFILES": str(root / "anthropic.toml"),
        }
    )
    return env


def _bin_folders(root: Path) -> list[str]:
    """The document's commands (uvx), then ``ollm``: the fork server's client when it is
    on (cli_helpers.py; its folder holds nothing else a shell would run), then the venv's."""
    client = [str(Path(start_fork_server()).parent)] if fork_server_on() else []
    return [str(root / "bin"), *client, str(Path(sys.executable).parent)]


def prepare(root: Path, document: Path, servers: Servers) -> None:
    for folder in ("home", "bin", "src", "blocks"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    uvx = root / "bin" / "uvx"
    uvx.write_text(UVX, encoding="utf-8")
    uvx.chmod(0o755)
    (root / "servers.json").write_text(SERVERS_JSON, encoding="utf-8")
    (root / "notes.txt").write_text("Met Ana on Monday; the launch moves to May.\n")
    profiles = []
    pools = []
    for block in codeblocks.parse(document):
        if block.module_path:
            module = root / "src" / block.module_path
            module.parent.mkdir(parents=True, exist_ok=True)
            module.write_text(codeblocks.source([block], servers.replacements))
        elif block.language == "toml" and "ollm-anthropic" in block.where:
            (root / "anthropic.toml").write_text(
                codeblocks.source([block], servers.replacements), encoding="utf-8"
            )
        elif block.language == "toml" and codeblocks.profiles(block.text):
            profiles.append(codeblocks.source([block], servers.replacements))
        elif block.language == "toml" and codeblocks.pools(block.text):
            pools.append(codeblocks.source([block], servers.replacements))
    (root / "openai.toml").write_text("\n".join(profiles), encoding="utf-8")
    (root / "pools.toml").write_text("\n".join(pools), encoding="utf-8")
