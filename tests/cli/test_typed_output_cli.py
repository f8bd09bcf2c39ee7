"""``ollm chat --schema`` on the fake Ollama, OpenAI-compatible and Gemini servers: the
value alone on stdout (one line, ``jq``-ready), corrections, ``OUTPUT_INVALID`` with exit
1, ``--schema-multi``, a schema file, ``--json``, and the schema and value in the log
(``ollm logs --data``)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import OLLM, ollm_env
from typed_fakes import PROVIDERS, Fake

DOG = '{"name":"Rex","age":3}'


@pytest.fixture(params=PROVIDERS)
def fake(request: pytest.FixtureRequest) -> Iterator[Fake]:
    with Fake(str(request.param)) as made:
        yield made


def chat(
    fake: Fake, *args: str, logs: Path | None = None, shell_tail: str = ""
) -> subprocess.CompletedProcess[str]:
    command = [OLLM, "chat", "-p", fake.name, "-m", fake.model, *args]
    env = ollm_env(**fake.env())
    if logs is not None:
        env["OLLM_LOGS_PATH"] = str(logs)
    else:
        env["OLLM_LOGS"] = "off"
    if shell_tail:
        line = " ".join(f"'{part}'" for part in command) + " " + shell_tail
        return subprocess.run(
            line, shell=True, capture_output=True, text=True, timeout=120, env=env
        )
    return subprocess.run(
        command,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")
def test_the_value_alone_goes_to_jq(fake: Fake) -> None:
    fake.script(fake.text(['{"name": "Rex",', ' "age": 3}']))
    done = chat(fake, "--schema", "name, age int", "invent a dog", shell_tail="| jq .age")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "3\n"


def test_stdout_is_one_json_line_after_a_correction(fake: Fake) -> None:
    fake.script(
        fake.text('{"name":"Rex","age":"three","tags":[]}'),
        fake.text(['{"name": "Rex",\n', ' "age": 3, "tags": ["good"]}']),
    )
    done = chat(fake, "--schema", "name, age int, tags list[str]: a few words", "invent a dog")
    assert done.returncode == 0, done.stderr
    assert done.stdout == '{"name":"Rex","age":3,"tags":["good"]}\n'
    first, second = fake.bodies
    assert fake.constraint(first) is not None
    assert "$.age" in fake.last_user_text(second)


def test_output_invalid_exits_1_with_the_code(fake: Fake) -> None:
    fake.script(fake.text('{"name":"Rex","age":"three"}'))
    done = chat(fake, "--schema", "name, age int", "--output-retries", "0", "invent a dog")
    assert done.returncode == 1
    assert done.stdout == ""
    assert "error[OUTPUT_INVALID]" in done.stderr
    assert "did not match the output type (at once)" in done.stderr  # fields name no type
    assert "$.age: expected int, got str" in done.stderr
    assert len(fake.bodies) == 1


def test_schema_multi_asks_for_a_list_of_them() -> None:
    with Fake("ollama") as fake:
        fake.script(fake.text('{"items": [{"name": "Rex", "age": 3}, {"name": "Ace", "age": 5}]}'))
        done = chat(fake, "--schema", "name, age int", "--schema-multi", "two dogs")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["items"][1] == {"name": "Ace", "age": 5}
        schema = fake.constraint(fake.bodies[0])
    assert schema["properties"]["items"]["type"] == "array"
    assert schema["properties"]["items"]["items"]["required"] == ["name", "age"]


def test_a_schema_file_and_json_events(tmp_path: Path) -> None:
    path = tmp_path / "dog.json"
    schema = {"type": "object", "properties": {"age": {"type": "integer", "minimum": 0}}}
    path.write_text(json.dumps(schema))
    with Fake("ollama") as fake:
        fake.script(fake.text(['{"age": -1}']), fake.text(['{"a', 'ge": 4}']))
        done = chat(fake, "--schema", str(path), "--json", "a dog's age")
        sent = fake.constraint(fake.bodies[0])
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [e["type"] for e in events]
    assert kinds.count("output") == 1
    assert kinds[-2:] == ["output", "finish"]
    assert "partial_output" in kinds
    assert events[-2]["value"] == {"age": 4}
    assert sent == schema


def test_the_schema_and_the_value_are_logged(tmp_path: Path) -> None:
    logs = tmp_path / "logs.db"
    with Fake("ollama") as fake:
        fake.script(fake.text(DOG), fake.text('{"name":"Ace","age":5}'))
        assert chat(fake, "--schema", "name, age int", "one dog", logs=logs).returncode == 0
        assert chat(fake, "--schema", "name, age int", "another", logs=logs).returncode == 0
        assert chat(fake, "a plain question", logs=logs).returncode == 0
    env = ollm_env(OLLM_LOGS_PATH=str(logs))
    data = subprocess.run(
        [OLLM, "logs", "--data"], capture_output=True, text=True, timeout=60, env=env
    )
    assert data.returncode == 0, data.stderr
    assert [json.loads(line) for line in data.stdout.splitlines()] == [
        {"name": "Rex", "age": 3},
        {"name": "Ace", "age": 5},
    ]
    listed = subprocess.run(
        [OLLM, "logs", "--json"], capture_output=True, text=True, timeout=60, env=env
    )
    dogs = json.loads(listed.stdout)[-1]["id"]  # the first conversation (newest first)
    shown = subprocess.run(
        [OLLM, "logs", "show", "--json", dogs], capture_output=True, text=True, timeout=60, env=env
    )
    responses = json.loads(shown.stdout)["responses"]
    assert json.loads(responses[0]["output_schema"])["required"] == ["name", "age"]
    assert json.loads(responses[0]["output"]) == {"name": "Rex", "age": 3}


def test_a_schema_that_is_not_one_is_refused_in_words() -> None:
    with Fake("ollama") as fake:
        done = chat(fake, "--schema", "name, age integer", "a dog")
        assert fake.bodies == []
    assert done.returncode != 0
    assert "error[INVALID_REQUEST]" in done.stderr
    assert "'integer' (the type of age) is not a type here" in done.stderr
    assert "Traceback" not in done.stderr


def test_json_events_keep_the_raw_reply_and_the_errors_of_output_invalid() -> None:
    with Fake("ollama") as fake:
        fake.script(fake.text('{"name":"Rex","age":"three"}'))
        done = chat(fake, "--schema", "name, age int", "--output-retries", "0", "--json", "a dog")
    assert done.returncode == 1
    events = [json.loads(line) for line in done.stdout.splitlines()]
    (error,) = [e for e in events if e["type"] == "error"]
    assert error["code"] == "OUTPUT_INVALID"
    assert error["raw"] == '{"name":"Rex","age":"three"}'
    assert error["errors"] == ["$.age: expected int, got str"]


def test_a_reply_nested_100000_deep_is_output_invalid_in_words() -> None:
    with Fake("ollama") as fake:
        for _ in range(2):
            fake.script(fake.text('{"items": ' + "[" * 100_000))
        plain = chat(fake, "--schema", "name, items list[str]", "--output-retries", "0", "x")
        events = chat(
            fake, "--schema", "name, items list[str]", "--output-retries", "0", "--json", "x"
        )
    for done in (plain, events):
        assert done.returncode == 1, done.stderr
        assert "Traceback" not in done.stderr
        assert "Recursion" not in done.stderr + done.stdout
    assert "error[OUTPUT_INVALID]" in plain.stderr
    assert "nests more than 64 levels deep" in plain.stderr
    (error,) = [e for e in map(json.loads, events.stdout.splitlines()) if e["type"] == "error"]
    assert error["code"] == "OUTPUT_INVALID"


@pytest.mark.parametrize(
    ("schema", "said"),
    [
        # A million-value enum, 10 MB: refused by its size, before it is even parsed.
        (
            json.dumps({"properties": {"c": {"enum": [f"v{i:07}" for i in range(10**6)]}}}),
            "is longer than 1,000,000 bytes",
        ),
        (json.dumps({"enum": [f"v{i}" for i in range(20_000)]}), "more than 10,000 (ollm's"),
        ('{"items":' * 5000 + "{}" + "}" * 5000, "nests more than 64 levels deep"),
    ],
    ids=["10 MB", "an enum of 20,000", "5000 deep"],
)
def test_a_schema_file_past_a_bound_is_refused_naming_it(
    tmp_path: Path, schema: str, said: str
) -> None:
    path = tmp_path / "schema.json"
    path.write_text(schema)
    with Fake("ollama") as fake:
        done = chat(fake, "--schema", str(path), "a dog")
        assert fake.bodies == []
    assert done.returncode == 1, done.stderr
    assert "error[INVALID_REQUEST]" in done.stderr
    assert said in done.stderr
    assert "Traceback" not in done.stderr
