"""Registries: providers (properties 1-3), tools, token counters, strategies."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ollm_strategies import names

import ollm
from ollm.registries import fallback_count
from ollm_testutils.mock import ScriptedProvider


class _Provider:
    def __init__(self, name: str) -> None:
        self.name = name

    async def chat_stream(self, request: ollm.ProviderRequest) -> AsyncIterator[ollm.ProviderEvent]:
        yield ollm.FinishEvent("stop")


class _Closeable(_Provider):
    closed = 0

    async def aclose(self) -> None:
        self.closed += 1


@given(names)
def test_property_1_a_provider_registered_by_name_comes_back(name: str) -> None:
    """Property 1: registering under a unique name and getting it returns the same object."""
    registry = ollm.ProviderRegistry()
    provider = _Provider(name)
    registry.register(provider)
    assert registry.get(name) is provider


@given(st.lists(names, min_size=1, max_size=8, unique=True), st.data())
def test_property_2_the_default_is_what_get_default_and_a_chat_use(
    provider_names: list[str], data: st.DataObject
) -> None:
    """Property 2: the provider set as default is what get_default() (and get()) returns."""
    registry = ollm.ProviderRegistry()
    providers = {name: _Provider(name) for name in provider_names}
    for provider in providers.values():
        registry.register(provider)
    chosen = data.draw(st.sampled_from(provider_names))
    registry.set_default(chosen)
    assert registry.get_default() is providers[chosen]
    assert registry.get() is providers[chosen]
    assert registry.get(None) is providers[chosen]


@pytest.mark.anyio
@given(st.lists(names, min_size=2, max_size=5, unique=True), st.data())
async def test_property_2_a_chat_without_a_provider_uses_the_default(
    anyio_backend: str, provider_names: list[str], data: st.DataObject
) -> None:
    """Property 2: ...and what a chat uses when no provider is named."""
    registries = ollm.Registries()
    providers = {n: ScriptedProvider(f"from {n}", name=n) for n in provider_names}
    for provider in providers.values():
        registries.providers.register(provider)
    chosen = data.draw(st.sampled_from(provider_names))
    registries.providers.set_default(chosen)
    result = await ollm.ChatClient(registries).run("hi")
    assert result.text == f"from {chosen}"
    assert [len(p.requests) for n, p in providers.items() if n != chosen] == [0] * (
        len(provider_names) - 1
    )


@given(st.lists(names, max_size=10, unique=True))
def test_property_3_list_returns_exactly_the_names_each_once(provider_names: list[str]) -> None:
    """Property 3: list() returns exactly the names registered, each once."""
    registry = ollm.ProviderRegistry()
    for name in provider_names:
        registry.register(_Provider(name))
    listed = registry.list()
    assert sorted(listed) == sorted(provider_names)
    assert len(listed) == len(set(listed))


def test_an_unknown_provider_error_lists_the_installed_ones_and_a_near_name() -> None:
    registry = ollm.ProviderRegistry()
    registry.register(_Provider("ollama"))
    registry.register(_Provider("echo"))
    with pytest.raises(ollm.ProviderNotFoundError) as caught:
        registry.get("olama")
    message = str(caught.value)
    assert "'olama' is not installed" in message
    assert "Did you mean 'ollama'?" in message
    assert "ollama, echo" in message
    assert caught.value.code == "PROVIDER_NOT_FOUND"


def test_no_provider_at_all_says_what_to_install() -> None:
    with pytest.raises(ollm.ProviderNotFoundError, match="pip install ollm-ollama"):
        ollm.ProviderRegistry().get_default()


def test_several_providers_and_no_default_asks_to_choose() -> None:
    registry = ollm.ProviderRegistry()
    registry.register(_Provider("a"))
    registry.register(_Provider("b"))
    with pytest.raises(ollm.ProviderNotFoundError, match="several are registered"):
        registry.get_default()


def test_the_only_provider_is_the_default() -> None:
    registry = ollm.ProviderRegistry()
    provider = _Provider("only")
    registry.register(provider)
    assert registry.get_default() is provider


def test_a_spec_marked_default_wins_until_set_default_says_otherwise() -> None:
    registry = ollm.ProviderRegistry()
    registry.register(_Provider("first"))
    registry.register(ollm.ProviderSpec("preferred", lambda: _Provider("preferred"), default=True))
    assert registry.default_name == "preferred"
    registry.set_default("first")
    assert registry.get_default().name == "first"


def test_a_factory_runs_once_on_first_use() -> None:
    built: list[int] = []

    def factory() -> _Provider:
        built.append(1)
        return _Provider("lazy")

    registry = ollm.ProviderRegistry()
    registry.register(ollm.ProviderSpec("lazy", factory))
    assert built == []
    first = registry.get("lazy")
    assert registry.get("lazy") is first
    assert built == [1]


def test_a_failing_factory_is_a_plugin_error_naming_the_provider() -> None:
    def factory() -> _Provider:
        raise RuntimeError("no credentials")

    registry = ollm.ProviderRegistry()
    registry.register(ollm.ProviderSpec("broken", factory))
    with pytest.raises(
        ollm.PluginError, match="'broken' failed to start: RuntimeError: no credentials"
    ):
        registry.get("broken")


def test_names_are_unique_unless_replaced() -> None:
    registry = ollm.ProviderRegistry()
    registry.register(_Provider("x"))
    with pytest.raises(ValueError, match="already registered"):
        registry.register(_Provider("x"))
    replacement = _Provider("x")
    registry.register(replacement, replace=True)
    assert registry.get("x") is replacement


def _any_case(name: str, flips: list[bool]) -> str:
    return "".join(c.swapcase() if flip else c for c, flip in zip(name, flips, strict=False))


@given(names, st.lists(st.booleans(), min_size=16, max_size=16))
def test_provider_names_ignore_case(name: str, flips: list[bool]) -> None:
    """Clashes are decided without case, so lookups are too: any spelling finds it."""
    registry = ollm.ProviderRegistry()
    provider = _Provider(name)
    registry.register(ollm.ProviderSpec(name.upper(), lambda: provider))
    spelling = _any_case(name, flips)
    assert registry.get(spelling) is provider
    assert spelling in registry
    assert registry.spec(spelling).name == name.upper()
    assert registry.list() == [name.upper()]  # the spelling it was registered with
    with pytest.raises(ValueError, match="already registered"):
        registry.register(_Provider(spelling))
    registry.set_default(spelling)
    assert registry.default_name == name.upper()
    assert registry.get() is provider


def test_a_replacement_in_another_case_takes_the_name_and_the_default() -> None:
    registry = ollm.ProviderRegistry()
    registry.register(_Provider("Parrot"))
    registry.register(_Provider("other"))
    registry.set_default("parrot")
    replacement = _Provider("parrot")
    registry.register(replacement, replace=True)
    assert registry.list() == ["other", "parrot"]
    assert registry.get("PARROT") is replacement
    assert registry.get_default() is replacement
    registry.unregister("PaRRoT")
    assert "parrot" not in registry
    assert registry.default_name == "other"  # the only one left, not the stale choice


def test_a_profile_of_a_provider_named_in_another_case_is_built_once() -> None:
    built: list[str] = []

    def profile(name: str) -> _Provider:
        built.append(name)
        return _Provider(f"openai:{name}")

    registry = ollm.ProviderRegistry()
    registry.register(
        ollm.ProviderSpec("openai", lambda: _Provider("openai"), profile_factory=profile)
    )
    first = registry.get("OpenAI:vllm")
    assert registry.get("openai:vllm") is first
    assert built == ["vllm"]
    registry.set_default("OPENAI:vllm")
    assert registry.default_name == "openai:vllm"


class _Configured(_Provider):
    def __init__(self, name: str, settings: dict[str, object]) -> None:
        super().__init__(name)
        self.settings = settings


def test_build_makes_a_new_provider_each_time_from_its_settings() -> None:
    registry = ollm.ProviderRegistry()
    registry.register(
        ollm.ProviderSpec(
            "remote",
            lambda: _Provider("remote"),
            profile_factory=lambda profile: _Provider(f"remote:{profile}"),
            settings_factory=lambda settings: _Configured("remote", dict(settings)),
        )
    )
    first = registry.build("Remote", {"host": "http://a:1"})
    second = registry.build("remote", {"host": "http://a:1"})
    assert isinstance(first, _Configured)
    assert isinstance(second, _Configured)
    assert first is not second  # each caller owns its own
    assert first.settings == {"host": "http://a:1"}
    profiled = registry.build("remote:gpu", {"timeout": 5})
    assert isinstance(profiled, _Configured)
    assert profiled.settings == {"timeout": 5, "profile": "gpu"}
    plain = registry.build("remote:gpu")  # no settings: as get() would build it
    assert plain.name == "remote:gpu"
    assert plain is not registry.get("remote:gpu")
    assert registry.build("remote") is not registry.build("remote")


def test_build_refuses_settings_a_provider_cannot_take() -> None:
    registry = ollm.ProviderRegistry()
    registry.register(ollm.ProviderSpec("plain", lambda: _Provider("plain")))
    with pytest.raises(ollm.InvalidRequestError) as caught:
        registry.build("plain", {"host": "x", "port": 1})
    assert caught.value.message == (
        "Provider 'plain' takes no settings here (host, port). Leave them out, or configure "
        "it as its documentation says."
    )
    with pytest.raises(ollm.ProviderNotFoundError):
        registry.build("missing", {"host": "x"})


def test_a_composite_is_built_with_the_registry_its_members_come_from() -> None:
    calls: list[tuple[str | None, ollm.ProviderRegistry]] = []

    def composite(profile: str | None, registry: ollm.ProviderRegistry) -> _Provider:
        calls.append((profile, registry))
        member = registry.build("member")
        return _Provider(f"group of {member.name}" + (f":{profile}" if profile else ""))

    registry = ollm.ProviderRegistry()
    registry.register(ollm.ProviderSpec("member", lambda: _Provider("member")))
    registry.register(
        ollm.ProviderSpec("group", lambda: _Provider("unused"), composite_factory=composite)
    )
    assert registry.get("group:home").name == "group of member:home"
    assert registry.get("group").name == "group of member"
    assert calls == [("home", registry), (None, registry)]
    assert registry.get("group:home") is registry.get("group:home")  # built once


@pytest.mark.parametrize(
    ("name", "distribution"),
    [
        ("echo", "ollm-testutils"),
        ("ollama", "ollm-ollama"),
        ("OpenAI", "ollm-openai"),
        ("openai:vllm", "ollm-openai"),
        ("gemini", "ollm-gemini"),
        ("anthropic", "ollm-anthropic"),
        ("pool:home", "ollm-pool"),
    ],
)
@pytest.mark.parametrize("installed", [[], ["mine"]])
def test_a_provider_of_ollm_that_is_not_installed_names_its_distribution(
    name: str, distribution: str, installed: list[str]
) -> None:
    registry = ollm.ProviderRegistry()
    for other in installed:
        registry.register(_Provider(other))
    with pytest.raises(ollm.ProviderNotFoundError) as caught:
        registry.get(name)
    message = caught.value.message
    assert f"Provider {name!r} is not installed: it comes with {distribution}" in message
    assert f"pip install {distribution}" in message
    assert ("Installed: mine." in message) == bool(installed)


@pytest.mark.parametrize(
    ("exit_", "said"),
    [
        (SystemExit(3), "SystemExit: 3"),
        (SystemExit(), "SystemExit"),
        (GeneratorExit(), "GeneratorExit"),
    ],
)
def test_a_factory_that_exits_is_a_plugin_error_not_the_end(
    exit_: BaseException, said: str
) -> None:
    def factory() -> _Provider:
        raise exit_

    registry = ollm.ProviderRegistry()
    registry.register(ollm.ProviderSpec("quitter", factory))
    with pytest.raises(ollm.PluginError, match=f"'quitter' failed to start: {said}\\."):
        registry.get("quitter")


def test_a_ctrl_c_in_a_factory_is_not_swallowed() -> None:
    def factory() -> _Provider:
        raise KeyboardInterrupt

    registry = ollm.ProviderRegistry()
    registry.register(ollm.ProviderSpec("slow", factory))
    with pytest.raises(KeyboardInterrupt):
        registry.get("slow")


def test_something_that_is_not_a_provider_is_refused() -> None:
    registry = ollm.ProviderRegistry()
    with pytest.raises(TypeError, match="name"):
        registry.register(object())  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_aclose_closes_what_the_registry_built_not_what_it_was_given(
    anyio_backend: str,
) -> None:
    registry = ollm.ProviderRegistry()
    given_provider = _Closeable("given")
    built_provider = _Closeable("built")
    registry.register(given_provider)
    registry.register(ollm.ProviderSpec("built", lambda: built_provider))
    registry.get("built")
    await registry.aclose()
    assert built_provider.closed == 1
    assert given_provider.closed == 0
    assert registry.get("given") is given_provider


def test_tool_registry_refuses_duplicates_and_explains_unknown_names() -> None:
    def get_weather(city: str) -> str:
        """Weather."""
        return city

    registry = ollm.ToolRegistry()
    registry.register(get_weather, pack="weather-pack")
    with pytest.raises(ValueError, match="by tool pack 'weather-pack'"):
        registry.register(get_weather)
    with pytest.raises(ollm.ToolNotFoundError) as caught:
        registry.get("Get_Weathr")
    assert "Did you mean 'get_weather'?" in str(caught.value)
    assert "Available tools: get_weather" in str(caught.value)
    assert registry.get("get_weather").pack == "weather-pack"


def test_token_counters_match_exact_names_then_globs() -> None:
    counters = ollm.TokenCounterRegistry()
    counters.register("llama*", lambda request: 1)
    counters.register("llama3.2", lambda request: 2)
    request = ollm.ProviderRequest(model="llama3.2", messages=())
    assert counters.get("llama3.2")(request) == 2  # type: ignore[misc]
    assert counters.get("llama2")(request) == 1  # type: ignore[misc]
    assert counters.get("qwen3") is None


@given(st.text(max_size=200))
def test_property_24_the_fallback_estimate_is_ceil_chars_over_4(text: str) -> None:
    """Property 24: the fallback estimate of any text is ceil(len(text) / 4)."""
    assert ollm.estimate_text_tokens(text) == -(-len(text) // 4)
    request = ollm.ProviderRequest(model="m", messages=(ollm.Message.user(text),))
    assert fallback_count(request) == max(1, -(-len(text) // 4))


def test_an_unknown_strategy_says_how_to_install_react() -> None:
    with pytest.raises(ollm.PluginError, match="pip install ollm-react"):
        ollm.StrategyRegistry().create("react")
