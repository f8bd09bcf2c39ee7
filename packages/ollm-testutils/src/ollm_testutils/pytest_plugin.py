"""The pytest plugin of ollm-testutils (entry point ``ollm`` of the group ``pytest11``).

Fixtures:

- ``ollm_plugin_manager``: a fresh pluggy manager with ollm's hook specs;
- ``ollm_registries``: an empty ``ollm.Registries``, private to the test;
- ``scripted_provider``: a ``ScriptedProvider`` registered (and default) in it;
- ``echo_provider``: an ``EchoProvider`` (not registered);
- ``chat_client``: an ``ollm.ChatClient`` on those registries and that provider;
- ``fake_ollama``: a running ``FakeOllamaServer`` for the test;
  ``fake_ollama_session``: one shared by the whole session (call ``reset()``);
- ``fake_gemini``: a running ``FakeGeminiServer`` (the Gemini API) for the test;
- ``fake_anthropic``: a running ``FakeAnthropicServer`` (the Messages API) for the test;
- ``fake_openai``: a running ``FakeOpenAIServer`` (OpenAI-compatible) for the test;
- ``ollm_events``: an ``EventCollector``;
- ``ollm_cassette``: the test's ``Cassette`` (``ollm_testutils.cassette``), replaying what
  a real server once answered, or recording it with ``--ollm-record=new_episodes|all``
  (``none``, replay only, is the default, and forced when ``CI`` is set). The file is
  ``cassettes/<module>/<test>.json`` beside the test, or what the marker
  ``@pytest.mark.ollm_cassette("name.json")`` names; a request with no recording
  fails the test with a diff against the nearest one and the command to record it.

And a guard: while a test runs, plugins that contribute providers (``ollama``, and any
third-party one) are kept out of ``ollm`` plugin discovery, so that code under test
which builds a ``ChatClient()`` cannot reach a real model by accident; the echo
provider stays. Opt out with the marker ``@pytest.mark.ollm_real_providers``, the
option ``--ollm-real-providers``, or name plugins that may load in the ini option
``ollm_allow_plugins``. The guard works through ``OLLM_BLOCK_PLUGINS`` (it adds to
what is already there), so subprocesses (``ollm`` run by a test) inherit it.

This module is imported whenever pytest starts: it imports nothing heavy at the top.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest

if TYPE_CHECKING:
    import pluggy

    from ollm import ChatClient, Registries
    from ollm_testutils.cassette import Cassette, RecordMode
    from ollm_testutils.echo import EchoProvider
    from ollm_testutils.events import EventCollector
    from ollm_testutils.fake_anthropic import FakeAnthropicServer
    from ollm_testutils.fake_gemini import FakeGeminiServer
    from ollm_testutils.fake_ollama import FakeOllamaServer
    from ollm_testutils.fake_openai import FakeOpenAIServer
    from ollm_testutils.mock import ScriptedProvider

MARKER = "ollm_real_providers"
OPTION = "--ollm-real-providers"
INI_ALLOW = "ollm_allow_plugins"
ALWAYS_ALLOWED = frozenset(("testutils",))
_BLOCKED_KEY = pytest.StashKey[tuple[str, ...]]()
CASSETTE_MARKER = "ollm_cassette"
RECORD_OPTION = "--ollm-record"
RECORD_MODES = ("none", "new_episodes", "all")
_CASSETTE_KEY = pytest.StashKey["Cassette"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ollm", "ollm testing")
    group.addoption(
        OPTION,
        action="store_true",
        default=False,
        help="let ollm plugin discovery load real provider plugins (ollama...) in every test",
    )
    group.addoption(
        RECORD_OPTION,
        choices=RECORD_MODES,
        default="none",
        help="ollm cassettes: none replays only (the default, forced when CI is set), "
        "new_episodes records the requests with no recording, all records everything again",
    )
    parser.addini(
        INI_ALLOW,
        type="linelist",
        default=[],
        help="ollm plugins that may load during tests even though they contribute providers",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}: let ollm plugin discovery load real provider plugins in this test",
    )
    config.addinivalue_line(
        "markers",
        f"{CASSETTE_MARKER}(path=None): replay this test's provider traffic from a cassette "
        "(cassettes/<module>/<test>.json beside it unless path says), record it with "
        f"{RECORD_OPTION}",
    )
    if os.environ.get("CI") and config.getoption(RECORD_OPTION, "none") != "none":
        config.issue_config_time_warning(
            pytest.PytestWarning(
                f"{RECORD_OPTION} is ignored because CI is set: cassettes only replay in CI"
            ),
            stacklevel=2,
        )


def record_mode(config: pytest.Config) -> RecordMode:
    """The cassettes' mode of this run: ``none`` whenever ``CI`` is set."""
    if os.environ.get("CI"):
        return "none"
    return cast("RecordMode", config.getoption(RECORD_OPTION, "none"))


def cassette_path(item: pytest.Item) -> Path:
    """The cassette file of a test: the marker's path (relative to the test's folder),
    else ``cassettes/<module>/<test>.json`` there."""
    folder = item.path.parent
    marker = item.get_closest_marker(CASSETTE_MARKER)
    named = (marker.args[0] if marker.args else marker.kwargs.get("path")) if marker else None
    if named:
        return folder / str(named)
    name = re.sub(r"[^A-Za-z0-9_.=-]+", "-", item.name).strip("-")
    return folder / "cassettes" / item.path.stem / f"{name}.json"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A marked test has its cassette whether or not it names the fixture.
    for item in items:
        names = getattr(item, "fixturenames", None)
        if (
            isinstance(names, list)
            and CASSETTE_MARKER not in names
            and item.get_closest_marker(CASSETTE_MARKER) is not None
        ):
            names.append(CASSETTE_MARKER)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    # A miss fails the test with its diff, also when the test failed because of it.
    try:
        result = yield
    except (Exception, pytest.fail.Exception) as exc:
        cassette = item.stash.get(_CASSETTE_KEY, None)
        if cassette is not None and cassette.misses:
            raise _miss(cassette) from exc
        raise
    cassette = item.stash.get(_CASSETTE_KEY, None)
    if cassette is not None and cassette.misses:
        raise _miss(cassette)
    return result


