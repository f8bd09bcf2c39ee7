"""Cassettes: a real model's traffic recorded once, replayed in every test run after.

::

    from ollm_openai import OpenAIProvider
    from ollm_testutils.cassette import Cassette

    with Cassette("tests/cassettes/weather.json", mode="none") as cassette:
        url = cassette.url("http://127.0.0.1:8080/v1", wire="openai")
        provider = OpenAIProvider(url, model="qwen3")  # the production code, over HTTP
        ...
    cassette.check()  # CassetteMiss: a request with no recording, and its diff

The pytest plugin gives each test its own cassette (the ``ollm_cassette`` fixture, the
``ollm_cassette`` marker) and ``--ollm-record=none|new_episodes|all``. A request is keyed
by its canonical form (the wire or provider, the path, the body with its model,
messages, tools and options; secrets scrubbed, made-up ids numbered); replies keep
their frames. Secrets never reach the file: see ``_secrets``.
"""

from ollm_testutils.cassette._cassette import Cassette, CassetteMiss, Miss, RecordMode
from ollm_testutils.cassette._format import Episode, HttpReply, key_of
from ollm_testutils.cassette._secrets import REDACTED, Scrubber
from ollm_testutils.cassette._wires import (
    DEFAULT_VOLATILE,
    Wire,
    get_wire,
    register_wire,
    wire_names,
)

__all__ = [
    "DEFAULT_VOLATILE",
    "REDACTED",
    "Cassette",
    "CassetteMiss",
    "Episode",
    "HttpReply",
    "Miss",
    "RecordMode",
    "Scrubber",
    "Wire",
    "get_wire",
    "key_of",
    "register_wire",
    "wire_names",
]
