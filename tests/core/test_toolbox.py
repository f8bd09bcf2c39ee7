"""The toolbox tool pack: a safe calculator and the current time."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ollm.toolbox import calculate, current_time


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
    ],
)
def test_calculate_evaluates_arithmetic(expression: str, result: str) -> None:
    assert calculate(expression) == result


@pytest.mark.parametrize(
    ("expression", "match"),
    [
        ("__import__('os').system('true')", "not allowed"),
        ("open('/etc/passwd')", "not allowed"),
        ("(1).__class__", "not allowed"),
        ("x + 1", "the name 'x' is not allowed"),
        ("9 ** 9 ** 9", "exponents above"),
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


def test_current_time_in_a_given_offset() -> None:
    assert re.search(r"\(UTC\+0530\)$", current_time(5.5))
    assert "UTC" in current_time()
