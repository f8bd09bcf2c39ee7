"""Tools at their edges: from the mutation run of ``ollm.tools`` (tests/MUTATION.md).

Each test here failed on a mutant that survived the rest of the suite: a schema that
refers to itself, ``$ref`` siblings, positional-only and keyword-only parameters,
docstring sections in every style, a renamed tool keeping everything but its name,
the words of the "Expected: ..." hint, names cut to 64 characters.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
from typing import Annotated, Any

import msgspec
import pytest

import ollm
from ollm.tools.docstrings import parse_docstring
from ollm.tools.toolset import check_toolset_name, is_toolset

# -- schemas ---------------------------------------------------------------------------


class Section(msgspec.Struct):
    """A section."""

    title: str
    parts: list[Section] = []


def outline(root: Section) -> int:
    """Count sections."""
    return 1


def test_a_recursive_schema_is_spelt_out_once_without_titles() -> None:
    assert ollm.Tool.from_function(outline).parameters == {
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Section"}},
        "required": ["root"],
        "$defs": {
            "Section": {
                "description": "A section.",
                "type": "object",
                "properties": {
                    "title": {"type": "string"},
                    "parts": {
                        "type": "array",
                        "items": {"$ref": "#/$defs/Section"},
                        "default": [],
                    },
                },
                "required": ["title"],
            }
        },
    }


class Chain(msgspec.Struct):
    value: int
    next: Chain | None = None


def walk(start: Chain) -> int:
    """Walk a chain."""
    return 1


def test_a_definition_that_refers_to_itself_through_a_union_is_kept() -> None:
    chain = {
        "type": "object",
        "properties": {
            "value": {"type": "integer"},
            "next": {"anyOf": [{"$ref": "#/$defs/Chain"}, {"type": "null"}], "default": None},
        },
        "required": ["value"],
    }
    assert ollm.Tool.from_function(walk).parameters == {
        "type": "object",
        "properties": {"start": {"$ref": "#/$defs/Chain"}},
        "required": ["start"],
        "$defs": {"Chain": chain},
    }
    schema = ollm.ToolSchema("walk", "Walk.", msgspec.json.schema(Chain))
    assert ollm.Tool.from_schema(schema, walk).parameters == {**chain, "$defs": {"Chain": chain}}


def test_a_recursive_schema_from_elsewhere_loses_every_title_and_keeps_its_root() -> None:
    # As a pydantic-made schema (an MCP server's) looks: titles at every level.
    node = {
        "title": "Node",
        "type": "object",
        "properties": {
            "title": {"title": "Title", "type": "string"},
            "children": {"title": "Children", "type": "array", "items": {"$ref": "#/$defs/Node"}},
            "tags": {"type": "array", "items": {"title": "Tag", "type": "string"}},
            "next": {"anyOf": [{"$ref": "#/$defs/Node"}, {"title": "End", "type": "null"}]},
        },
    }
    schema = ollm.ToolSchema(
        "tree",
        "A tree.",
        {
            "title": "TreeArgs",
            "type": "object",
            "properties": {"root": {"$ref": "#/$defs/Node"}},
            "$defs": {"Node": node},
        },
    )
    assert ollm.Tool.from_schema(schema, print).parameters == {
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Node"}},
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "title": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "next": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]},
                },
            }
        },
    }


def test_a_schema_whose_root_is_a_recursive_ref_keeps_the_definition_it_needs() -> None:
    schema = ollm.ToolSchema("outline", "Count.", msgspec.json.schema(Section))
    parameters = ollm.Tool.from_schema(schema, outline).parameters
    assert parameters["properties"]["title"] == {"type": "string"}
    assert parameters["$defs"]["Section"]["properties"]["parts"]["items"] == {
        "$ref": "#/$defs/Section"
    }
    assert "title" not in parameters
    assert "title" not in parameters["$defs"]["Section"]


def test_refs_are_inlined_with_their_siblings_and_no_defs_are_left() -> None:
    schema = ollm.ToolSchema(
        "find",
        "Find.",
        {
            "type": "object",
            "properties": {
                "where": {
                    "$ref": "#/$defs/Place",
                    "description": "Where to look.",
                    "properties": {"title": {"$ref": "#/$defs/Name"}},
                },
                "lost": {"$ref": "#/$defs/Missing", "description": "Nothing to inline."},
            },
            "$defs": {
                "Place": {"type": "object", "title": "Place"},
                "Name": {"type": "string", "title": "Name"},
            },
        },
    )
    assert ollm.Tool.from_schema(schema, print).parameters == {
        "type": "object",
        "properties": {
            "where": {
                "type": "object",
                "description": "Where to look.",
                "properties": {"title": {"type": "string"}},
            },
            "lost": {"description": "Nothing to inline."},
        },
    }


def test_a_ref_without_any_definitions_becomes_an_open_schema() -> None:
    schema = ollm.ToolSchema(
        "f", "F.", {"type": "object", "properties": {"x": {"$ref": "#/$defs/X"}}}
    )
    assert ollm.Tool.from_schema(schema, print).parameters["properties"] == {"x": {}}


def test_an_annotated_description_wins_over_the_docstring() -> None:
    def label(text: Annotated[str, "unit", msgspec.Meta(description="Own words.")]) -> str:
        """Label.

        Args:
            text: From the docstring.
        """
        return text

    assert ollm.tool(label).parameters["properties"]["text"]["description"] == "Own words."


@pytest.mark.anyio
async def test_an_annotated_context_is_still_injected(anyio_backend: str) -> None:
    async def who(ctx: Annotated[ollm.ToolContext, "given"]) -> str:
        """Who calls."""
        return f"{ctx.call.id}/{ctx.call.name}/{ctx.abort.aborted}"

    made = ollm.tool(who)
    assert made.parameters["properties"] == {}
    # Without a context, the tool gets one of its own: its name, no id, a fresh signal.
    assert await made.invoke({}) == "/who/False"


@pytest.mark.anyio
async def test_positional_only_and_keyword_only_parameters(anyio_backend: str) -> None:
    def sync_span(start: int, /, step: int = 1, *, stop: int) -> list[int]:
        """Span."""
        return list(range(start, stop, step))

    async def async_span(start: int, /, step: int = 1, *, stop: int) -> list[int]:
        """Span."""
        return list(range(start, stop, step))

    for function in (sync_span, async_span):
        made = ollm.tool(function)
        assert made.parameters["required"] == ["start", "stop"]
        assert await made.invoke({"start": "1", "stop": 7, "step": 2}) == [1, 3, 5]
    assert ollm.tool(sync_span)(1, stop=3) == [1, 2]


def test_signatures_that_cannot_be_tools_say_why_and_what_to_do() -> None:
    with pytest.raises(ollm.InvalidToolError, match="Cannot read the signature of tool 'min'"):
        ollm.Tool.from_function(min)

    def unresolved(x: NotDefinedAnywhere) -> str:  # type: ignore[name-defined]  # noqa: F821
        """Bad hint."""
        return ""

    with pytest.raises(ollm.InvalidToolError) as caught:
        ollm.tool(unresolved)
    assert str(caught.value) == (
        "Cannot resolve the type hints of tool 'unresolved': name 'NotDefinedAnywhere' is not "
        "defined. Make every annotation importable where the function is defined."
    )

    def parts(*parts: str) -> str:
        """Star."""
        return ""

    with pytest.raises(ollm.InvalidToolError, match=r"^Tool 'parts' takes \*parts; a tool needs"):
        ollm.tool(parts)

    def options(**options: str) -> str:
        """Star-star."""
        return ""

    with pytest.raises(ollm.InvalidToolError) as caught:
        ollm.tool(options)
    assert "takes **options; a tool needs named, typed parameters" in str(caught.value)
    assert "so the model knows what to pass." in str(caught.value)

    def number(z: complex) -> str:
        """Not JSON."""
        return ""

    with pytest.raises(ollm.InvalidToolError, match="parameter type that cannot be described"):
        ollm.tool(number)

    def nameless(x: int) -> int:
        return x

    with pytest.raises(ollm.InvalidToolError, match=r"^A tool needs a name: pass name="):
        ollm.Tool.from_function(functools.partial(nameless))


# -- docstrings ------------------------------------------------------------------------


def _doc(*lines: str) -> str:
    return "\n".join(lines)


@pytest.mark.parametrize(
    ("doc", "description", "params"),
    [
        (None, "", {}),
        ("", "", {}),
        # Google: blank lines inside, continuations, **kwargs, a second section of
        # arguments, prose after the sections is not the description.
        (
            _doc(
                "Sum.",
                "",
                "Args:",
                "    a: First.",
                "",
                "    b: Second,",
                "        continued.",
                "    Xlim: A name starting with X.",
                "    **opts: Options.",
                "",
                "Keyword Args:",
                "    c: Third.",
                "",
                "Prose after the arguments.",
            ),
            "Sum.",
            {
                "a": "First.",
                "b": "Second, continued.",
                "Xlim": "A name starting with X.",
                "opts": "Options.",
                "c": "Third.",
            },
        ),
        # Google: a section before the arguments, with a one-space line, is skipped.
        (
            _doc(
                "Sum.",
                "",
                "Returns:",
                "    The sum.",
                " still the return",
                "",
                "Args:",
                "    a: First.",
            ),
            "Sum.",
            {"a": "First."},
        ),
        # Google: a line that is no entry ends the section, quietly.
        (_doc("Sum.", "", "Args:", "    See the manual."), "Sum.", {}),
        # NumPy: every header name, sections before and after, blank lines, a type
        # with a colon, two names at once, prose after the last entry.
        (
            _doc(
                "Sum.",
                "",
                "Returns",
                "-------",
                "int",
                "    The sum.",
                "Params",
                "------",
                "",
                "a, b : int",
                "",
                "    Numbers.",
                "c : str, default: 'x'",
                "Arguments",
                "---------",
                "d : int",
                "Other Parameters",
                "----------------",
                "e : float",
                "    Extra.",
                "Raises",
                "------",
                "ValueError",
                "    never",
            ),
            "Sum.",
            {"a": "Numbers.", "b": "Numbers.", "c": "", "d": "", "e": "Extra."},
        ),
        (
            _doc(
                "Sum.",
                "",
                "Parameters",
                "----------",
                "    an indented line before any entry",
                "a : int",
                "    First.",
                "",
                "See the manual.",
            ),
            "Sum.",
            {"a": "First."},
        ),
        # NumPy: a section of one line, an empty one, then the parameters.
        (
            _doc(
                "Sum.",
                "",
                "Returns",
                "-------",
                "int",
                "Raises",
                "------",
                "Parameters",
                "----------",
                "a : int",
            ),
            "Sum.",
            {"a": ""},
        ),
        # NumPy: a skipped section's text is not read, whatever it looks like.
        (
            _doc("Sum.", "", "Notes", "-----", ":param z: not one.", "Params", "------", "a : int"),
            "Sum.",
            {"a": ""},
        ),
        # Google: a section straight after another, with no blank line, and an empty one.
        (
            _doc("Sum.", "", "Returns:", "    The sum.", "Raises:", "Args:", "    a: First."),
            "Sum.",
            {"a": "First."},
        ),
        # Google: prose after a section that is not the arguments is not the description.
        (_doc("Sum.", "", "Returns:", "    The sum.", "", "See the manual."), "Sum.", {}),
        # Sphinx: nor is prose after the fields.
        (_doc("Sum.", "", ":param a: First.", "", "See the manual."), "Sum.", {"a": "First."}),
        # A header on the last two lines is a header.
        (_doc("Sum.", "", "Parameters", "----------"), "Sum.", {}),
        # Sphinx: every kind of parameter field, continuations with one space, fields
        # that are not parameters.
        (
            _doc(
                "Sum.",
                "",
                ":param a: First,",
                " continued",
                " twice.",
                ":parameter b: Second.",
                ":arg c: Third.",
                ":argument d: Fourth.",
                ":key e: Fifth.",
                ":keyword f: Sixth.",
                ":param: a field with no name.",
                ":raises ValueError: never.",
                ":returns: The sum.",
            ),
            "Sum.",
            {
                "a": "First, continued twice.",
                "b": "Second.",
                "c": "Third.",
                "d": "Fourth.",
                "e": "Fifth.",
                "f": "Sixth.",
            },
        ),
    ],
)
def test_docstrings_in_every_style(
    doc: str | None, description: str, params: dict[str, str]
) -> None:
    parsed = parse_docstring(doc if doc is None else inspect.cleandoc(doc))
    assert (parsed.description, parsed.params) == (description, params)


# -- a tool's copies and words ---------------------------------------------------------


@pytest.mark.anyio
async def test_a_renamed_tool_keeps_everything_but_its_name(anyio_backend: str) -> None:
    @ollm.tool(timeout=4)
    async def scale(x: int, ctx: ollm.ToolContext) -> str:
        """Scale a number."""
        return f"{ctx.call.id}:{x * 2}"

    packed = scale.renamed("math_scale", pack="mathpack")
    renamed = packed.renamed("scale2")
    for copy in (packed, renamed):
        assert copy.description == "Scale a number."
        assert copy.parameters == scale.parameters
        assert copy.timeout == 4
        assert copy.pack == "mathpack"
        call = ollm.ToolCall("c1", copy.name, {"x": "21"})
        context = ollm.ToolContext(call, ollm.AbortSignal())
        assert await copy.invoke(call.args, context=context) == "c1:42"
    assert (packed.name, renamed.name, scale.pack) == ("math_scale", "scale2", None)


@pytest.mark.anyio
async def test_a_renamed_tool_keeps_its_positional_only_parameters(anyio_backend: str) -> None:
    def power(base: int, exponent: int, /, modulo: int = 0) -> int:
        """Raise a number."""
        return pow(base, exponent, modulo) if modulo else int(base**exponent)

    renamed = ollm.tool(power).renamed("pow2")
    assert await renamed.invoke({"base": 2, "exponent": 10}) == 1024
    assert await renamed.invoke({"base": 2, "exponent": 10, "modulo": 1000}) == 24


@pytest.mark.anyio
async def test_a_class_is_a_tool_described_by_its_constructor(anyio_backend: str) -> None:
    @dataclasses.dataclass
    class Point:
        x: int
        y: int = 0

    made = ollm.Tool.from_function(Point, name="point")
    assert made.parameters == {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}},
        "required": ["x"],
    }
    assert await made.invoke({"x": "3"}) == Point(3, 0)


def test_a_tool_from_a_schema_keeps_its_description_and_timeout() -> None:
    schema = ollm.ToolSchema("lookup", "Look up.", {"type": "object", "properties": {}})
    made = ollm.Tool.from_schema(schema, print, timeout=2.5)
    assert (made.description, made.timeout, made.schema) == ("Look up.", 2.5, schema)


def test_the_decorator_takes_a_name_and_a_description() -> None:
    @ollm.tool(name="plus", description="Adds.")
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    assert (add.name, add.description) == ("plus", "Adds.")
    assert add(a=2, b=3) == 5


def test_what_a_tool_expects_is_said_in_full() -> None:
    schema = ollm.ToolSchema(
        "mixed",
        "Mixed.",
        {
            "type": "object",
            "properties": {"q": {}, "n": {"type": ["integer", "null"]}, "r": True},
            "required": ["q", "r"],
        },
    )
    made = ollm.Tool.from_schema(schema, print)
    with pytest.raises(ollm.ToolArgumentsError) as caught:
        made.validate({"n": 1})
    assert str(caught.value) == (
        "Invalid arguments for tool 'mixed': missing required 'q', 'r'. "
        "Expected: q (any, required), n (integer|null), r (any, required)."
    )
    with pytest.raises(ollm.ToolArgumentsError) as caught:
        made.validate([1])  # type: ignore[arg-type]
    assert "must be a JSON object, not list." in str(caught.value)

    bare = ollm.Tool.from_schema(ollm.ToolSchema("bare", "Bare.", {"type": "object"}), print)
    with pytest.raises(ollm.ToolArgumentsError, match=r"not str\. It takes no arguments\.$"):
        bare.validate("x")  # type: ignore[arg-type]


def test_async_callables_are_recognised_through_partials_and_call() -> None:
    async def fetch(url: str, retries: int) -> str:
        """Fetch."""
        return url

    class Fetcher:
        """Fetch with a client."""

        async def __call__(self, url: str) -> str:
            return url

    assert ollm.Tool.from_function(functools.partial(fetch, retries=2), name="f").is_async
    assert ollm.Tool.from_function(Fetcher(), name="fetcher").is_async

    def size(text: str) -> int:
        """Size."""
        return len(text)

    assert not ollm.Tool.from_function(functools.partial(size), name="size").is_async


def test_a_result_json_cannot_hold_is_shown_by_its_repr() -> None:
    class Opaque:
        def __str__(self) -> str:
            raise ValueError("no text")

        def __repr__(self) -> str:
            return "<Opaque>"

    assert ollm.render_result(Opaque()) == "<Opaque>"
    assert ollm.render_result(10**30) == "1" + "0" * 30


def test_a_result_that_contains_itself_is_an_error_not_a_crash() -> None:
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(ValueError) as caught:
        ollm.render_result(looped)
    assert str(caught.value) == (
        "the list it returned contains itself or nests too deeply to be written as text"
    )


@pytest.mark.anyio
async def test_a_tool_whose_result_cannot_be_written_fails_and_the_chat_goes_on(
    anyio_backend: str,
) -> None:
    from ollm_testutils import Reply, ScriptedProvider

    @ollm.tool
    def nest() -> list[Any]:
        """Nest deeply."""
        value: list[Any] = []
        for _ in range(100_000):
            value = [value]
        return value

    provider = ScriptedProvider(
        Reply(tool_calls=[ollm.ToolCall("a", "nest", {})]), Reply("It failed.")
    )
    client = ollm.ChatClient(ollm.Registries(), provider=provider, tools=[nest])
    events = [e async for e in client.chat("go")]
    assert not [e for e in events if isinstance(e, ollm.ErrorEvent)]
    (result,) = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert result.is_error
    assert result.error_code == "TOOL_FAILED"
    assert result.result.startswith("Tool 'nest' failed: ValueError: the list it returned")
    assert client.conversation.messages[-1].text == "It failed."


def test_a_tool_context_holds_its_call_and_signal() -> None:
    call, signal = ollm.ToolCall("c", "t", {}), ollm.AbortSignal()
    context = ollm.ToolContext(call, signal)
    assert (context.call, context.abort) == (call, signal)


# -- names -----------------------------------------------------------------------------


def test_tool_names_are_cut_to_64_with_a_hash_of_the_whole() -> None:
    assert ollm.valid_tool_name("a" * 64) == "a" * 64
    assert ollm.valid_tool_name("") == "_"
    assert ollm.valid_tool_name("git status!") == "git_status_"
    long = "b" * 70 + "é"
    digest = hashlib.sha256(long.encode("utf-8")).hexdigest()[:8]
    assert ollm.valid_tool_name(long) == "b" * 55 + "_" + digest
    assert len(ollm.valid_tool_name(long)) == 64
    assert ollm.valid_tool_name("c" * 65) != ollm.valid_tool_name("c" * 64 + "d")


def test_what_counts_as_a_toolset_and_its_name() -> None:
    class Named:
        name = "x"

    class Opens:
        def open(self) -> None:
            return None

    class Both(Named, Opens):
        pass

    assert (is_toolset(Named()), is_toolset(Opens()), is_toolset(Both())) == (False, False, True)
    with pytest.raises(ollm.InvalidToolError, match=r"starting with a letter or a digit\.$"):
        check_toolset_name("-x")


@pytest.mark.anyio
async def test_partials_and_callable_objects_are_tools(anyio_backend: str) -> None:
    def search(query: str, limit: int, api_key: str) -> str:
        """Search.

        Args:
            query: What to find.
            limit: How many.
            api_key: The secret.
        """
        return f"{query}:{limit}:{api_key[:2]}"

    class Counter:
        def __call__(self, text: str) -> int:
            """Count words."""
            return len(text.split())

    bound = ollm.Tool.from_function(functools.partial(search, api_key="s3cret"), name="search")
    # A keyword the partial binds is not the model's to set, nor to read in a schema.
    assert bound.parameters["properties"].keys() == {"query", "limit"}
    assert "s3cret" not in str(bound.parameters)
    assert await bound.invoke({"query": "q", "limit": "3"}) == "q:3:s3"
    keyed = ollm.Tool.from_function(functools.partial(search, "fixed"), name="search")
    assert keyed.parameters["required"] == ["limit", "api_key"]
    first = ollm.Tool.from_function(functools.partial(search, query="news"), name="search")
    # A bound keyword before the others: the ones after it are still the model's.
    assert first.parameters["properties"].keys() == {"limit", "api_key"}
    assert await first.invoke({"limit": 2, "api_key": "k1"}) == "news:2:k1"
    counter = ollm.Tool.from_function(Counter(), name="count")
    assert counter.parameters["required"] == ["text"]
    assert await counter.invoke({"text": "a b c"}) == 3
