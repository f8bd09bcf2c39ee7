"""The settings of a chat: client-wide defaults, with per-chat overrides."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ollm.runtime.window import AUTO, check_on_truncation
from ollm.tools.tool import Tool
from ollm.tools.toolset import Toolset
from ollm.types.middleware import check_middleware
from ollm.types.provider import ProviderAdapter
from ollm.types.request import GenerationOptions

if TYPE_CHECKING:
    from ollm.runtime.approval import Approver
    from ollm.tools.approval import ApprovalPolicy

__all__ = [
    "COMPACT_AT",
    "DEFAULT_CONTEXT_WINDOW",
    "STRATEGIES",
    "ChatSettings",
    "ToolItem",
    "as_policy",
    "check_compact",
]

DEFAULT_CONTEXT_WINDOW = 4096
# Compaction's settings live here, so that a chat that does not compact never imports
# ollm.runtime.compaction.
COMPACT_AT = 0.8
# Strategies by name; "auto" is clear-results then trim.
STRATEGIES = ("auto", "off", "clear-results", "trim", "summarize", "summarize:MODEL")
ToolItem = str | Tool | Toolset | Callable[..., Any]


def check_compact(value: object) -> str:
    """``value`` if it can name a compactor (one of ``STRATEGIES`` or an installed one,
    which the chat checks when it starts), else ``ValueError`` naming ollm's own."""
    if (
        isinstance(value, str)
        and value.strip() == value != ""
        and (not value.startswith("summarize:") or value[10:].strip())
    ):
        return value
    raise ValueError(
        f"compact must be one of {', '.join(STRATEGIES)} or the name of an installed "
        f"compactor (`ollm plugins` lists them), not {value!r}"
    )


