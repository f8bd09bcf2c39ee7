"""The guard against a prompt Ollama cuts without saying so.

Every ``/api/chat`` body says ``"truncate": false``, so a recent server refuses a prompt
longer than its window (400, ``CONTEXT_EXCEEDED``). An older server, or one whose model
cannot take the ``num_ctx`` asked for (Ollama caps it at the model's trained length),
still answers 200 from the end of the prompt: the system prompt and the tools are
gone, and the model answers something else. The guard compares what the server
evaluated (``prompt_eval_count``) with ollm's own count of what it sent and the window
the server used: when ollm sent more than that window and the server evaluated less
than ollm sent, the reply comes with a ``context_truncated`` notice that gives the
numbers (the runtime ends the chat ``CONTEXT_EXCEEDED`` instead with
``on_truncation="error"``), and the server's count is not used to estimate the next
request. When the window was unknown as the request was built (the first request to a
model not loaded yet, no ``num_ctx`` asked for) and the server evaluated less than ollm
sent, the window the reply loaded the model with (``/api/ps``) decides; where the server
cannot say (the model already unloaded, ``/api/ps`` failing), the trained length, which
no window passes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ollm.types import NoticeEvent

__all__ = ["TRUNCATED", "TruncationGuard"]

TRUNCATED = "context_truncated"


@dataclass(frozen=True)
class TruncationGuard:
    """What was sent: ollm's count of the prompt, and the window the server used.

    ``asked`` is the ``num_ctx`` of the request, ``trained`` the model's trained length
    (the server caps ``num_ctx`` there), ``loaded`` the window ``/api/ps`` showed.
    """

    model: str
    estimated: int
    asked: int | None = None
    trained: int | None = None
    loaded: int | None = None

    @property
    def window(self) -> int | None:
        """The window the server evaluates the prompt in, when known; else the trained
        length alone, when known (no window is longer: a prompt past it was cut)."""
        window = self.asked if self.asked is not None else self.loaded
        if window is not None and self.trained is not None:
            return min(window, self.trained)
        return window if window is not None else self.trained

    def undecided(self, evaluated: int | None) -> bool:
        """Whether the server evaluated less than ollm sent while the window it used is
        unknown (a model not loaded when the request was built): only the window the
        server has loaded it with now can tell a cut prompt from a count that differs."""
        return evaluated is not None and self.window is None and evaluated < self.estimated

    def cut(self, evaluated: int | None) -> bool:
        """Whether the server evaluated a prompt it had cut to fit its window."""
        window = self.window
        return (
            evaluated is not None
            and window is not None
            and self.estimated > window
            and evaluated < self.estimated
        )

    def notice(self, evaluated: int) -> NoticeEvent:
        """The ``context_truncated`` notice, with the numbers."""
        window = self.window
        if self.asked is not None and self.trained is not None and self.trained < self.asked:
            why = (
                f"{self.model} was trained for {self.trained} tokens, and Ollama caps the "
                f"{self.asked} asked for (num_ctx) there"
            )
        elif self.asked is not None:
            why = f"num_ctx was {self.asked}"
        elif self.loaded is not None:
            why = "the window the model is loaded with"
        else:
            why = f"{self.model}'s trained length, the longest window Ollama gives it"
        return NoticeEvent(
            f"Ollama cut the prompt: it evaluated {evaluated} tokens of about "
            f"{self.estimated} sent, in a window of {window} tokens ({why}). The start of "
            "the conversation (the system prompt, the tools, the first messages) was "
            "probably dropped, and the reply may ignore it. Shorten the conversation, or "
            "use a model with a longer context.",
            TRUNCATED,
        )
