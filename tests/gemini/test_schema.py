"""Tools' JSON Schemas in the subset Gemini's ``parameters`` takes, and what cannot be said."""

from __future__ import annotations

from typing import Any

import pytest

import ollm
from ollm_gemini import Unexpressible, to_gemini_schema, tools_of
from ollm_testutils import FakeGeminiServer, GeminiReply

from .conftest import MODEL, chat_events, client_for, provider_for

pytestmark = pytest.mark.anyio


def obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def test_types_are_upper_case_and_properties_keep_their_order() -> None:
    schema = obj(b={"type": "integer"}, a={"type": "array", "items": {"type": "boolean"}})
    schema["required"] = ["b", "missing"]
    assert to_gemini_schema(schema) == {
        "type": "OBJECT",
        "properties": {
            "b": {"type": "INTEGER"},
            "a": {"type": "ARRAY", "items": {"type": "BOOLEAN"}},
        },
        "propertyOrdering": ["b", "a"],
        "required": ["b"],
    }


def test_refs_are_inlined_from_defs_and_definitions() -> None:
    schema = {
        **obj(home={"$ref": "#/$defs/Place"}, work={"$ref": "#/definitions/Place"}),
        "$defs": {"Place": obj(city={"type": "string"})},
        "definitions": {"Place": obj(city={"type": "string"})},
    }
    converted = to_gemini_schema(schema)
    for key in ("home", "work"):
        assert converted["properties"][key]["properties"]["city"] == {"type": "STRING"}
    assert "$defs" not in converted


def test_a_recursive_ref_is_unexpressible_naming_the_field() -> None:
    schema = {
        **obj(root={"$ref": "#/$defs/Node"}),
        "$defs": {"Node": obj(next={"$ref": "#/$defs/Node"})},
    }
    with pytest.raises(Unexpressible) as caught:
        to_gemini_schema(schema)
    assert caught.value.field == "parameters.root.next"
    assert "recursive" in caught.value.reason


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        ({"type": ["string", "null"]}, {"type": "STRING", "nullable": True}),
        (
            {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            {"type": "INTEGER", "nullable": True},
        ),
        (
            {"type": ["string", "integer"]},
            {"anyOf": [{"type": "STRING"}, {"type": "INTEGER"}]},
        ),
        (
            {"oneOf": [{"type": "string"}, {"type": "number"}]},
            {"anyOf": [{"type": "STRING"}, {"type": "NUMBER"}]},
        ),
        ({"enum": ["a", "b", None]}, {"type": "STRING", "enum": ["a", "b"], "nullable": True}),
        ({"const": "x"}, {"type": "STRING", "enum": ["x"]}),
        ({"type": "integer", "enum": [1, 2]}, {"type": "INTEGER", "description": "One of: 1, 2"}),
        ({"type": "string", "format": "email"}, {"type": "STRING", "description": "Format: email"}),
        ({"type": "string", "format": "date-time"}, {"type": "STRING", "format": "date-time"}),
        (
            {"type": "number", "exclusiveMinimum": 0, "maximum": 5},
            {"type": "NUMBER", "minimum": 0, "maximum": 5},
        ),
        (
            {"type": "object", "additionalProperties": {"type": "string"}, "properties": {}},
            {"type": "OBJECT"},
        ),
        (
            {"title": "Size", "description": "In cm.", "type": "number", "default": 3},
            {"type": "NUMBER", "description": "Size In cm.", "default": 3},
        ),
        (
            {"allOf": [obj(a={"type": "string"}), {"required": ["a"]}]},
            {
                "type": "OBJECT",
                "properties": {"a": {"type": "STRING"}},
                "propertyOrdering": ["a"],
                "required": ["a"],
            },
        ),
    ],
)
def test_json_schema_keywords_map_to_gemini(
    field: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert to_gemini_schema(obj(x=field))["properties"]["x"] == expected


@pytest.mark.parametrize(
    ("field", "reason"),
    [
        ({}, "no type"),
        ({"type": "array"}, "no items"),
        ({"type": "array", "items": [{"type": "string"}]}, "tuple"),
        ({"$ref": "#/$defs/Nope"}, "does not define"),
        ({"type": "date"}, "does not know"),
    ],
)
def test_what_the_subset_cannot_say_is_named(field: dict[str, Any], reason: str) -> None:
    with pytest.raises(Unexpressible) as caught:
        to_gemini_schema(obj(x=field))
    assert caught.value.field == "parameters.x"
    assert reason in caught.value.reason


def schema_tool(parameters: dict[str, Any], name: str = "lookup") -> ollm.ToolSchema:
    return ollm.ToolSchema(name=name, description="Look up.", parameters=parameters)


def test_a_tool_the_subset_cannot_say_goes_as_json_schema_on_v1beta() -> None:
    parameters = obj(value={})
    [tools] = tools_of((schema_tool(parameters),), json_schema=True)
    declaration = tools["functionDeclarations"][0]
    assert declaration["parametersJsonSchema"] == parameters
    assert "parameters" not in declaration


def test_on_v1_it_is_a_clear_error_naming_the_tool_and_field() -> None:
    with pytest.raises(ollm.InvalidRequestError) as caught:
        tools_of((schema_tool(obj(value={})),), json_schema=False)
    message = caught.value.message
    assert "'lookup'" in message
    assert "parameters.value" in message


def test_a_tool_without_parameters_sends_none() -> None:
    [tools] = tools_of((schema_tool({"type": "object", "properties": {}}),), json_schema=True)
    assert tools["functionDeclarations"] == [{"name": "lookup", "description": "Look up."}]


@pytest.mark.parametrize("name", ["9lives", "has space", "x" * 65, "émoji"])
def test_a_name_gemini_refuses_is_a_clear_error(name: str) -> None:
    with pytest.raises(ollm.InvalidRequestError) as caught:
        tools_of((schema_tool(obj(), name=name),), json_schema=True)
    assert "Rename it" in caught.value.message


async def test_a_pydantic_style_schema_reaches_the_api_and_the_call_comes_back(
    server: FakeGeminiServer,
) -> None:
    # The shape pydantic and MCP servers write: $defs, anyOf with null, titles, enums.
    parameters = {
        "type": "object",
        "title": "Args",
        "properties": {
            "query": {"title": "Query", "type": "string"},
            "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
            "order": {"$ref": "#/$defs/Order"},
        },
        "required": ["query", "order"],
        "additionalProperties": False,
        "$defs": {"Order": {"enum": ["asc", "desc"], "title": "Order", "type": "string"}},
    }
    seen: list[dict[str, Any]] = []

    def lookup(query: str, order: str, limit: int | None = None) -> str:
        seen.append({"query": query, "order": order, "limit": limit})
        return "3 results"

    tool = ollm.Tool("lookup", "Look up.", parameters, lookup)
    server.script(
        GeminiReply(calls=[("lookup", {"query": "owls", "order": "asc"})]), GeminiReply("Found 3.")
    )
    async with provider_for(server) as provider:
        events = await chat_events(client_for(provider, tools=[tool]), "find owls")
    assert [e for e in events if isinstance(e, ollm.ErrorEvent)] == []
    assert seen == [{"query": "owls", "order": "asc", "limit": None}]
    sent = server.generate_requests[0].json["tools"][0]["functionDeclarations"][0]
    assert sent["parameters"]["properties"]["order"] == {
        "type": "STRING",
        "enum": ["asc", "desc"],
        "description": "Order",
    }
    assert sent["parameters"]["properties"]["limit"] == {"type": "INTEGER", "nullable": True}
    assert MODEL in server.generate_requests[0].path
