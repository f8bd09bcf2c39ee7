"""A tool: a name, a description, a JSON Schema of its arguments, and a function."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar, overload

import anyio.to_thread
import msgspec

from ollm.errors import InvalidToolError, ToolArgumentsError
from ollm.tools.docstrings import parse_docstring
from ollm.tools.schema import inline_refs, read_signature
from ollm.types.abort import AbortSignal
from ollm.types.depth import MAX_JSON_DEPTH, nests_deeper_than
from ollm.types.messages import ToolCall
from ollm.types.request import ToolSchema

__all__ = [
    "ApprovalHint",
    "ArgumentsValidator",
    "Tool",
    "ToolApproval",
    "ToolContext",
    "may_hold",
    "render_result",
    "tool",
]

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
F = TypeVar("F", bound=Callable[..., Any])

ArgumentsValidator = Callable[[dict[str, Any]], "str | None"]
"""Checks a model's arguments against a tool's schema: ``None`` when they are valid,
else what is wrong, naming the field (``'abc' is not of type 'integer' - at $.days``)."""


_APPROVALS = ("allow", "ask", "deny")


class ApprovalHint(msgspec.Struct, frozen=True):
    """What a source the user has not said to trust suggests for a tool's calls (an MCP
    server's ``readOnlyHint`` or ``destructiveHint``): ``action`` applies only where it
    is at least as strict as the policy's default, so a hint never relaxes a policy
    (``allow`` under ``default = "ask"`` still asks). ``source`` names it in messages."""

    action: Literal["allow", "ask", "deny"]
    source: str = "a hint"

    def __post_init__(self) -> None:
        if self.action not in _APPROVALS:
            raise ValueError(f"action must be allow, ask or deny, not {self.action!r}")

    def describe(self) -> str:
        """The hint in a few words (``the server's readOnlyHint``)."""
        return self.source


ToolApproval = str | ApprovalHint | Callable[[dict[str, Any]], str] | None
"""What a tool asks of its calls: ``"allow"``, ``"ask"`` (a person approves each call
first), ``"deny"``, a function of the arguments returning one of them, an
``ApprovalHint`` (an untrusted source's suggestion, never less strict than the policy's
default), or ``None`` (nothing: the chat's rules decide). Rules a chat is given come
first (see ``ollm.ApprovalPolicy``)."""


def may_hold(approval: ToolApproval) -> bool:
    """Whether a tool's ``approval`` may keep one of its calls from running as it comes."""
    if isinstance(approval, ApprovalHint):
        return approval.action != "allow"
    return approval not in (None, "allow")


def _check_approval(approval: object) -> ToolApproval:
    if (
        approval is None
        or isinstance(approval, ApprovalHint)
        or callable(approval)
        or approval in _APPROVALS
    ):
        return approval
    raise InvalidToolError(
        f"approval must be 'allow', 'ask', 'deny', a function of the arguments, an "
        f"ollm.ApprovalHint, or None, not {approval!r}."
    )


class ToolContext:
    """Given to a tool that declares a parameter of this type (never shown to the model).

    ``call`` is the model's call being answered; ``abort`` fires when the chat is
    aborted, so a long tool can stop early.
    """

    __slots__ = ("abort", "call")

    def __init__(self, call: ToolCall, abort: AbortSignal) -> None:
        self.call = call
        self.abort = abort


_INJECTABLE = (ToolContext, AbortSignal)


class Tool:
    """A function a model can call.

    Build one with ``Tool.from_function(f)`` or the ``@tool`` decorator: the name is the
    function's, the description and each parameter's description come from the
    docstring, and the JSON Schema comes from the type hints. Arguments from a model
    are validated and converted before the call (``"5"`` becomes ``5`` for an ``int``).
    A ``Tool`` stays callable like the function it wraps. ``approval`` is what the tool
    asks of its calls (see ``ToolApproval``): ``"ask"`` has a person approve each one.
    """

    __slots__ = (
        "__dict__",
        "_args_type",
        "_injected",
        "_positional",
        "_validator",
        "approval",
        "description",
        "function",
        "is_async",
        "name",
        "pack",
        "parameters",
        "timeout",
    )

    def __init__(
        self,
        name: str,
        description: str,
        parameters: dict[str, Any],
        function: Callable[..., Any],
        *,
        args_type: type[msgspec.Struct] | None = None,
        positional: tuple[str, ...] = (),
        injected: Mapping[str, type] | None = None,
        timeout: float | None = None,
        pack: str | None = None,
        validator: ArgumentsValidator | None = None,
        approval: ToolApproval = None,
    ) -> None:
        if not _NAME.match(name):
            raise InvalidToolError(
                f"{name!r} is not a valid tool name: use 1 to 64 letters, digits, '_', '-' or '.'."
            )
        self.name = name
        self.description = description
        self.parameters = parameters
        self.function = function
        self.is_async = _is_async(function)
        self.timeout = timeout
        self.pack = pack
        self._args_type = args_type
        self._positional = positional
        self._injected = dict(injected or {})
        self._validator = validator
        self.approval = _check_approval(approval)
        functools.update_wrapper(self, function)

    @classmethod
    def from_function(
        cls,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = None,
        approval: ToolApproval = None,
    ) -> Tool:
        """Make a tool of a plain (sync or async) function."""
        if isinstance(function, Tool):
            return function
        tool_name = name or getattr(function, "__name__", "")
        if not tool_name or tool_name == "<lambda>":
            raise InvalidToolError("A tool needs a name: pass name=... for a lambda or a partial.")
        doc = parse_docstring(inspect.getdoc(function))
        signature = read_signature(function, tool_name, doc.params, _INJECTABLE)
        return cls(
            tool_name,
            description if description is not None else doc.description,
            signature.schema,
            function,
            args_type=signature.args_type,
            positional=signature.positional,
            injected=signature.injected,
            timeout=timeout,
            approval=approval,
        )

    @classmethod
    def from_schema(
        cls,
        schema: ToolSchema,
        function: Callable[..., Any],
        *,
        validator: ArgumentsValidator | None = None,
        timeout: float | None = None,
        approval: ToolApproval = None,
    ) -> Tool:
        """A tool whose schema is given as it is; arguments reach ``function`` unconverted.

        The schema's ``$ref``s are inlined and its titles dropped, as for a function's
        schema. The presence of its required arguments is checked before every call;
        ``validator`` checks the rest (``ollm-mcp`` passes a JSON Schema validator), and
        what it reports goes back to the model as for a function tool.
        """
        parameters = inline_refs(dict(schema.parameters))
        return cls(
            schema.name,
            schema.description,
            parameters,
            function,
            validator=validator,
            timeout=timeout,
            approval=approval,
        )

    def renamed(self, name: str, *, pack: str | None = None) -> Tool:
        """The same tool under another name (a toolset's prefix is added this way)."""
        return Tool(
            name,
            self.description,
            self.parameters,
            self.function,
            args_type=self._args_type,
            positional=self._positional,
            injected=self._injected,
            timeout=self.timeout,
            pack=pack if pack is not None else self.pack,
            validator=self._validator,
            approval=self.approval,
        )

    @property
    def schema(self) -> ToolSchema:
        """The tool as a model sees it."""
        return ToolSchema(self.name, self.description, self.parameters)

    def validate(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Check and convert a model's arguments; raise ``ToolArgumentsError`` naming the field."""
        if not isinstance(args, Mapping):
            raise ToolArgumentsError(
                f"Arguments for tool {self.name!r} must be a JSON object, "
                f"not {type(args).__name__}. {self._expected()}"
            )
        if nests_deeper_than(dict(args)):
            raise ToolArgumentsError(
                f"Invalid arguments for tool {self.name!r}: they are nested more than "
                f"{MAX_JSON_DEPTH} levels deep. Send a flatter JSON object. {self._expected()}"
            )
        if self._args_type is None:
            missing = [k for k in self.parameters.get("required", ()) if k not in args]
            if missing:
                raise ToolArgumentsError(
                    f"Invalid arguments for tool {self.name!r}: missing required "
                    f"{', '.join(repr(m) for m in missing)}. {self._expected()}"
                )
            if self._validator is not None:
                problem = self._validator(dict(args))
                if problem:
                    raise ToolArgumentsError(
                        f"Invalid arguments for tool {self.name!r}: {problem}. {self._expected()}"
                    )
            return dict(args)
        try:
            value = msgspec.convert(dict(args), self._args_type, strict=False)
        except msgspec.ValidationError as exc:
            raise ToolArgumentsError(
                f"Invalid arguments for tool {self.name!r}: {exc}. {self._expected()}"
            ) from None
        return {f: getattr(value, f) for f in value.__struct_fields__}

    def _expected(self) -> str:
        props: dict[str, Any] = self.parameters.get("properties", {})
        required = set(self.parameters.get("required", ()))
        if not props:
            return "It takes no arguments."
        described = []
        for key, spec in props.items():
            kind = spec.get("type", "any") if isinstance(spec, dict) else "any"
            if isinstance(kind, list):
                kind = "|".join(str(k) for k in kind)
            described.append(f"{key} ({kind}{', required' if key in required else ''})")
        return "Expected: " + ", ".join(described) + "."

    async def invoke(self, args: Mapping[str, Any], *, context: ToolContext | None = None) -> Any:
        """Validate ``args`` and run the tool (a sync tool runs in a worker thread)."""
        kwargs = self.validate(args)
        for param, kind in self._injected.items():
            if context is None:
                context = ToolContext(ToolCall(id="", name=self.name), AbortSignal())
            kwargs[param] = context if kind is ToolContext else context.abort
        positional = [kwargs.pop(p) for p in self._positional]
        if self.is_async:
            return await self.function(*positional, **kwargs)
        call = functools.partial(self.function, *positional, **kwargs)
        return await anyio.to_thread.run_sync(call, abandon_on_cancel=True)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Tool {self.name}>"


def _is_async(function: Callable[..., Any]) -> bool:
    target = function
    while isinstance(target, functools.partial):
        target = target.func
    return inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(
        getattr(target, "__call__", None)  # noqa: B004 - an object with an async __call__
    )


def _enc_hook(value: Any) -> Any:
    return str(value)


_result_encoder = msgspec.json.Encoder(enc_hook=_enc_hook)


def render_result(value: Any) -> str:
    """The text a model reads for a tool's return value: strings as they are, else JSON.

    A value JSON cannot hold is shown by its ``repr``. A value that contains itself, or
    nests too deeply to be written, raises ``ValueError`` (the runtime turns it into the
    call's error result).
    """
    if isinstance(value, str):
        return value
    try:
        return _result_encoder.encode(value).decode("utf-8")
    except (TypeError, ValueError, OverflowError):
        return repr(value)
    except RecursionError:
        raise ValueError(
            f"the {type(value).__name__} it returned contains itself or nests too deeply "
            "to be written as text"
        ) from None


@overload
def tool(
    function: F,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    approval: ToolApproval = None,
) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    approval: ToolApproval = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    approval: ToolApproval = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a function a tool: ``@tool``, ``@tool(name=..., timeout=..., approval="ask")``,
    or ``tool(function, timeout=...)``."""

    def make(fn: Callable[..., Any]) -> Tool:
        return Tool.from_function(
            fn, name=name, description=description, timeout=timeout, approval=approval
        )

    return make(function) if function is not None else make
