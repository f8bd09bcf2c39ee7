"""Tools from plain functions: schemas from hints, docs from docstrings, validated calls."""

from __future__ import annotations

import enum
from typing import Annotated, Literal

import anyio
import msgspec
import pytest

import ollm
from ollm.tools.docstrings import parse_docstring


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


class Point(msgspec.Struct):
    x: float
    y: float


def forecast(
    city: str,
    days: Annotated[int, msgspec.Meta(ge=1, le=14)] = 3,
    unit: Unit = Unit.CELSIUS,
    detail: Literal["short", "long"] = "short",
    near: Point | None = None,
    tags: list[str] | None = None,
) -> dict[str, object]:
    """Get the weather forecast for a city.

    Uses the national weather service.

    Args:
        city: The city's name, e.g. "Paris".
        days: How many days ahead,
            between 1 and 14.
        unit: The temperature unit.
        detail: How much to say.
        near: A point to be close to.
        tags: Extra labels.

    Returns:
        The forecast.
    """
    return {"city": city, "days": days, "unit": unit.value, "detail": detail, "near": near}


def test_the_schema_comes_from_the_hints_and_the_docstring() -> None:
    tool = ollm.Tool.from_function(forecast)
    assert tool.name == "forecast"
    assert (
        tool.description
        == "Get the weather forecast for a city.\n\nUses the national weather service."
    )
    params = tool.parameters
    assert params["type"] == "object"
    assert params["required"] == ["city"]
    props = params["properties"]
    assert props["city"] == {"type": "string", "description": 'The city\'s name, e.g. "Paris".'}
    assert props["days"]["type"] == "integer"
    assert props["days"]["minimum"] == 1
    assert props["days"]["maximum"] == 14
    assert props["days"]["description"] == "How many days ahead, between 1 and 14."
    # Enums and nested types are spelt out where they are used: Ollama drops $ref.
    assert props["unit"]["enum"] == ["celsius", "fahrenheit"]
    assert sorted(props["detail"]["enum"]) == ["long", "short"]
    near = props["near"]["anyOf"][0]
    assert near["type"] == "object"
    assert set(near["properties"]) == {"x", "y"}
    assert "$ref" not in str(params)
    assert "$defs" not in params
    assert "title" not in str(params)


class Node(msgspec.Struct):
    value: int
    children: list[Node] = []


def walk(tree: Node) -> int:
    """Sum a tree."""
    return tree.value


def test_a_recursive_type_keeps_its_definitions() -> None:
    tool = ollm.Tool.from_function(walk)
    assert "Node" in tool.parameters["$defs"]


@pytest.mark.parametrize(
    ("doc", "params"),
    [
        (
            """Sum.

            Parameters
            ----------
            a, b : int
                The numbers
                to add.
            c : str
            """,
            {"a": "The numbers to add.", "b": "The numbers to add.", "c": ""},
        ),
        (
            """Sum.

            :param int a: The first.
            :param b: The second,
                continued.
            :returns: The sum.
            """,
            {"a": "The first.", "b": "The second, continued."},
        ),
        (
            """Sum.

            Args:
                a (int): The first.
                *rest: More.
            Raises:
                ValueError: never.
            """,
            {"a": "The first.", "rest": "More."},
        ),
    ],
)
def test_numpy_sphinx_and_google_docstrings(doc: str, params: dict[str, str]) -> None:
    parsed = parse_docstring(doc)
    assert parsed.description == "Sum."
    assert parsed.params == params


def test_a_parameter_without_annotation_is_named_in_the_error() -> None:
    def bad(city, days: int) -> str:  # type: ignore[no-untyped-def]
        return ""

    with pytest.raises(ollm.InvalidToolError, match="Parameter 'city' of tool 'bad'") as caught:
        ollm.Tool.from_function(bad)
    assert caught.value.code == "INVALID_TOOL"


def test_star_args_are_refused() -> None:
    def bad(*cities: str) -> str:
        return ""

    with pytest.raises(ollm.InvalidToolError, match=r"\*cities"):
        ollm.tool(bad)


def test_a_lambda_needs_a_name() -> None:
    with pytest.raises(ollm.InvalidToolError, match="needs a name"):
        ollm.Tool.from_function(lambda: 1)
    assert ollm.Tool.from_function(lambda: 1, name="one").name == "one"


def test_invalid_tool_names_are_refused() -> None:
    with pytest.raises(ollm.InvalidToolError, match="not a valid tool name"):
        ollm.Tool("has space", "", {}, print)


