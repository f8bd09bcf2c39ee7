"""The toolbox tool pack: a safe calculator and the current time."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from runtime_helpers import client, collect

import ollm
from ollm.toolbox import calculate, current_time
from ollm_testutils.mock import Reply, ScriptedProvider

#: The pattern the calculator's schema states for an expression (without one, a pattern
#: that matches nothing: the checks below then fail, not the collection).
PATTERN = (
    ollm.Tool.from_function(calculate)
    .schema.parameters["properties"]["expression"]
    .get("pattern", r"\A(?!)")
)


@pytest.mark.parametrize(
    ("expression", "result"),
    [
        ("1 + 2 * 3", "7"),
        ("(3 + 4.5) * 2 ** 3", "60"),
        ("0.17 * 2,340", "397.8"),
        ("2^10", "1024"),
        ("sqrt(16) + abs(-2)", "6"),
        ("round(pi, 3)", "3.142"),
        ("10 // 3 + 10 % 3", "4"),
        ("-(-5)", "5"),
        ("factorial(5)", "120"),
        # A comma inside a call separates arguments; elsewhere it groups digits.
        ("max(10,250,3)", "250"),
        ("min(1,000, 5)", "0"),
        ("log(2,256)", "0.125"),
        ("log(256, 2)", "8"),
        ("round(2.5,100)", "2.5"),
        ("(2,340 + 1)", "2341"),
        ("1,234,567 + 1", "1234568"),
        ("2,340.25", "2340.25"),
        ("max((1,000), 5)", "1000"),
        ("(-1) ** (10 ** 100)", "1"),
    ],
)
def test_calculate_evaluates_arithmetic(expression: str, result: str) -> None:
    assert calculate(expression) == result
    assert re.search(PATTERN, expression), "the schema refuses an expression it evaluates"


@pytest.mark.parametrize(
    ("expression", "match"),
    [
        ("__import__('os').system('true')", "not allowed"),
        ("open('/etc/passwd')", "not allowed"),
        ("(1).__class__", "not allowed"),
        ("x + 1", "the name 'x' is not allowed"),
        ("9 ** 9 ** 9", "more than 4000 digits"),
        ("(10**10000)**10000", "more than 4000 digits"),
        ("10**3999 * 10**3999", "more than 4000 digits"),
        ("2.0 ** 10000", "too large"),
        ("exp(1000)", "too large"),
        ("1e308 * 10", "too large"),
        ("(-8) ** 0.5", "not a real number"),
        ("round(5, -10**100)", "at most 1000 digits"),
        ("sqrt(2,340)", "exactly one argument"),
        ("min()", "min"),
        ("1,23", "a comma outside a function call"),
        ("factorial(100000)", "factorial is limited"),
        ("1 / 0", "division by zero"),
        ("1 +", "not a valid arithmetic expression"),
        ("[1, 2]", "not allowed"),
        ("True + 1", "booleans"),
        ("1" * 600, "longer than"),
    ],
)
def test_calculate_refuses_anything_but_arithmetic(expression: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        calculate(expression)


@given(st.integers(-1000, 1000), st.integers(-1000, 1000))
def test_calculate_agrees_with_python_on_integers(a: int, b: int) -> None:
    assert calculate(f"{a} + {b} * 3") == str(a + b * 3)


_REFERENCE = {
    "max": max,
    "min": min,
    "abs": abs,
    "round": round,
    "__builtins__": {},
}


@st.composite
def _expressions(draw: st.DrawFn, depth: int = 0) -> str:
    """Arithmetic as a model writes it: calls with bare commas, numbers of any size."""
    if depth > 3 or draw(st.booleans()):
        return draw(
            st.one_of(
                st.integers(0, 10**7).map(str),
                st.floats(0, 1e6, allow_nan=False).map(lambda x: f"{x:.3f}"),
            )
        )
    kind = draw(st.sampled_from(["binary", "call", "negate", "power"]))
    if kind == "binary":
        op = draw(st.sampled_from(["+", "-", "*", "/", "//", "%"]))
        return f"({draw(_expressions(depth + 1))}{op}{draw(_expressions(depth + 1))})"
    if kind == "power":
        return f"({draw(_expressions(depth + 1))}**{draw(st.integers(0, 4))})"
    if kind == "negate":
        return f"-{draw(_expressions(depth + 1))}"
    name = draw(st.sampled_from(["max", "min", "abs", "round"]))
    count = {"abs": 1, "round": draw(st.integers(1, 2))}.get(name, draw(st.integers(2, 4)))
    args = [draw(_expressions(depth + 1)) for _ in range(count)]
    if name == "round" and count == 2:
        args[1] = str(draw(st.integers(0, 400)))
    return f"{name}({','.join(args)})"


@given(_expressions())
def test_calculate_agrees_with_python_on_what_models_write(expression: str) -> None:
    """Every result is Python's own, commas between arguments included."""
    try:
        expected = eval(expression, _REFERENCE)  # the reference, on generated text
    except (ArithmeticError, TypeError, ValueError):
        with pytest.raises(ValueError):
            calculate(expression)
        return
    if isinstance(expected, complex) or (
        isinstance(expected, float) and not math.isfinite(expected)
    ):
        with pytest.raises(ValueError):
            calculate(expression)
        return
    if isinstance(expected, float) and expected.is_integer() and abs(expected) < 1e15:
        expected = int(expected)
    assert calculate(expression) == str(expected)
    assert re.search(PATTERN, expression), "the schema refuses an expression it evaluates"


