"""How a model's arguments are read and checked against a tool's schema, in the exact words
the model is told: enums and constants, unions that match no branch, arrays, values shown
cut short, Python literals and inline calls, bad JSON's position, the example of the shape
a tool wants, input nested past any depth; through the ReAct parser and through the
recovery of calls written as text."""

from __future__ import annotations

import json
from typing import Any

import pytest

import ollm
from ollm_react import (
    FormatProblem,
    ParsedAction,
    StreamScanner,
    TextCallScanner,
    parse_reply,
)

# -- tools -----------------------------------------------------------------------------


def _chain(prefix: str, hops: int, last: dict[str, Any], **between: Any) -> dict[str, Any]:
    """``$defs`` where ``{"$ref": "#/$defs/<prefix>0"}`` takes ``hops`` steps to ``last``."""
    defs: dict[str, Any] = {
        f"{prefix}{i}": {"$ref": f"#/$defs/{prefix}{i + 1}", **between} for i in range(hops - 1)
    }
    defs[f"{prefix}{hops - 1}"] = last
    return defs


DEFS: dict[str, Any] = {
    "Name": {"type": "string"},
    "Int": {"type": "integer"},
    "a/b~c": {"type": "integer"},
    "Loop": {"$ref": "#/$defs/Loop"},
    # 64 steps: followed to the end; 65: the checker stops one short and checks nothing
    **_chain("S", 64, {"type": "string"}),
    **_chain("L", 65, {"type": "string"}),
    # each step but the last also refuses anything but "never"
    **_chain("E", 64, {"type": "string"}, enum=["never"]),
}


def tool(name: str, properties: dict[str, Any], required: list[Any], **extra: Any) -> Any:
    parameters = {"type": "object", "properties": properties, "required": required, **extra}
    return ollm.ToolSchema(name, "A test tool.", parameters)


def one(spec: dict[str, Any]) -> tuple[ollm.ToolSchema, ...]:
    """A tool ``t`` with one required parameter ``v``."""
    return (tool("t", {"v": spec}, ["v"], **{"$defs": DEFS}),)


SEARCH = tool("search", {"query": {"type": "string"}}, ["query"])
NOW = tool("current_time", {}, [])


def detail(reply: str, tools: tuple[ollm.ToolSchema, ...]) -> str:
    parsed = parse_reply(reply, tools)
    assert isinstance(parsed, FormatProblem), parsed
    assert parsed.kind == "bad_input"
    return parsed.detail


# -- what does not fit, in the model's words -------------------------------------------

LONG_58 = "y" * 58  # its repr is 60 characters: shown whole
LONG_59 = "y" * 59  # 61: cut to 57 and "..."

