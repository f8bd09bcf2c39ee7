"""Named pools in ``pools.toml`` (``$OLLM_POOLS``), built through the provider registry:
``-p pool:home``; what is wrong with the file said in words; and with no pool
configured, ollm starts and chats as it did."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import OLLM, ollm_env
from pool_helpers import MODEL, chat, chats, load, text_of, unload

import ollm
import ollm_ollama.plugin
import ollm_openai.plugin
import ollm_pool.plugin
from ollm_http import NO_RETRY
from ollm_pool import Member, PoolProvider, load_pools, pools_path
from ollm_testutils import FakeOllamaServer, FakeOpenAIServer, OllamaReply

pytestmark = pytest.mark.anyio


@pytest.fixture
def pools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "pools.toml"
    monkeypatch.setenv("OLLM_POOLS", str(path))
    return path


def registries() -> ollm.Registries:
    plugins = [ollm_ollama.plugin, ollm_openai.plugin, ollm_pool.plugin]
    return ollm.discover(plugins=plugins, entry_points=[])


async def test_a_named_pool_is_built_from_the_file_through_the_registry(pools: Path) -> None:
    with FakeOllamaServer() as a, FakeOllamaServer() as b, FakeOpenAIServer(models=[MODEL]) as c:
        load(b)
        pools.write_text(
            textwrap.dedent(
                f"""
                [home]
                model = "{MODEL}"
                attempts = 2

                [[home.members]]
                provider = "ollama"
                host = "{a.url}"
                name = "gpu-a"

                [[home.members]]
                provider = "ollama"
                host = "{b.url}"
                parallel = 2
                timeout = 42

                [[home.members]]
                provider = "openai"
                base_url = "{c.base_url}"
                context_window = 8192
                """
            )
        )
        found = registries()
        pool = found.providers.get("pool:home")
        assert isinstance(pool, PoolProvider)
        assert (pool.name, pool.default_model, pool.attempts) == ("pool:home", MODEL, 2)
        first, second, third = pool.members
        assert first.name == "gpu-a"
        assert second == Member(second.provider, parallel=2)
        assert third.context_window == 8192
        assert [getattr(m.provider, "retry", None) for m in pool.members] == [NO_RETRY] * 3
        assert second.provider.http.config.timeouts.read == 42  # type: ignore[attr-defined]
        async with ollm.ChatClient(found, provider="pool:home") as client:
            assert text_of(await chat(client))
        # Where the model is loaded: B (C, a vLLM server, keeps its model loaded too).
        assert (chats(a), chats(b) - 1 + chats(c)) == (0, 1)


async def test_pool_alone_names_the_only_pool(pools: Path) -> None:
    with FakeOllamaServer() as a:
        pools.write_text(f'[solo]\nmembers = [{{provider = "ollama", host = "{a.url}"}}]\n')
        pool = registries().providers.get("pool")
        assert isinstance(pool, PoolProvider)
        assert pool.name == "pool:solo"


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


@pytest.mark.parametrize(
    ("text", "provider", "code", "words"),
    [
        (
            None,
            "pool:home",
            "PROVIDER_NOT_FOUND",
            "There is no pool 'home': {path} does not exist. Describe it there as [home]",
        ),
        ("", "pool:home", "PROVIDER_NOT_FOUND", "There is no pool 'home': {path} has none."),
        (None, "pool", "PROVIDER_NOT_FOUND", "No pool is configured: {path} does not exist."),
        ("# none yet\n", "pool", "PROVIDER_NOT_FOUND", "No pool is configured: {path} has none."),
        ("[lab]\nmembers = []\n", "pool:home", "PROVIDER_NOT_FOUND", "Known pools: lab."),
        ("[a]\n[b]\n", "pool", "PROVIDER_NOT_FOUND", "{path} has several pools: name one"),
        ("[home]\n", "pool:home", "INVALID_REQUEST", "The pool 'home' in {path} has no members."),
        (
            "[home]\nmembers = [{host = 'x'}]\n",
            "pool:home",
            "INVALID_REQUEST",
            "Member 1 of the pool 'home' in {path} names no provider.",
        ),
        (
            "[home]\nmembers = [{provider = 'ollama', hots = 'x'}]\n",
            "pool:home",
            "INVALID_REQUEST",
            "Member 1 of the pool 'home' in {path}: The ollama provider has no setting 'hots'.",
        ),
        (
            "[home]\nmembers = [{provider = 'nothing'}]\n",
            "pool:home",
            "PROVIDER_NOT_FOUND",
            "Member 1 of the pool 'home' in {path}: Provider 'nothing' is not installed.",
        ),
        (
            "[home]\nmembers = [{provider = 'pool:home'}]\n",
            "pool:home",
            "INVALID_REQUEST",
            "Member 1 of the pool 'home' in {path} is a pool; a pool's members are servers.",
        ),
        (
            "[home]\nmembers = [{provider = 'ollama', parallel = 0}]\n",
            "pool:home",
            "INVALID_REQUEST",
            "The pool 'home' in {path} is not valid: parallel must be at least 1.",
        ),
        (
            "[home]\nattempts = 'many'\n",
            "pool:home",
            "INVALID_REQUEST",
            "The pool 'home' in {path} is not valid: Expected `int`, got `str` - at `$.attempts`.",
        ),
        ("[home\n", "pool:home", "INVALID_REQUEST", "The pools file {path} is not valid TOML"),
        ("home = 1\n", "pool:home", "INVALID_REQUEST", "In the pools file {path}, 'home' is not"),
    ],
)
def test_what_is_wrong_with_the_pools_file_is_said_in_words(
    pools: Path, text: str | None, provider: str, code: str, words: str
) -> None:
    if text is not None:
        pools.write_text(text)
    with pytest.raises(ollm.OllmError) as caught:
        registries().providers.get(provider)
    assert caught.value.code == code
    assert words.format(path=pools) in caught.value.message


def test_the_pools_file_is_where_the_variable_says_else_in_the_config_folder(
    tmp_path: Path,
) -> None:
    assert (
        pools_path({"OLLM_POOLS": "~/p.toml", "HOME": str(tmp_path)})
        == Path("~/p.toml").expanduser()
    )
    found = pools_path({"XDG_CONFIG_HOME": str(tmp_path)})
    assert found == tmp_path / "ollm" / "pools.toml"
    assert load_pools({"OLLM_POOLS": str(tmp_path / "none.toml")}) == {}


# -- no pool configured: nothing changes ---------------------------------------------------


def test_without_a_pool_discovery_reads_no_file_and_imports_nothing_heavy(tmp_path: Path) -> None:
    broken = tmp_path / "pools.toml"
    broken.write_text("[this is not toml\n")
    code = textwrap.dedent(
        """
        import json, sys
        import ollm
        registries = ollm.discover()
        loaded = sorted(m for m in sys.modules if m.startswith("ollm_pool"))
        print(json.dumps([registries.providers.default_name, "pool" in registries.providers,
                          loaded, "httpx" in sys.modules]))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=ollm_env(OLLM_POOLS=str(broken)),
        check=True,
    )
    assert json.loads(done.stdout) == [
        "ollama",
        True,
        ["ollm_pool", "ollm_pool._version", "ollm_pool.plugin"],
        False,
    ]


