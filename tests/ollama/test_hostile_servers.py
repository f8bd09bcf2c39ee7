"""The Ollama provider against servers that misbehave, over the production HTTP stack.

Each test failed on the hand-written transport that ollm-http replaced; each runs
on asyncio and trio against a real socket on 127.0.0.1 (``raw_http.raw_server``).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import pytest
from cli_helpers import OLLM, ollm_env
from raw_http import CLOSE, chunked, ok, raw_server

import ollm
from ollm_ollama import OllamaProvider

pytestmark = pytest.mark.anyio

LINE = b'{"model":"m","message":{"role":"assistant","content":"hi "},"done":false}\n'
DONE = (
    b'{"model":"m","message":{"role":"assistant","content":""},"done":true,'
    b'"done_reason":"stop","prompt_eval_count":1,"eval_count":1}'
)
SIGNED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-6\r\nabcdef\r\n0\r\n\r\n"


def routes(*chats: Any) -> Any:
    """Answers by path: the scripted chat replies in order, ``{}`` for the rest."""
    queue = list(chats)

    async def answer(request: bytes, stream: anyio.abc.ByteStream) -> None:
        path = request.split(b" ", 2)[1]
        if path != b"/api/chat":
            await stream.send(ok(b"{}"))
            return
        reply = queue.pop(0)
        if reply == CLOSE:
            await stream.aclose()
        elif isinstance(reply, bytes):
            await stream.send(reply)
        else:
            await reply(request, stream)

    return answer


async def chat(provider: OllamaProvider, prompt: str = "hello") -> ollm.ChatResult:
    client = ollm.ChatClient(ollm.Registries(), provider=provider, model="m")
    return await client.run(prompt)


def chats_sent(server: Any) -> int:
    return sum(1 for r in server.requests if r.startswith(b"POST /api/chat "))


async def test_a_signed_chunk_size_ends_the_chat_with_bad_response() -> None:
    async with raw_server([routes(SIGNED)] * 5) as server:
        provider = OllamaProvider(server.url, environ={})
        with anyio.fail_after(30):  # hang detector: the old parser looped forever
            result = await chat(provider)
        assert result.error is not None
        assert result.error.code == "BAD_RESPONSE"
        assert "not valid HTTP" in result.error.message
        await provider.aclose()


async def test_a_chat_is_never_sent_twice_when_a_kept_alive_connection_fails() -> None:
    async with raw_server([routes(chunked(LINE, DONE), CLOSE)] * 8) as server:
        provider = OllamaProvider(server.url, environ={})
        first = await chat(provider)
        assert first.text == "hi "
        second = await chat(provider)
        assert second.error is not None
        assert second.error.code in ("CONNECTION_FAILED", "STREAM_INTERRUPTED")
        assert chats_sent(server) == 2
        conversation_ok = second.error.message
        assert "Traceback" not in conversation_ok
        await provider.aclose()


async def test_a_late_abort_of_one_chat_never_touches_the_next_chats_stream() -> None:
    """The first reply's last line has no newline; its abort fires during the second."""
    release = anyio.Event()
    reached = anyio.Event()

    async def slow(request: bytes, stream: anyio.abc.ByteStream) -> None:
        head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        await stream.send(head + b"%x\r\n%s\r\n" % (len(LINE), LINE))
        reached.set()
        await release.wait()
        await stream.send(b"%x\r\n%s\r\n0\r\n\r\n" % (len(DONE), DONE))

    no_newline = ok(LINE + DONE)
    async with raw_server([routes(no_newline, slow)] * 4) as server:
        provider = OllamaProvider(server.url, environ={})
        client = ollm.ChatClient(ollm.Registries(), provider=provider, model="m")
        first = client.chat("one")
        async for _event in first:
            pass
        second_text: list[str] = []

        async def second() -> None:
            async for event in client.chat("two"):
                if isinstance(event, ollm.TextEvent):
                    second_text.append(event.text)

        async with anyio.create_task_group() as group:
            group.start_soon(second)
            await reached.wait()
            first.abort("late")  # the first chat is over: this must reach nothing
            for _ in range(100):  # let a wrongly armed abort act, if there were one
                await anyio.lowlevel.checkpoint()
            release.set()
        assert "".join(second_text) == "hi "
        assert client.conversation.messages[-1].incomplete is False
        await provider.aclose()