@pytest.mark.anyio
async def test_arguments_are_validated_and_converted(anyio_backend: str) -> None:
    tool = ollm.Tool.from_function(forecast)
    result = await tool.invoke(
        {"city": "Paris", "days": "5", "unit": "fahrenheit", "near": {"x": 1, "y": "2.5"}}
    )
    assert result == {
        "city": "Paris",
        "days": 5,
        "unit": "fahrenheit",
        "detail": "short",
        "near": Point(1.0, 2.5),
    }


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ({}, "missing required field `city`"),
        ({"city": "Paris", "days": 40}, r"Expected `int` <= 14 - at `\$.days`"),
        ({"city": "Paris", "unit": "kelvin"}, r"Invalid enum value 'kelvin' - at `\$.unit`"),
        ({"city": "Paris", "near": {"x": 1}}, r"missing required field `y` - at `\$.near`"),
        ("Paris", "must be a JSON object"),
    ],
)
def test_a_validation_failure_names_the_field_and_what_was_expected(
    args: object, match: str
) -> None:
    tool = ollm.Tool.from_function(forecast)
    with pytest.raises(ollm.ToolArgumentsError, match=match) as caught:
        tool.validate(args)  # type: ignore[arg-type]
    assert "Expected: city (string, required)" in str(caught.value)
    assert caught.value.code == "INVALID_ARGUMENTS"


@pytest.mark.anyio
async def test_sync_tools_run_in_a_worker_thread(anyio_backend: str) -> None:
    import threading

    main = threading.get_ident()

    @ollm.tool
    def where() -> int:
        """Which thread."""
        return threading.get_ident()

    assert await where.invoke({}) != main
    assert where.is_async is False


@pytest.mark.anyio
async def test_async_tools_and_injected_context(anyio_backend: str) -> None:
    @ollm.tool(name="slow_echo", timeout=5)
    async def echo(text: str, ctx: ollm.ToolContext, signal: ollm.AbortSignal) -> str:
        """Echo."""
        await anyio.sleep(0)
        return f"{ctx.call.id}:{text}:{signal is ctx.abort}"

    assert "ctx" not in echo.parameters["properties"]
    assert "signal" not in echo.parameters["properties"]
    assert echo.timeout == 5
    call = ollm.ToolCall("c7", "slow_echo", {"text": "hi"})
    context = ollm.ToolContext(call, ollm.AbortSignal())
    assert await echo.invoke(call.args, context=context) == "c7:hi:True"


def test_a_decorated_function_stays_callable() -> None:
    @ollm.tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    assert add(2, 3) == 5
    assert add.__name__ == "add"


def test_a_tool_from_a_schema_checks_required_arguments() -> None:
    schema = ollm.ToolSchema(
        "lookup", "Look up.", {"type": "object", "properties": {"q": {}}, "required": ["q"]}
    )
    tool = ollm.Tool.from_schema(schema, lambda q: q)
    assert tool.validate({"q": 1}) == {"q": 1}
    with pytest.raises(ollm.ToolArgumentsError, match="missing required 'q'"):
        tool.validate({})


def test_results_are_text_for_the_model() -> None:
    assert ollm.render_result("plain") == "plain"
    assert ollm.render_result({"a": [1, 2]}) == '{"a":[1,2]}'
    assert ollm.render_result(Point(1.5, 2.0)) == '{"x":1.5,"y":2.0}'
    assert ollm.render_result(None) == "null"
    assert ollm.render_result({1, 2}) in ("[1,2]", "[2,1]")
    assert ollm.render_result(object()).startswith('"<object object')


class TitledNote(msgspec.Struct):
    """A note."""

    title: str


def make_note(title: str, note: TitledNote) -> str:
    """Make a note."""
    return title


def test_a_parameter_named_title_is_kept_while_title_keywords_go() -> None:
    parameters = ollm.Tool.from_function(make_note).parameters
    assert parameters["properties"]["title"] == {"type": "string"}
    assert parameters["properties"]["note"]["properties"] == {"title": {"type": "string"}}
    assert parameters["required"] == ["title", "note"]
    assert "title" not in parameters["properties"]["note"]


def test_tool_called_with_a_function_keeps_its_settings() -> None:
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    made = ollm.tool(add, name="plus", description="Adds.", timeout=3)
    assert (made.name, made.description, made.timeout) == ("plus", "Adds.", 3)