# parameter schema, the value written, what the model is told is wrong
MISFITS: list[tuple[dict[str, Any], str, str]] = [
    # enums (Literal[...]) and constants: JSON equality, where true is not 1
    ({"enum": [1, 2]}, "true", "Expected one of 1, 2; got True - at `$.v`"),
    ({"enum": [False]}, "true", "Expected one of False; got True - at `$.v`"),
    ({"enum": [True]}, "1", "Expected one of True; got 1 - at `$.v`"),
    ({"enum": ["a", "b"]}, '"c"', "Expected one of 'a', 'b'; got 'c' - at `$.v`"),
    ({"enum": [1, 2]}, "3", "Expected one of 1, 2; got 3 - at `$.v`"),
    ({"enum": ["3"]}, "3", "Expected one of '3'; got 3 - at `$.v`"),
    ({"enum": [1]}, "{}", "Expected one of 1; got {} - at `$.v`"),
    ({"enum": [1]}, "[1]", "Expected one of 1; got [1] - at `$.v`"),
    ({"enum": [{"a": 1}]}, "1", "Expected one of {'a': 1}; got 1 - at `$.v`"),
    ({"enum": [[1]]}, "1", "Expected one of [1]; got 1 - at `$.v`"),
    ({"const": {"a": 1}}, '{"a": 2}', "Expected {'a': 1}, got {'a': 2} - at `$.v`"),
    ({"const": {"a": 1}}, '{"b": 1}', "Expected {'a': 1}, got {'b': 1} - at `$.v`"),
    ({"const": [1, 2]}, "[1, 3]", "Expected [1, 2], got [1, 3] - at `$.v`"),
    ({"const": [1, 2]}, "[1]", "Expected [1, 2], got [1] - at `$.v`"),
    ({"const": None}, "0", "Expected None, got 0 - at `$.v`"),
    (
        {"enum": list(range(25))},
        "99",
        "Expected one of " + ", ".join(map(str, range(20))) + "; got 99 - at `$.v`",
    ),
    # a value is shown whole up to 60 characters, else cut to 57 and "..."
    ({"enum": ["a"]}, f'"{LONG_58}"', f"Expected one of 'a'; got '{LONG_58}' - at `$.v`"),
    ({"enum": ["a"]}, f'"{LONG_59}"', f"Expected one of 'a'; got '{'y' * 56}... - at `$.v`"),
    ({"const": "a"}, f'"{LONG_59}"', f"Expected 'a', got '{'y' * 56}... - at `$.v`"),
    # unions that match no branch: the types when none fits, else the first branch's problem
    (
        {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        "[]",
        "Expected `string | integer`, got `array` - at `$.v`",
    ),
    (
        {"oneOf": [{"type": "boolean"}, {"type": "null"}]},
        "5",
        "Expected `boolean | null`, got `int` - at `$.v`",
    ),
    (
        {"anyOf": [{"type": "string", "minLength": 2}, {"type": "string"}, {"type": "null"}]},
        "5",
        "Expected `string | null`, got `int` - at `$.v`",
    ),
    (
        {"anyOf": [{"$ref": "#/$defs/Name"}, {"type": "integer"}]},
        "[]",
        "Expected `string | integer`, got `array` - at `$.v`",
    ),
    (
        {"anyOf": [{"type": "string", "enum": ["a", "b"]}, {"type": "integer"}]},
        '"c"',
        "Expected one of 'a', 'b'; got 'c' - at `$.v`",
    ),
    (
        {"anyOf": [{"type": "string", "minLength": 5}, {"type": "string", "pattern": "^a"}]},
        '"bcd"',
        "Expected a string of length >= 5 - at `$.v`",
    ),
    (
        {"allOf": [{"type": "string"}, {"maxLength": 2}]},
        '"abc"',
        "Expected a string of length <= 2 - at `$.v`",
    ),
    # arrays: each item, and the length
    (
        {"type": "array", "items": {"type": "integer"}},
        '[1, "x"]',
        "Expected `integer`, got `str` - at `$.v[1]`",
    ),
    (
        {"type": "array", "items": {"$ref": "#/$defs/Int"}},
        '[1, 2, "x"]',
        "Expected `integer`, got `str` - at `$.v[2]`",
    ),
    ({"type": "array", "minItems": 2}, "[1]", "Expected an array of length >= 2 - at `$.v`"),
    ({"type": "array", "maxItems": 1}, "[1, 2]", "Expected an array of length <= 1 - at `$.v`"),
    # the type each JSON value is called
    ({"type": "string"}, "null", "Expected `string`, got `null` - at `$.v`"),
    ({"type": "string"}, "true", "Expected `string`, got `bool` - at `$.v`"),
    ({"type": "string"}, "1.5", "Expected `string`, got `float` - at `$.v`"),
    ({"type": "string"}, "[]", "Expected `string`, got `array` - at `$.v`"),
    ({"type": "string"}, "{}", "Expected `string`, got `object` - at `$.v`"),
    ({"type": "integer"}, '"x"', "Expected `integer`, got `str` - at `$.v`"),
    ({"type": ["integer", "null"]}, '"x"', "Expected `integer | null`, got `str` - at `$.v`"),
    # a $ref is followed, with ~1 and ~0 escapes, for 64 steps
    ({"$ref": "#/$defs/a~1b~0c"}, '"x"', "Expected `integer`, got `str` - at `$.v`"),
    ({"$ref": "#/$defs/E0"}, "[]", "Expected one of 'never'; got [] - at `$.v`"),
    (
        {"anyOf": [{"$ref": "#/$defs/E0"}, {"type": "integer"}]},
        "[]",
        "Expected `string | integer`, got `array` - at `$.v`",
    ),
]


@pytest.mark.parametrize(("spec", "written", "problem"), MISFITS)
def test_each_misfit_in_the_models_words(spec: dict[str, Any], written: str, problem: str) -> None:
    reply = f'Action: t\nAction Input: {{"v": {written}}}'
    expected = f"Action Input does not fit the arguments of t: {problem}"
    assert detail(reply, one(spec)) == expected


# parameter schema, a value written that fits it (passed on as written)
FITS: list[tuple[dict[str, Any], str, Any]] = [
    ({"enum": [True]}, "true", True),
    ({"enum": [False, 1]}, "1", 1),
    ({"enum": ["a", "b"]}, '"b"', "b"),
    ({"enum": [2.0]}, "2", 2),
    ({"enum": [None]}, "null", None),
    ({"const": {"a": [1, {"b": None}]}}, '{"a": [1, {"b": null}]}', {"a": [1, {"b": None}]}),
    ({"const": [1, [2, "x"]]}, '[1, [2, "x"]]', [1, [2, "x"]]),
    ({"const": []}, "[]", []),
    ({"anyOf": [{"type": "integer"}, {"type": "string"}]}, '"x"', "x"),
    ({"oneOf": [{"type": "integer"}, {"type": "null"}]}, "null", None),
    ({"type": "array", "items": {"type": "integer"}, "minItems": 2}, "[1, 2]", [1, 2]),
    ({"$ref": "#/$defs/S0"}, '"x"', "x"),
    ({"$ref": "#/$defs/Loop"}, '"x"', "x"),
    # past 65 steps the checker lets the tool decide
    ({"$ref": "#/$defs/L0"}, "5", 5),
    # numbers and booleans written as strings pass, as with native tool calling
    ({"type": "boolean"}, '" True "', " True "),
    ({"type": "integer"}, "2.0", 2.0),
    ({"type": "number"}, '" -1.5e3 "', " -1.5e3 "),
]


@pytest.mark.parametrize(("spec", "written", "value"), FITS)
def test_values_that_fit_are_passed_on_as_written(
    spec: dict[str, Any], written: str, value: Any
) -> None:
    parsed = parse_reply(f'Action: t\nAction Input: {{"v": {written}}}', one(spec))
    assert parsed == ParsedAction("t", {"v": value})


class _Incomparable(int):
    """A schema value whose comparison raises."""

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("cannot compare")

    __hash__ = int.__hash__


def test_a_schema_value_that_cannot_be_compared_matches_nothing() -> None:
    problem = detail('Action: t\nAction Input: {"v": 1}', one({"enum": [_Incomparable(1)]}))
    assert (
        problem
        == "Action Input does not fit the arguments of t: Expected one of 1; got 1 - at `$.v`"
    )


# -- the same checks when a call written as text is recovered --------------------------

# parameter schema, the arguments, whether the call is recovered
RECOVERED: list[tuple[dict[str, Any], str, bool]] = [
    ({"enum": ["celsius", "fahrenheit"]}, '"celsius"', True),
    ({"enum": ["celsius", "fahrenheit"]}, '"kelvin"', False),
    ({"enum": [1, 2]}, "true", False),
    ({"enum": [1, 2]}, "2", True),
    ({"const": {"a": [1]}}, '{"a": [1]}', True),
    ({"const": {"a": [1]}}, '{"a": [2]}', False),
    ({"anyOf": [{"type": "integer"}, {"enum": ["auto"]}]}, '"auto"', True),
    ({"anyOf": [{"type": "integer"}, {"enum": ["auto"]}]}, '"manual"', False),
    ({"type": "array", "items": {"type": "integer"}}, "[1, 2]", True),
    ({"type": "array", "items": {"type": "integer"}}, '[1, "x"]', False),
]


@pytest.mark.parametrize(("spec", "written", "recovered"), RECOVERED)
def test_a_recovered_call_must_fit_its_tool(
    spec: dict[str, Any], written: str, recovered: bool
) -> None:
    reply = f'<tool_call>{{"name": "t", "arguments": {{"v": {written}}}}}</tool_call>'
    scanner = TextCallScanner(one(spec))
    outputs = scanner.feed(reply) + scanner.end()
    calls = [call for out in outputs if out[0] == "calls" for call in out[1]]
    text = "".join(out[1] for out in outputs if out[0] == "text")
    if recovered:
        assert (calls, text) == ([("t", {"v": json.loads(written)})], "")
    else:
        assert (calls, text) == ([], reply)


# -- objects ---------------------------------------------------------------------------

CLOSED = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b c": {}},
    "additionalProperties": False,
}