def test_ollm_plugins_lists_the_pool_provider_whatever_the_pools_file_says(
    tmp_path: Path,
) -> None:
    broken = tmp_path / "pools.toml"
    broken.write_text("[this is not toml\n")
    done = subprocess.run(
        [OLLM, "plugins", "--json"],
        capture_output=True,
        text=True,
        env=ollm_env(OLLM_POOLS=str(broken)),
        check=True,
    )
    (pool,) = [p for p in json.loads(done.stdout) if p["name"] == "pool"]
    assert (pool["status"], pool["distribution"], pool["contributes"]) == (
        "loaded",
        "ollm-pool",
        {"providers": ["pool"]},
    )


def test_without_a_pool_ollm_chat_answers_as_before(tmp_path: Path) -> None:
    broken = tmp_path / "pools.toml"
    broken.write_text("[this is not toml\n")
    with FakeOllamaServer() as server:
        server.script(OllamaReply(["Hi", " there."]), OllamaReply(["Hi", " there."]))
        outputs = []
        for extra in ({}, {"OLLM_POOLS": str(broken)}):
            env = ollm_env(OLLAMA_HOST=server.host, OLLM_LOGS="off", **extra)
            done = subprocess.run(
                [OLLM, "chat", "-m", MODEL, "hello"], capture_output=True, text=True, env=env
            )
            outputs.append((done.returncode, done.stdout, done.stderr))
            unload(server)  # each run loads the model, and says so
    assert outputs[0] == outputs[1]
    assert outputs[0][:2] == (0, "Hi there.\n")


def test_ollm_chat_with_a_pool_answers_from_the_member_with_the_model_loaded(
    tmp_path: Path,
) -> None:
    with FakeOllamaServer() as a, FakeOllamaServer() as b:
        load(b)
        pools = write(
            tmp_path / "pools.toml",
            f"""
            [home]
            model = "{MODEL}"
            members = [
                {{provider = "ollama", host = "{a.url}", name = "A"}},
                {{provider = "ollama", host = "{b.url}", name = "B"}},
            ]
            """,
        )
        env: dict[str, Any] = ollm_env(OLLM_POOLS=str(pools), OLLM_LOGS="off")
        done = subprocess.run(
            [OLLM, "chat", "-p", "pool:home", "hello"], capture_output=True, text=True, env=env
        )
        assert (chats(a), chats(b)) == (0, 1 + 1)
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        "Hello! How can I help you today?\n",
        "",
    )


def test_a_reply_that_broke_off_is_printed_once(tmp_path: Path) -> None:
    with FakeOllamaServer() as a, FakeOllamaServer() as b:
        load(b)
        b.script(OllamaReply.disconnect(["one ", "two ", "three"]))
        pools = write(
            tmp_path / "pools.toml",
            f"""
            [home]
            members = [
                {{provider = "ollama", host = "{a.url}", name = "A"}},
                {{provider = "ollama", host = "{b.url}", name = "B"}},
            ]
            """,
        )
        env: dict[str, Any] = ollm_env(OLLM_POOLS=str(pools), OLLM_LOGS="off")
        done = subprocess.run(
            [OLLM, "chat", "-p", "pool:home", "-m", MODEL, "hello"],
            capture_output=True,
            text=True,
            env=env,
        )
        assert chats(a) == 0
    assert done.returncode != 0
    assert done.stdout.count("one two three") == 1
    assert "error[STREAM_INTERRUPTED]: The reply from B broke off after it had started" in (
        done.stderr
    )