def _miss(cassette: Cassette) -> BaseException:
    from ollm_testutils.cassette import CassetteMiss

    return CassetteMiss(cassette.report())


@pytest.fixture
def ollm_cassette(request: pytest.FixtureRequest) -> Iterator[Cassette]:
    """The test's cassette: ``ollm_cassette.url(upstream, wire="openai")`` for an HTTP
    provider, ``ollm_cassette.provider(factory, name=...)`` for an in-process one."""
    from ollm_testutils.cassette import Cassette

    item = request.node
    rerecord = f"pytest {RECORD_OPTION}=new_episodes {shlex.quote(item.nodeid)}"
    cassette = Cassette(cassette_path(item), mode=record_mode(request.config), rerecord=rerecord)
    item.stash[_CASSETTE_KEY] = cassette
    with cassette:
        yield cassette


def blocked_provider_plugins(config: pytest.Config) -> tuple[str, ...]:
    """The ollm plugins that contribute providers and are kept out of tests (cached)."""
    blocked = config.stash.get(_BLOCKED_KEY, None)
    if blocked is None:
        from ollm import PluginSettings, discover

        allowed = ALWAYS_ALLOWED | set(config.getini(INI_ALLOW))
        registries = discover(settings=PluginSettings())
        blocked = tuple(
            sorted(
                record.name
                for record in registries.plugins
                if record.contributes.get("providers") and record.name not in allowed
            )
        )
        config.stash[_BLOCKED_KEY] = blocked
    return blocked


# The documented switch that keeps plugins out of discovery (see the README).
ENV_BLOCK = "OLLM_BLOCK_PLUGINS"


@pytest.fixture(autouse=True)
def _ollm_keep_real_providers_out(request: pytest.FixtureRequest) -> Iterator[None]:
    """Block real provider plugins from ollm discovery for the test (see the module doc)."""
    config = request.config
    if config.getoption(OPTION) or request.node.get_closest_marker(MARKER) is not None:
        yield
        return
    blocked = blocked_provider_plugins(config)
    if not blocked:
        yield
        return
    current = os.environ.get(ENV_BLOCK, "")
    names = [name.strip() for name in current.split(",") if name.strip()]
    names.extend(name for name in blocked if name not in names)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV_BLOCK, ",".join(names))
        yield


@pytest.fixture
def ollm_plugin_manager() -> pluggy.PluginManager:
    """A fresh pluggy plugin manager with ollm's hook specs and no plugin registered."""
    from ollm import build_plugin_manager

    return build_plugin_manager()


@pytest.fixture
def ollm_registries() -> Registries:
    """Empty registries (providers, tools, token counters, strategies) for this test."""
    from ollm import Registries

    return Registries()


@pytest.fixture
def scripted_provider(ollm_registries: Registries) -> ScriptedProvider:
    """A ``ScriptedProvider`` with an empty script, the default of ``ollm_registries``."""
    from ollm_testutils.mock import ScriptedProvider

    provider = ScriptedProvider()
    ollm_registries.providers.register(provider)
    ollm_registries.providers.set_default(provider.name)
    return provider


@pytest.fixture
def echo_provider() -> EchoProvider:
    """An ``EchoProvider``: answers with the prompt, or plays a JSON script."""
    from ollm_testutils.echo import EchoProvider

    return EchoProvider()


@pytest.fixture
def chat_client(ollm_registries: Registries, scripted_provider: ScriptedProvider) -> ChatClient:
    """A ``ChatClient`` on ``ollm_registries``, talking to ``scripted_provider``."""
    from ollm import ChatClient

    return ChatClient(ollm_registries, provider=scripted_provider.name)


@pytest.fixture
def fake_ollama() -> Iterator[FakeOllamaServer]:
    """A ``FakeOllamaServer`` running for this test (``fake_ollama.url``)."""
    from ollm_testutils.fake_ollama import FakeOllamaServer

    with FakeOllamaServer() as server:
        yield server


@pytest.fixture(scope="session")
def fake_ollama_session() -> Iterator[FakeOllamaServer]:
    """One ``FakeOllamaServer`` for the whole session; ``reset()`` it between uses."""
    from ollm_testutils.fake_ollama import FakeOllamaServer

    with FakeOllamaServer() as server:
        yield server


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAIServer]:
    """A ``FakeOpenAIServer`` (OpenAI flavor) running for this test (``fake_openai.base_url``)."""
    from ollm_testutils.fake_openai import FakeOpenAIServer

    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def fake_gemini() -> Iterator[FakeGeminiServer]:
    """A ``FakeGeminiServer`` running for this test (key ``test-key``, ``fake_gemini.url``)."""
    from ollm_testutils.fake_gemini import FakeGeminiServer

    with FakeGeminiServer() as server:
        yield server


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropicServer]:
    """A ``FakeAnthropicServer`` running for this test (key ``test-key``, ``.url``)."""
    from ollm_testutils.fake_anthropic import FakeAnthropicServer

    with FakeAnthropicServer() as server:
        yield server


@pytest.fixture
def ollm_events() -> EventCollector:
    """An empty ``EventCollector``: ``await ollm_events.collect(client.chat(...))``."""
    from ollm_testutils.events import EventCollector

    return EventCollector()