async def test_an_http_1_0_server_is_not_kept_alive() -> None:
    reply = b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(LINE + DONE), LINE + DONE)
    async with raw_server([routes(reply, reply)] * 8) as server:
        provider = OllamaProvider(server.url, environ={"OLLM_OLLAMA_TIMEOUT": "30"})
        with anyio.fail_after(20):  # the old transport waited out the read timeout
            assert (await chat(provider)).text == "hi "
            assert (await chat(provider)).text == "hi "
        await provider.aclose()


async def test_an_obs_fold_header_is_read_not_blamed_on_a_silent_server() -> None:
    folded = b"HTTP/1.1 200 OK\r\nX-Note: a\r\n b\r\nContent-Length: %d\r\n\r\n%s" % (
        len(LINE + DONE),
        LINE + DONE,
    )
    async with raw_server([routes(folded)] * 4) as server:
        provider = OllamaProvider(server.url, environ={})
        assert (await chat(provider)).text == "hi "
        await provider.aclose()


def test_a_line_break_in_the_api_key_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(
        ollm.InvalidRequestError, match="OLLAMA_API_KEY holds a character"
    ) as caught:
        OllamaProvider(environ={"OLLAMA_API_KEY": "sk-1\r\nContent-Length: 0"})
    assert "sk-1" not in caught.value.message  # never the key
    with pytest.raises(ollm.InvalidRequestError, match="X-Trace"):
        OllamaProvider(headers={"X-Trace": "a\nb"}, environ={})


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"OLLAMA_API_KEY": "sk-1\r\nX-Evil: 1"}, "OLLAMA_API_KEY holds a character"),
        ({"OLLAMA_HOST": "localhost:99999"}, "OLLAMA_HOST='localhost:99999'"),
        ({"OLLAMA_HOST": "http://"}, "OLLAMA_HOST='http://'"),
    ],
)
def test_ollm_chat_reports_bad_settings_without_a_traceback(
    env: dict[str, str], expected: str
) -> None:
    done = subprocess.run(
        [OLLM, "chat", "-m", "m", "hi"],
        capture_output=True,
        text=True,
        env=ollm_env(**env),
        timeout=60,
    )
    assert done.returncode != 0
    assert expected in done.stderr
    assert "Traceback" not in done.stderr


async def test_ollm_chat_against_a_broken_server_says_so_and_exits() -> None:
    async with raw_server([routes(SIGNED)] * 5) as server:
        done = await anyio.run_process(
            [OLLM, "chat", "-m", "m", "hi"],
            env=ollm_env(OLLAMA_HOST=server.url),
            check=False,
        )
    stderr = done.stderr.decode()
    assert done.returncode != 0
    assert "not valid HTTP" in stderr
    assert "Traceback" not in stderr


def test_eleven_hundred_concurrent_chats_with_1024_descriptors_all_succeed() -> None:
    """The pool waits at its limit instead of running out of descriptors."""
    server = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                """
                import sys, time
                from ollm_testutils import FakeOllamaServer
                with FakeOllamaServer() as server:
                    print(server.url, flush=True)
                    sys.stdin.read()
                """
            ),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        client = textwrap.dedent(
            """
            import resource, sys
            import anyio, ollm
            from ollm_ollama import OllamaProvider
            resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))

            async def main():
                provider = OllamaProvider(sys.argv[1], environ={})
                results = []

                async def one():
                    client = ollm.ChatClient(
                        ollm.Registries(), provider=provider, model="llama3.2"
                    )
                    results.append(await client.run("hi"))

                async with anyio.create_task_group() as group:
                    for _ in range(1100):
                        group.start_soon(one)
                failed = [r.error for r in results if r.error is not None]
                print(len(results), len(failed), failed[:1])
                await provider.aclose()

            anyio.run(main, backend=sys.argv[2])
            """
        )
        for backend in ("asyncio", "trio"):
            done = subprocess.run(
                [sys.executable, "-c", client, url, backend],
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert done.returncode == 0, done.stderr[-2000:]
            assert done.stdout.split()[:2] == ["1100", "0"], done.stdout
    finally:
        server.kill()