# parameter schema, the value written, what the model is told is wrong
OBJECT_MISFITS: list[tuple[dict[str, Any], str, str]] = [
    (
        CLOSED,
        '{"a": 1, "x": 2}',
        "Object contains unknown field `x` (known: `a`, `b c`) - at `$.v`",
    ),
    (
        {"type": "object", "additionalProperties": False},
        '{"x": 2}',
        "Object contains unknown field `x` (known: none) - at `$.v`",
    ),
    (CLOSED, '{"a": "1x"}', "Expected `integer`, got `str` - at `$.v.a`"),
    (
        {"type": "object", "additionalProperties": {"type": "integer"}},
        '{"ok": 1, "b c": "x"}',
        "Expected `integer`, got `str` - at `$.v['b c']`",
    ),
    (
        {"type": "object", "required": ["a", "b"]},
        '{"a": 1}',
        "Object missing required field `b` - at `$.v`",
    ),
]


@pytest.mark.parametrize(("spec", "written", "problem"), OBJECT_MISFITS)
def test_each_object_misfit_in_the_models_words(
    spec: dict[str, Any], written: str, problem: str
) -> None:
    reply = f'Action: t\nAction Input: {{"v": {written}}}'
    expected = f"Action Input does not fit the arguments of t: {problem}"
    assert detail(reply, one(spec)) == expected


