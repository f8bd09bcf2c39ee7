"""The pytest plugin's fixtures and its guard, run in inner sessions with pytester."""

from __future__ import annotations

import textwrap

import pytest

# The outer tests must not set the guard themselves: the inner sessions decide.
pytestmark = pytest.mark.ollm_real_providers


def test_the_fixtures_work_together(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import httpx
        import ollm
        import pytest

        from ollm_testutils import EchoProvider, EventCollector, FakeOllamaServer, ScriptedProvider

        @pytest.mark.anyio
        async def test_chat(chat_client, scripted_provider, ollm_events):
            assert isinstance(scripted_provider, ScriptedProvider)
            assert isinstance(ollm_events, EventCollector)
            scripted_provider.add("Hello")
            await ollm_events.collect(chat_client.chat("hi"))
            assert ollm_events.text == "Hello"
            assert scripted_provider.requests[0].messages[-1].text == "hi"

        def test_chat_client_uses_the_fixture_registries(chat_client, ollm_registries):
            assert chat_client.registries is ollm_registries
            assert ollm_registries.providers.list() == ["scripted"]

        def test_registries_start_empty(ollm_registries):
            assert ollm_registries.providers.list() == []
            assert ollm_registries.tools.list() == []
            assert ollm_registries.plugins == []

        def test_each_test_gets_fresh_registries(ollm_registries):
            assert ollm_registries.providers.list() == []
            ollm_registries.providers.register(ScriptedProvider(name="left-behind"))

        def test_plugin_manager_is_fresh(ollm_plugin_manager):
            assert ollm_plugin_manager.get_plugins() == set()
            assert hasattr(ollm_plugin_manager.hook, "ollm_providers")

        def test_echo_provider(echo_provider):
            assert isinstance(echo_provider, EchoProvider)

        def test_fake_ollama(fake_ollama):
            assert isinstance(fake_ollama, FakeOllamaServer)
            assert httpx.get(fake_ollama.url).text == "Ollama is running"

        PORTS = []

        @pytest.mark.parametrize("run", [1, 2])
        def test_fake_ollama_session_is_shared(fake_ollama_session, run):
            PORTS.append(fake_ollama_session.port)
            assert len(set(PORTS)) == 1
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=10)  # the async test runs on asyncio and trio


def test_a_failing_expectation_fails(pytester: pytest.Pytester) -> None:
    """The fixtures do not swallow failures."""
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.anyio
        async def test_wrong(chat_client, scripted_provider, ollm_events):
            scripted_provider.add("Hello")
            await ollm_events.collect(chat_client.chat("hi"))
            assert ollm_events.text == "Goodbye"
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=2)  # asyncio and trio
    result.stdout.fnmatch_lines(["*Goodbye*"])


def _install_provider_plugin(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A third-party provider plugin, 'installed' as a distribution on sys.path."""
    pytester.makepyfile(
        fakeprov_plugin="""
        import ollm
        from ollm_testutils import ScriptedProvider

        @ollm.hookimpl
        def ollm_providers():
            return [ollm.ProviderSpec("fakeprov", lambda: ScriptedProvider(name="fakeprov"))]
        """
    )
    info = pytester.mkdir("fakeprov-1.0.dist-info")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakeprov\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[ollm.plugins]\nfakeprov = fakeprov_plugin\n")
    pytester.syspathinsert()
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    monkeypatch.delenv("OLLM_BLOCK_PLUGINS", raising=False)


GUARDED_TESTS = """
    import subprocess, sys
    import ollm
    import pytest

    def providers():
        return ollm.discover().providers.list()

    def test_provider_plugins_are_kept_out():
        assert "fakeprov" not in providers()
        assert "echo" in providers()
        record = next(r for r in ollm.discover().plugins if r.name == "fakeprov")
        assert record.status == "blocked"

    def test_subprocesses_inherit_the_guard():
        code = "import ollm; print('fakeprov' in ollm.discover().providers)"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert out.stdout.strip() == "False", out.stderr

    @pytest.mark.ollm_real_providers
    def test_the_marker_lets_them_in():
        assert "fakeprov" in providers()

    def test_the_guard_is_undone_after_each_test():
        assert "fakeprov" not in providers()
"""


def test_the_guard_keeps_provider_plugins_out(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install_provider_plugin(pytester, monkeypatch)
    pytester.makepyfile(GUARDED_TESTS)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    import os

    assert "OLLM_BLOCK_PLUGINS" not in os.environ


def test_the_guard_keeps_what_the_user_already_blocks(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install_provider_plugin(pytester, monkeypatch)
    monkeypatch.setenv("OLLM_BLOCK_PLUGINS", "toolbox")
    pytester.makepyfile(
        """
        import os

        def test_both_are_blocked():
            names = os.environ["OLLM_BLOCK_PLUGINS"].split(",")
            assert names[0] == "toolbox" and "fakeprov" in names
        """
    )
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


@pytest.mark.parametrize(
    "how",
    [("--ollm-real-providers",), ("-o", "ollm_allow_plugins=fakeprov")],
    ids=["option", "ini"],
)
def test_the_guard_can_be_turned_off(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, how: tuple[str, ...]
) -> None:
    _install_provider_plugin(pytester, monkeypatch)
    pytester.makepyfile(
        """
        import ollm

        def test_real_providers_load():
            assert "fakeprov" in ollm.discover().providers
        """
    )
    pytester.runpytest("-p", "no:cacheprovider", *how).assert_outcomes(passed=1)


def test_the_option_and_marker_are_documented(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*--ollm-real-providers*", "*ollm_allow_plugins*"])
    markers = pytester.runpytest("--markers")
    markers.stdout.fnmatch_lines(["*ollm_real_providers*"])


def test_readme_examples_run(pytester: pytest.Pytester) -> None:
    """The README's examples, as a user would paste them."""
    from pathlib import Path

    readme = Path(__file__).parents[2] / "packages" / "ollm-testutils" / "README.md"
    blocks = _python_blocks(readme.read_text())
    assert blocks, "the README has no example"
    for number, block in enumerate(blocks):
        if "def test_" in block:
            pytester.makepyfile(**{f"test_readme_{number}": block})
    result = pytester.runpytest("-p", "no:cacheprovider")
    outcomes = result.parseoutcomes()
    assert "failed" not in outcomes, result.stdout.str()
    assert "errors" not in outcomes, result.stdout.str()
    assert outcomes.get("passed", 0) >= 9


def _python_blocks(text: str) -> list[str]:
    """The Python blocks, but those marked ``<!-- doctest: skip ... -->`` (a real server)."""
    blocks: list[str] = []
    current: list[str] = []
    inside = skipped = False
    previous = ""
    for line in text.splitlines():
        if line.strip() == "```python":
            inside, current = True, []
            skipped = previous.startswith("<!-- doctest: skip")
        elif line.strip() == "```" and inside:
            inside = False
            if not skipped:
                blocks.append(textwrap.dedent("\n".join(current)))
        elif inside:
            current.append(line)
        if line.strip():
            previous = line.strip()
    return blocks
