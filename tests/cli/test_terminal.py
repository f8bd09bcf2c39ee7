"""Terminal output: colour only on a terminal and never with NO_COLOR; answer vs the rest."""

from __future__ import annotations

import io

import ollm
from ollm.cli.render import EventRenderer
from ollm.cli.terminal import Terminal


class _Tty(io.StringIO):
    def __init__(self, encoding: str = "utf-8") -> None:
        super().__init__()
        self._encoding = encoding

    def isatty(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._encoding


def test_colour_on_a_terminal_only() -> None:
    out, err = _Tty(), _Tty()
    Terminal(out, err, environ={}).warn("careful")
    assert "\x1b[" in err.getvalue()
    plain_err = io.StringIO()
    Terminal(io.StringIO(), plain_err, environ={}).warn("careful")
    assert plain_err.getvalue() == "warning: careful\n"


def test_no_color_and_dumb_terminals_get_plain_text() -> None:
    for environ in ({"NO_COLOR": "1"}, {"TERM": "dumb"}):
        err = _Tty()
        Terminal(_Tty(), err, environ=environ).error("it broke")
        assert err.getvalue() == "error: it broke\n"


def test_the_answer_goes_to_stdout_and_the_rest_to_stderr() -> None:
    out, err = io.StringIO(), io.StringIO()
    render = EventRenderer(Terminal(out, err, environ={}))
    call = ollm.ToolCall("c1", "calculate", {"expression": "6*7"})
    for event in [
        ollm.ThinkingEvent("hmm"),
        ollm.ToolCallStartEvent(call),
        ollm.ToolCallResultEvent(call, "42"),
        ollm.TextEvent("It is "),
        ollm.TextEvent("42."),
        ollm.FinishEvent("stop"),
    ]:
        render(event)
    assert out.getvalue() == "It is 42.\n"
    assert err.getvalue() == 'hmm\n-> calculate(expression="6*7")\n<- 42\n'


def test_thinking_can_be_hidden_and_unicode_marks_need_unicode() -> None:
    err = _Tty(encoding="utf-8")
    render = EventRenderer(
        Terminal(io.StringIO(), err, environ={"NO_COLOR": "1"}), show_thinking=False
    )
    render(ollm.ThinkingEvent("secret reasoning"))
    render(ollm.ToolCallStartEvent(ollm.ToolCall("c1", "f", {})))
    assert "secret" not in err.getvalue()
    assert err.getvalue() == "→ f()\n"


def test_json_mode_prints_every_event_and_nothing_else() -> None:
    out, err = io.StringIO(), io.StringIO()
    render = EventRenderer(Terminal(out, err, environ={}), json=True)
    events = [
        ollm.TextEvent("hi"),
        ollm.ErrorEvent("boom", "PROVIDER_ERROR"),
        ollm.FinishEvent("error"),
    ]
    for event in events:
        render(event)
    assert [ollm.decode_chat_event(line) for line in out.getvalue().splitlines()] == events
    assert err.getvalue() == ""


def test_a_long_tool_result_is_shortened_to_one_line() -> None:
    err = io.StringIO()
    render = EventRenderer(Terminal(io.StringIO(), err, environ={}))
    render(ollm.ToolCallResultEvent(ollm.ToolCall("c1", "f", {}), "line\n" * 200))
    line = err.getvalue()
    assert line.count("\n") == 1
    assert line.endswith("...\n")
    assert len(line) < 200