def test_an_unknown_field_at_the_top_names_the_known_ones() -> None:
    route = tool(
        "route",
        {"start": {"type": "string"}, "end": {"type": "string"}},
        ["start"],
        additionalProperties=False,
    )
    problem = detail('Action: route\nAction Input: {"start": "a", "via": "b"}', (route,))
    assert problem == (
        "Action Input does not fit the arguments of route: "
        "Object contains unknown field `via` (known: `start`, `end`) - at `$`"
    )


# -- inline calls: name(...) -----------------------------------------------------------

# the Action line, the problem the model is told
CALL_PROBLEMS: list[tuple[str, str]] = [
    # the JSON object inside the parentheses is read as JSON, its errors named as such
    (
        'search({"query": owls})',
        "Action Input is not valid JSON: Expecting value at line 1, column 11 (char 10), "
        "near '{\"query\": owls})'",
    ),
    (
        'search( {"query": owls})',
        "Action Input is not valid JSON: Expecting value at line 1, column 11 (char 10), "
        "near '{\"query\": owls})'",
    ),
    ('search("q"', "the call's parentheses are not closed"),
    ('search("q" + ")"', "the call's parentheses are not closed"),
    ("search(5)", 'Action Input must be a JSON object such as {"query": "..."}, not a number'),
    ("search(0X10)", 'Action Input must be a JSON object such as {"query": "..."}, not a number'),
    ("search([1, 2])", 'Action Input must be a JSON object such as {"query": "..."}, not a list'),
    ("search(None)", 'Action Input must be a JSON object such as {"query": "..."}, not null'),
    ("search(True)", 'Action Input must be a JSON object such as {"query": "..."}, not a boolean'),
    ("search(-5.5)", 'Action Input must be a JSON object such as {"query": "..."}, not a number'),
    (
        'search("owls", limit=1)',
        "the call's arguments are not valid: write them as one JSON object",
    ),
    ('search("a", "b")', "the call's arguments are not valid: write them as one JSON object"),
    ("search(**x)", "the call's arguments are not valid: write them as one JSON object"),
    ("search(query=owls)", "the call's arguments are not valid: write them as one JSON object"),
    ("search(-True)", "the call's arguments are not valid: write them as one JSON object"),
    ("search(1e999)", "the call's arguments are not valid: write them as one JSON object"),
    ("search(1j)", "the call's arguments are not valid: write them as one JSON object"),
    # Python reads this as "f() if 1 else ()": not a call
    (
        "search(#'\n) if 1 else (#'\n)",
        "the call's arguments are not valid: write them as one JSON object",
    ),
]


@pytest.mark.parametrize(("action", "problem"), CALL_PROBLEMS)
def test_each_inline_call_problem_in_the_models_words(action: str, problem: str) -> None:
    assert detail(f"Action: {action}", (SEARCH, NOW)) == problem