async def test_an_expression_with_an_answer_in_it_is_refused_by_the_schema(
    anyio_backend: str,
) -> None:
    """What small models write ("17 * 23 = 391", an expression and a guess) is outside
    the schema: a grammar built from it cannot produce it, and a model that wrote it
    anyway is told by the runtime, before the tool runs, which argument is wrong."""
    provider = ScriptedProvider(
        Reply(tool_calls=[("calculate", {"expression": "17 * 23 = 391"})]),
        Reply(tool_calls=[("calculate", {"expression": "17 * 23"})]),
        "391",
    )
    events = await collect(client(provider, tools=[calculate]).chat("What is 17 * 23?"))
    results = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert [(r.is_error, r.error_code) for r in results] == [
        (True, ollm.ErrorCode.INVALID_ARGUMENTS),
        (False, None),
    ]
    assert "expression" in results[0].result
    assert results[1].result == "391"


@given(
    st.lists(
        st.tuples(st.sampled_from(["**", "*", "+"]), st.integers(0, 10**6)), min_size=1, max_size=8
    ),
    st.integers(-(10**6), 10**6),
)
def test_calculate_bounds_every_integer_before_computing_it(
    steps: list[tuple[str, int]], first: int
) -> None:
    """Towers of powers and products either answer within the digit limit or refuse."""
    expression = f"({first})"
    for op, operand in steps:
        expression = f"({expression}{op}{operand})"
    try:
        result = calculate(expression)
    except ValueError as exc:
        refusal = str(exc)
        assert "digits" in refusal or "too large" in refusal
    else:
        assert len(result.lstrip("-")) <= 4002


def test_current_time_in_a_given_offset() -> None:
    assert re.search(r"\(UTC\+0530\)$", current_time(5.5))
    assert "UTC" in current_time()


@pytest.mark.parametrize(
    "expression", ["9 ** 9 ** 9", "factorial(100000)", "(-8) ** 0.5", "exp(1000)", "1 / 0"]
)
def test_calculate_errors_are_plain_value_errors(expression: str) -> None:
    """The model reads 'ValueError: ...': no private class name in what it is told."""
    with pytest.raises(ValueError) as info:
        calculate(expression)
    assert type(info.value) is ValueError