@dataclass(frozen=True)
class ChatSettings:
    """Everything that shapes a chat.

    - ``provider``: a registered name, a provider object, or ``None`` for the default;
    - ``model``: the model name (else the provider's ``default_model``, if it has one);
    - ``tools``: the tools offered: registered names or globs (``git_*`` picks among the
      tools of the client's toolsets too), ``Tool``s and functions, and toolsets (all
      their tools);
    - ``max_turns``: requests per chat before it ends with ``max_turns`` (bounded, always);
    - ``max_tool_calls``: tool calls per chat; later calls get an error result;
    - ``tool_timeout``: seconds a tool may run (a tool's own ``timeout`` wins);
    - ``context_window``: tokens; else what the provider reports; else 4096; or
      ``"auto"``: asked of the server per request (Ollama's ``num_ctx``), in powers of
      two from 4096 grown to fit the prompt and the reply, up to the model's trained
      length, never shrinking within a client (a ``context_resized`` notice each time);
    - ``tool_strategy``: ``auto`` (native when the model can, ReAct when not),
      ``native``, ``react``, or another installed strategy;
    - ``recover_text_tool_calls``: with native tools, run a call the model wrote as text
      (``<tool_call>{...}</tool_call>``, a bare JSON call...) as the call it is, when
      ``ollm-react`` (which reads them) is installed;
    - ``middleware``: names of installed middleware and middleware objects, the first
      outermost (see ``ollm.MiddlewareContext``); none runs unless it is named here;
    - ``middleware_timeout``: seconds each middleware method may take (``None``: no
      limit);
    - ``approval``: the rules that decide which tool calls run, wait for a person, or
      never run (an ``ApprovalPolicy``, or a list of ``ApprovalRule``); tools that ask
      for approval themselves are asked about even without it;
    - ``approver``: answers each approval request at once (``True``, ``False``, an
      ``ollm.Approve`` or an ``ollm.Deny``; sync or async); without one, the request is
      an event of the chat's stream, answered with ``stream.approve(id)`` or
      ``stream.deny(id)`` (``run()`` has no one to ask: the call is refused);
    - ``tool_call_deltas``: also stream each tool call as the model writes it
      (``ToolCallDeltaEvent``), from providers whose servers stream arguments;
    - ``output``: typed output: a ``msgspec.Struct``, a dataclass, a ``TypedDict``, a
      ``Literal`` or enum, a list of those, or a JSON Schema dict; the chat ends with an
      ``OutputEvent`` holding the validated value (``run()`` returns it);
    - ``output_retries``: corrections a reply that does not validate gets before the
      chat ends with ``OUTPUT_INVALID`` (each is a turn, within ``max_turns``);
    - ``output_strategy``: how the output is asked for: ``auto`` (the provider's native
      constraint and the prompt; the prompt alone with ReAct, or once a server ignored
      the constraint), ``native``, ``tool`` (the value as the arguments of a forced tool
      call, ``final_result``; as ``auto`` for a model without native tools), or another
      installed output strategy.
    - ``compact``: what a request leaves out of a long conversation to fit the window
      (the conversation keeps everything): ``"off"`` (the default: a request too long
      ends the chat ``TOKEN_LIMIT``), ``"clear-results"`` (old tool results replaced by a
      line saying how long they were), ``"trim"`` (whole units dropped from the front:
      a user message, or a reply with all its results), ``"auto"`` (clear-results, then
      trim), ``"summarize[:MODEL]"``, or the name of a plugin's compactor
      (``ollm_compactors``); a ``CompactionEvent`` says each time what was done;
    - ``compact_at``: the share of the window past which a request is compacted (0.8);
    - ``on_truncation``: what a reply the server evaluated from a prompt it cut to fit
      its window does (Ollama's guard tells it): ``"notice"`` (a ``context_truncated``
      notice with the numbers, the chat goes on) or ``"error"`` (the chat ends
      ``CONTEXT_EXCEEDED``).
    """

    provider: str | ProviderAdapter | None = None
    model: str | None = None
    system: str | None = None
    tools: Sequence[ToolItem] = ()
    tool_choice: str = "auto"
    options: GenerationOptions = dataclasses.field(default_factory=GenerationOptions)
    max_turns: int = 10
    max_tool_calls: int = 50
    tool_timeout: float | None = 60.0
    context_window: int | str | None = None
    tool_strategy: str = "auto"
    recover_text_tool_calls: bool = True
    think: bool | str | None = None
    response_format: str | dict[str, Any] | None = None
    middleware: Sequence[str | object] = ()
    middleware_timeout: float | None = 5.0
    approval: ApprovalPolicy | None = None
    approver: Approver | None = None
    tool_call_deltas: bool = False
    output: Any = None
    output_retries: int = 2
    output_strategy: str = "auto"
    on_truncation: str = "notice"
    compact: str = "off"
    compact_at: float = COMPACT_AT

    def __post_init__(self) -> None:
        if not isinstance(self.max_turns, int) or self.max_turns < 1:
            raise ValueError(f"max_turns must be a positive integer, not {self.max_turns!r}")
        if not isinstance(self.max_tool_calls, int) or self.max_tool_calls < 0:
            raise ValueError(
                f"max_tool_calls must be a non-negative integer, not {self.max_tool_calls!r}"
            )
        if self.tool_timeout is not None and self.tool_timeout <= 0:
            raise ValueError(f"tool_timeout must be positive or None, not {self.tool_timeout!r}")
        window = self.context_window
        if window not in (None, AUTO) and (not isinstance(window, int) or window < 1):
            raise ValueError(
                f'context_window must be a positive number of tokens or "auto", not '
                f"{self.context_window!r}"
            )
        if isinstance(self.tools, (str, bytes)):
            raise TypeError("tools must be a list of names or tools, not a string")
        if not isinstance(self.options, GenerationOptions):
            raise TypeError("options must be a GenerationOptions")
        object.__setattr__(self, "middleware", check_middleware(self.middleware))
        object.__setattr__(self, "approval", as_policy(self.approval))
        check_on_truncation(self.on_truncation)
        check_compact(self.compact)
        if not isinstance(self.compact_at, (int, float)) or not 0 < self.compact_at <= 1:
            raise ValueError(f"compact_at must be above 0 and at most 1, not {self.compact_at!r}")
        if self.approver is not None and not callable(self.approver):
            raise TypeError("approver must be a function of an ApprovalRequestEvent")
        if self.output is not None:
            from ollm.output.schema import OutputType  # only for a chat that asks for one

            OutputType(self.output)  # a type it cannot use raises now, not mid-chat
        if (
            not isinstance(self.output_retries, int)
            or isinstance(self.output_retries, bool)
            or self.output_retries < 0
        ):
            raise ValueError(
                f"output_retries must be a non-negative integer, not {self.output_retries!r}"
            )
        if self.middleware_timeout is not None and not self.middleware_timeout > 0:
            raise ValueError(
                f"middleware_timeout must be positive or None, not {self.middleware_timeout!r}"
            )

    def with_overrides(self, **overrides: Any) -> ChatSettings:
        """A copy with every override that is not ``None`` applied."""
        changes = {k: v for k, v in overrides.items() if v is not None}
        if "options" in changes:
            if not isinstance(changes["options"], GenerationOptions):
                raise TypeError("options must be a GenerationOptions")
            changes["options"] = self.options.merged(changes["options"])
        return dataclasses.replace(self, **changes) if changes else self


def as_policy(approval: object) -> ApprovalPolicy | None:
    """An ``ApprovalPolicy`` of what ``approval=`` was given (a policy, a list of rules)."""
    if approval is None:
        return None  # the rules' module is imported only by a chat that has some
    from ollm.tools.approval import ApprovalPolicy, ApprovalRule

    if isinstance(approval, ApprovalPolicy):
        return approval
    if isinstance(approval, ApprovalRule):
        return ApprovalPolicy((approval,))
    if isinstance(approval, (list, tuple)) and all(isinstance(r, ApprovalRule) for r in approval):
        return ApprovalPolicy(tuple(approval))
    raise TypeError("approval must be an ollm.ApprovalPolicy or a list of ollm.ApprovalRule")