# the Action line, the call it makes
CALLS: list[tuple[str, ParsedAction]] = [
    ("current_time()", ParsedAction("current_time", {})),
    ("current_time(  )", ParsedAction("current_time", {})),
    ('search("")', ParsedAction("search", {"query": ""})),
    ('search("a \\" b")', ParsedAction("search", {"query": 'a " b'})),
    ("search('it\\'s')", ParsedAction("search", {"query": "it's"})),
    ('search(query="owls")', ParsedAction("search", {"query": "owls"})),
    ('search({"query": "owls"}, "ignored")', ParsedAction("search", {"query": "owls"})),
]


@pytest.mark.parametrize(("action", "call"), CALLS)
def test_each_inline_call(action: str, call: ParsedAction) -> None:
    assert parse_reply(f"Action: {action}", (SEARCH, NOW)) == call


def _long_call(end: int) -> str:
    """``search("yyy...")`` whose closing parenthesis is character ``end``."""
    return 'search("' + "y" * (end - 4) + '")'


def test_an_inline_call_may_be_50000_characters_long() -> None:
    assert parse_reply(f"Action: {_long_call(50_000)}", (SEARCH,)) == ParsedAction(
        "search", {"query": "y" * 49_996}
    )
    assert detail(f"Action: {_long_call(50_001)}", (SEARCH,)) == "the call's arguments are too long"


# -- Action Input: Python literals, plain text, nothing --------------------------------

# what is written after Action Input:, the call it makes to search
INPUTS: list[tuple[str, dict[str, Any]]] = [
    ("{'query': 'it\\'s'}", {"query": "it's"}),
    ("use {'query': 'owls'}", {"query": "owls"}),
    ('`{"query": "a"}`', {"query": "a"}),
    ('```\n{"query": "a"}\n```', {"query": "a"}),
    ("**owls**", {"query": "owls"}),
    ("'owls'", {"query": "owls"}),
    ('"abc', {"query": "abc"}),
    ('"a\\tb" and more', {"query": "a\tb"}),
    # in backticks: the value inside them, as if written alone
    ('`"Paris"`', {"query": "Paris"}),
    ("`XML`", {"query": "XML"}),
    ("XML", {"query": "XML"}),
    ('"Xerox', {"query": "Xerox"}),
]


@pytest.mark.parametrize(("written", "args"), INPUTS)
def test_each_action_input_shape(written: str, args: dict[str, Any]) -> None:
    parsed = parse_reply(f"Action: search\nAction Input: {written}", (SEARCH,))
    assert parsed == ParsedAction("search", args)


NUMBERS = tool(
    "calc", {"n": {"type": "number"}, "xs": {"type": "array"}, "on": {"type": "boolean"}}, ["n"]
)


@pytest.mark.parametrize(
    ("written", "args"),
    [
        ("{'n': -5}", {"n": -5}),
        ("{'n': +5}", {"n": 5}),
        ("{'n': -2.5, 'xs': (1, -1), 'on': True}", {"n": -2.5, "xs": [1, -1], "on": True}),
        ("{'n': 1.5,}", {"n": 1.5}),
        (
            "{'n': 1, 'xs': [True, False, None, true, false, null]}",
            {"n": 1, "xs": [True, False, None, True, False, None]},
        ),
    ],
)
def test_python_literals_become_json_values(written: str, args: dict[str, Any]) -> None:
    parsed = parse_reply(f"Action: calc\nAction Input: {written}", (NUMBERS,))
    assert parsed == ParsedAction("calc", args)


def _literal_input(size: int) -> str:
    """``{'n': 1, 'xs': ['yyy...']}``, ``size`` characters long."""
    return "{'n': 1, 'xs': ['" + "y" * (size - 20) + "']}"


def test_a_python_literal_may_be_50000_characters_long() -> None:
    written = _literal_input(50_000)
    assert len(written) == 50_000
    parsed = parse_reply(f"Action: calc\nAction Input: {written}", (NUMBERS,))
    assert parsed == ParsedAction("calc", {"n": 1, "xs": ["y" * 49_980]})
    problem = detail(f"Action: calc\nAction Input: {_literal_input(50_001)}", (NUMBERS,))
    assert problem.startswith("Action Input is not valid JSON: Expecting property name")


def test_the_length_limit_counts_the_literal_not_the_words_before_it() -> None:
    words = "I will call it with these arguments. " * 800  # 29,600 characters
    written = words + _literal_input(25_000)
    parsed = parse_reply(f"Action: calc\nAction Input: {written}", (NUMBERS,))
    assert parsed == ParsedAction("calc", {"n": 1, "xs": ["y" * 24_980]})


# what is written after Action Input:, the problem the model is told
INPUT_PROBLEMS: list[tuple[str, str]] = [
    (
        'the query {"query": owls}',
        "Action Input is not valid JSON: Expecting value at line 1, column 11 (char 10), "
        "near '{\"query\": owls}'",
    ),
    (
        'first, {"n": 1, "long_name_here": [1, 2, 3], "x": owls, "more": "padding"}',
        "Action Input is not valid JSON: Expecting value at line 1, column 44 (char 43), "
        'near \'e": [1, 2, 3], "x": owls, "more": "paddi\'',
    ),
    (
        '{\n  "n": 1,\n  "xs": [1],\n  "on": yes,\n  "more": "padding padding"\n}',
        "Action Input is not valid JSON: Expecting value at line 4, column 9 (char 33), "
        'near \' "xs": [1],   "on": yes,   "more": "padd\'',
    ),
    (
        '{"n": 1e999}',
        "Action Input is not valid JSON: 1e999 is out of range for a number",
    ),
    (
        "{'n': -True}",
        "Action Input is not valid JSON: Expecting property name enclosed in double quotes "
        "at line 1, column 2 (char 1), near \"{'n': -True}\"",
    ),
    (
        "{'n': 1e999}",
        "Action Input is not valid JSON: Expecting property name enclosed in double quotes "
        "at line 1, column 2 (char 1), near \"{'n': 1e999}\"",
    ),
    (
        '{"n": ' + "[" * 5000 + "]" * 5000 + "}",
        "Action Input is not valid JSON: it is nested too deeply",
    ),
    ("[1, 2]", "Action Input must be a JSON object, not a list"),
    ("plain words", 'Action Input must be a JSON object such as {"n": 1.5}, not plain text'),
    ("", 'Action Input is missing: calc needs a JSON object with "n"'),
]


@pytest.mark.parametrize(("written", "problem"), INPUT_PROBLEMS)
def test_each_action_input_problem_in_the_models_words(written: str, problem: str) -> None:
    assert detail(f"Action: calc\nAction Input: {written}", (NUMBERS,)) == problem


@pytest.mark.parametrize(
    "written",
    ["", "None", "null", "n/a", "N/A.", "nothing", "Nothing.", "no input", "()", "`None`", "``"],
)
def test_each_way_of_writing_no_input(written: str) -> None:
    parsed = parse_reply(f"Action: current_time\nAction Input: {written}", (NOW,))
    assert parsed == ParsedAction("current_time", {})
    route = tool("route", {"start": {}, "end": {}}, ["start", 7, "end"])
    assert detail(f"Action: route\nAction Input: {written}", (route,)) == (
        'Action Input is missing: route needs a JSON object with "start", "end"'
    )


# -- plain text: for a tool with one required string ----------------------------------

# the required parameter's schema: plain text is its value
ONE_STRING: list[dict[str, Any]] = [
    {"type": ["null", "string"]},
    {"anyOf": [{"type": "string"}, {"type": "null"}]},
    {"oneOf": [{"type": "null"}, {"type": "string"}]},
    {"$ref": "#/$defs/Name"},
    {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/Name"}]},
    {"anyOf": [{"anyOf": [{"$ref": "#/$defs/Name"}]}, {"type": "null"}]},
    {"$ref": "#/$defs/S0"},
    {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/S0"}]},
]


@pytest.mark.parametrize("spec", ONE_STRING)
def test_plain_text_is_the_value_of_the_one_required_string(spec: dict[str, Any]) -> None:
    parsed = parse_reply("Action: t\nAction Input: Paris", one(spec))
    assert parsed == ParsedAction("t", {"v": "Paris"})


# the parameters of a tool, the example of its input the model is shown for plain text
EXAMPLES: list[tuple[dict[str, Any], str]] = [
    ({"properties": {"n": {"type": "integer"}}, "required": ["n"]}, '{"n": 1}'),
    ({"properties": {"v": {"$ref": "#/$defs/L0"}}, "required": ["v"]}, '{"v": "..."}'),
    ({"properties": {"v": {"anyOf": [{"type": "integer"}]}}, "required": ["v"]}, '{"v": "..."}'),
    (
        {
            "properties": {
                "a": {"type": "integer"},
                "b": {"type": "number"},
                "c": {"type": "boolean"},
                "d": {"type": "array"},
                "e": {"type": "object"},
            },
            "required": ["a", "b", "c", "d", "e"],
        },
        '{"a": 1, "b": 1.5, "c": true, "d": []}',
    ),
    (
        {
            "properties": {
                "e": {"type": "object"},
                "f": {"type": "string"},
                "g": {"enum": [1]},
                "h": {"type": ["integer", "null"]},
            },
            "required": ["e", "f", "g", "h"],
        },
        '{"e": {}, "f": "...", "g": "...", "h": "..."}',
    ),
    # without "required", the properties; required names it does not describe
    ({"properties": {"x": {"type": "integer"}, "y": {"type": "string"}}}, '{"x": 1, "y": "..."}'),
    ({"properties": {}, "required": ["x", "y"]}, '{"x": "...", "y": "..."}'),
    (
        {"properties": {"città": {"type": "string"}}, "required": ["città", "via"]},
        '{"città": "...", "via": "..."}',
    ),
    # schemas that are not quite right
    ({"properties": ["a"], "required": ["a", "b"]}, '{"a": "...", "b": "..."}'),
    ({"properties": {"a": {"type": "string"}}, "required": [["a"]]}, '{"a": "..."}'),
    (
        {"properties": {"a": True, "b": {"type": 7}}, "required": ["a", "b"]},
        '{"a": "...", "b": "..."}',
    ),
]


@pytest.mark.parametrize(("parameters", "example"), EXAMPLES)
def test_plain_text_for_other_tools_is_refused_with_an_example(
    parameters: dict[str, Any], example: str
) -> None:
    schema = ollm.ToolSchema("t", "A test tool.", {"type": "object", "$defs": DEFS, **parameters})
    assert detail("Action: t\nAction Input: Paris", (schema,)) == (
        f"Action Input must be a JSON object such as {example}, not plain text"
    )


# -- where a streamed Action Input ends ------------------------------------------------


def test_a_streamed_input_ends_at_its_closing_brace_whatever_comes_before_it() -> None:
    scanner = StreamScanner()
    scanner.feed("Action: search\nAction Input: it's ")
    assert scanner.stop is None
    scanner.feed('{"query": "owls"}')
    assert scanner.stop == "call closed"
    scanner = StreamScanner()
    scanner.feed('Action: search\nAction Input: it\'s {"query": "owls"}')
    assert scanner.stop == "call closed"


# -- deep nesting: a recursive schema checked 64 levels deep, and never a RecursionError ---

NESTED = tool(
    "nest",
    {"x": {"$ref": "#/$defs/list"}},
    ["x"],
    **{
        "$defs": {
            "list": {
                "type": "array",
                "items": {"anyOf": [{"$ref": "#/$defs/list"}, {"type": "string"}]},
            }
        }
    },
)


def _nested(levels: int) -> str:
    return json.dumps({"x": json.loads("[" * levels + "1" + "]" * levels)})


def test_a_misfit_deep_in_a_recursive_schema_is_found() -> None:
    # 25 lists deep: each level is an array and a union, 50 steps of the 64 checked
    assert detail(f"Action: nest\nAction Input: {_nested(25)}", (NESTED,)) == (
        "Action Input does not fit the arguments of nest: Expected `array | string`, "
        "got `int` - at `$.x" + "[0]" * 25 + "`"
    )


def test_a_value_nested_past_the_checked_depth_never_raises() -> None:
    parsed = parse_reply(f"Action: nest\nAction Input: {_nested(900)}", (NESTED,))
    assert isinstance(parsed, ParsedAction)


def _deep_action_input(depth: int) -> str:
    return "Thought: go\nAction: echo\nAction Input: " + "[" * depth + "]" * depth


@pytest.mark.parametrize("depth", [100, 5_000, 50_000])
def test_an_action_input_nested_past_any_depth_never_raises(depth: int) -> None:
    schema = ollm.ToolSchema("echo", "Echo.", {"type": "object", "properties": {}})
    parsed: Any = parse_reply(_deep_action_input(depth), [schema])
    assert isinstance(parsed, (FormatProblem, ParsedAction))
    if isinstance(parsed, FormatProblem):
        assert parsed.detail
