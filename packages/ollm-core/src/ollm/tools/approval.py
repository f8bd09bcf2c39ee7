"""Which tool calls run, which wait for a person, which never run: rules and a policy.

An ``ApprovalRule`` says ``allow``, ``ask`` or ``deny`` for the calls whose tool name
matches a glob (``fs_*``), and optionally whose arguments match too: ``args`` gives a
glob per argument (its value as text; a glob with a ``/`` also sees the normalised
path: a ``deny`` or ``ask`` matches when either does, an ``allow`` only when both do),
``when`` a function of the arguments. An ``ApprovalPolicy`` decides a call from every
rule that matches it, the strictest first:

    deny  >  ask  >  allow  >  the tool's own default  >  the policy's default

A tool's own default is its ``approval`` (``@ollm.tool(approval="ask")``, or a function
of the arguments). An ``ApprovalHint`` (what ``ollm-mcp`` makes of an untrusted server's
annotations: ``readOnlyHint`` allows, ``destructiveHint`` asks) counts only where it is
at least as strict as the policy's default. The policy's default is ``allow`` unless set.
The runtime decides on the arguments that will run: after a middleware's rewrite, and
again after a person's edit.

A policy file (TOML) holds the same::

    default = "allow"        # what a call no rule matches gets: allow, ask or deny

    [[rules]]
    action = "deny"
    tool = "shell_*"
    reason = "no shell commands"

    [[rules]]
    action = "ask"
    tool = "fs_write"
    args = { path = "/etc/*" }

A file that cannot be read or understood is a ``PolicyError`` (``POLICY_INVALID``),
never a policy that allows. ``ollm chat`` reads ``--policy PATH``, else
``$OLLM_POLICY``, else ``policy.toml`` in ollm's configuration folder
(``~/.config/ollm``), and adds ``--approve`` (the default becomes ``ask``),
``--allow``, ``--ask`` and ``--deny GLOB``.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import posixpath
import stat
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from ollm.errors import PolicyError
from ollm.tools.tool import ApprovalHint
from ollm.types.messages import ToolCall

if TYPE_CHECKING:
    from ollm.tools.tool import Tool

__all__ = [
    "ACTIONS",
    "ENV_POLICY",
    "ApprovalAction",
    "ApprovalDecision",
    "ApprovalPolicy",
    "ApprovalRule",
    "policy_path",
    "tool_default",
]

log = logging.getLogger(__name__)

ApprovalAction = Literal["allow", "ask", "deny"]
"""What a rule (or a default) does with a call."""

ACTIONS: tuple[ApprovalAction, ...] = ("allow", "ask", "deny")
"""The actions, from the least strict to the strictest."""

ENV_POLICY = "OLLM_POLICY"

_RANK = {action: rank for rank, action in enumerate(ACTIONS)}
MAX_POLICY_BYTES = 1 << 20
_FIX = "Fix it, or name another file: a policy that cannot be read never means allow."
_RULE_KEYS = ("action", "tool", "args", "reason")


class ApprovalRule(msgspec.Struct, frozen=True):
    """``action`` for the calls of the tools matching ``tool`` (a glob), when each
    argument in ``args`` matches its glob (its value as text: JSON for anything but a
    string) and ``when(args)`` (if given) is true. ``reason`` says why, to the person
    asked or to the model refused.

    A ``when`` that raises counts as a match for ``ask`` and ``deny`` (the safe side)
    and as no match for ``allow``.
    """

    action: ApprovalAction
    tool: str = "*"
    args: dict[str, str] = msgspec.field(default_factory=dict)
    when: Callable[[dict[str, Any]], bool] | None = None
    reason: str = ""

    def __post_init__(self) -> None:
        if self.action not in _RANK:
            raise ValueError(f"action must be allow, ask or deny, not {self.action!r}")
        if not isinstance(self.tool, str) or not self.tool:
            raise ValueError("tool must be a tool name or a glob such as 'fs_*'")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in self.args.items()):
            raise TypeError("args maps argument names to globs (both text)")

    def matches(self, call: ToolCall) -> bool:
        """Whether this rule is about ``call``."""
        if not fnmatch.fnmatchcase(call.name, self.tool):
            return False
        # A deny or an ask holds when the raw text or the normalised path matches; an
        # allow only when both do: a "/srv/../etc" escapes neither way.
        strict = self.action != "allow"
        for name, pattern in self.args.items():
            if name not in call.args or not _arg_matches(_text(call.args[name]), pattern, strict):
                return False
        if self.when is None:
            return True
        try:
            return bool(self.when(dict(call.args)))
        except Exception:
            log.warning("the approval rule for %r could not check a call", self.tool, exc_info=True)
            return self.action != "allow"

    def describe(self) -> str:
        """The rule in a few words (``deny shell_*``)."""
        args = " ".join(f"{k}={v}" for k, v in self.args.items())
        return " ".join(part for part in (self.action, self.tool, args) if part)


@dataclass(frozen=True, slots=True)
class ApprovalDecision:
    """What a policy decided for one call, who decided (``rule``, ``tool`` for the
    tool's own default, ``default``), and why."""

    action: ApprovalAction
    by: str
    reason: str


class ApprovalPolicy(msgspec.Struct, frozen=True):
    """Rules, and what a call no rule matches gets (``default``)."""

    rules: tuple[ApprovalRule, ...] = ()
    default: ApprovalAction = "allow"

    def __post_init__(self) -> None:
        if self.default not in _RANK:
            raise ValueError(f"default must be allow, ask or deny, not {self.default!r}")
        if not all(isinstance(rule, ApprovalRule) for rule in self.rules):
            raise TypeError("rules must be ollm.ApprovalRule objects")

    @property
    def strict(self) -> bool:
        """Whether it may keep a call from running as it comes (a rule, or a default
        other than ``allow``)."""
        return bool(self.rules) or self.default != "allow"

    def with_rules(self, rules: Iterable[ApprovalRule]) -> ApprovalPolicy:
        """This policy with ``rules`` added."""
        return ApprovalPolicy((*self.rules, *rules), self.default)

    def decide(self, call: ToolCall, tool: Tool | None = None) -> ApprovalDecision:
        """The decision for ``call`` (of ``tool``, whose own default comes after the
        rules): deny > ask > allow among the rules that match, else the tool's
        default, else the policy's."""
        best: ApprovalRule | None = None
        for rule in self.rules:
            if (best is None or _RANK[rule.action] > _RANK[best.action]) and rule.matches(call):
                best = rule
        if best is not None:
            return ApprovalDecision(best.action, "rule", best.reason or f"rule {best.describe()}")
        own = tool_default(tool, call) if tool is not None else None
        if own is None:
            return self._default()
        if isinstance(tool.approval, ApprovalHint) and _RANK[own.action] < _RANK[self.default]:  # type: ignore[union-attr]
            # A hint from an untrusted source (an MCP server's annotations) only ever
            # makes the policy stricter.
            return self._default(f"; {own.reason} is not trusted")
        return own

    def _default(self, more: str = "") -> ApprovalDecision:
        if self.default == "allow":
            return ApprovalDecision("allow", "default", "")
        return ApprovalDecision(
            self.default,
            "default",
            f"no rule allows it and the policy's default is {self.default}{more}",
        )

    @classmethod
    def from_toml(cls, text: str, source: str = "the policy") -> ApprovalPolicy:
        """A policy written in TOML (see the module); ``InvalidRequestError`` names what
        is wrong, and where."""
        import tomllib

        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise PolicyError(f"{source} is not valid TOML: {exc}.") from None
        unknown = sorted(set(data) - {"default", "rules"})
        if unknown:
            raise PolicyError(
                f"{source} has {', '.join(map(repr, unknown))}, which a policy does not "
                'take: it holds default = "allow" (or ask, deny) and [[rules]] tables.'
            )
        default = data.get("default", "allow")
        if default not in _RANK:
            raise PolicyError(
                f'{source}: default must be "allow", "ask" or "deny", not {default!r}.'
            )
        rules = data.get("rules", [])
        if not isinstance(rules, list) or not all(isinstance(r, dict) for r in rules):
            raise PolicyError(f"{source}: rules must be [[rules]] tables.")
        return cls(tuple(_rule(r, f"{source}, rule {n}") for n, r in enumerate(rules, 1)), default)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> ApprovalPolicy:
        """The policy in the TOML file ``path``; ``PolicyError`` (``POLICY_INVALID``)
        when it cannot be read or understood: missing, a directory, a dangling
        symbolic link or a loop of them, a FIFO or a device (never waited on),
        unreadable, larger than 1 MiB, not UTF-8, not TOML, or not a policy."""
        return cls.from_toml(read_policy_text(path), f"The approval policy {path}")


def read_policy_text(path: str | os.PathLike[str], named_by: str = "") -> str:
    """The text of the policy file ``path``, read without ever blocking (a FIFO is
    refused, not opened for a writer to come); ``PolicyError`` says what is wrong.
    ``named_by`` says who named the file (``OLLM_POLICY``), for the message."""
    where = f"The approval policy {path}" + (f" (named by {named_by})" if named_by else "")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise PolicyError(
            f"{where} does not exist (or is a symbolic link to nothing). Fix the path: "
            "a policy that cannot be read never means allow."
        ) from None
    except OSError as exc:
        raise PolicyError(f"{where} cannot be opened ({_why(exc)}). {_FIX}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise PolicyError(f"{where} is a folder, not a file. Name the TOML file itself.")
        if not stat.S_ISREG(mode):
            raise PolicyError(
                f"{where} is not a regular file (a FIFO, a socket or a device). {_FIX}"
            )
        data = os.read(fd, MAX_POLICY_BYTES + 1)
        while len(data) <= MAX_POLICY_BYTES:
            more = os.read(fd, MAX_POLICY_BYTES + 1 - len(data))
            if not more:
                break
            data += more
    except OSError as exc:
        raise PolicyError(f"{where} cannot be read ({_why(exc)}). {_FIX}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_POLICY_BYTES:
        raise PolicyError(f"{where} is larger than 1 MiB, which no policy needs. {_FIX}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyError(
            f"{where} is not UTF-8 text ({exc.reason} at byte {exc.start})."
        ) from None


def tool_default(tool: Tool, call: ToolCall) -> ApprovalDecision | None:
    """What ``tool`` asks for its calls (its ``approval``), if anything."""
    approval = getattr(tool, "approval", None)
    if approval is None:
        return None
    if isinstance(approval, ApprovalHint):
        return ApprovalDecision(approval.action, "tool", approval.describe())
    if isinstance(approval, str):
        action = approval
    else:
        try:
            action = approval(dict(call.args))
        except Exception as exc:
            log.warning("the approval check of tool %r failed", call.name, exc_info=True)
            return ApprovalDecision("ask", "tool", f"its approval check failed ({exc})")
        if action not in _RANK:
            return ApprovalDecision("ask", "tool", f"its approval check answered {action!r}")
    reason = {"ask": "the tool asks to be approved", "deny": "the tool does not allow it"}
    return ApprovalDecision(action, "tool", reason.get(action, ""))  # type: ignore[arg-type]


def policy_path(environ: Mapping[str, str] | None = None) -> Path:
    """Where ``ollm chat`` reads its approval policy: ``$OLLM_POLICY``, else
    ``policy.toml`` in ollm's configuration folder (``$XDG_CONFIG_HOME/ollm``,
    ``~/.config/ollm``; ``%APPDATA%\\ollm`` on Windows)."""
    env = os.environ if environ is None else environ
    given = env.get(ENV_POLICY, "").strip()
    if given:
        return Path(given).expanduser()
    home = Path(env.get("HOME") or Path.home())
    if sys.platform == "win32":
        base = Path(env.get("APPDATA") or home / "AppData" / "Roaming")
    else:
        base = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
    return base / "ollm" / "policy.toml"


def _rule(data: dict[str, Any], where: str) -> ApprovalRule:
    unknown = sorted(set(data) - set(_RULE_KEYS))
    if unknown:
        raise PolicyError(
            f"{where} has {', '.join(map(repr, unknown))}; a rule takes {', '.join(_RULE_KEYS)}."
        )
    action = data.get("action")
    if action not in _RANK:
        raise PolicyError(f'{where}: action must be "allow", "ask" or "deny", not {action!r}.')
    tool = data.get("tool", "*")
    args = data.get("args", {})
    reason = data.get("reason", "")
    if not isinstance(tool, str) or not tool:
        raise PolicyError(f'{where}: tool must be a name or a glob such as "fs_*".')
    if not isinstance(args, dict) or not all(isinstance(v, str) for v in args.values()):
        raise PolicyError(
            f'{where}: args must be a table of globs, such as args = {{ path = "/etc/*" }}.'
        )
    if not isinstance(reason, str):
        raise PolicyError(f"{where}: reason must be text.")
    return ApprovalRule(action, tool, args, reason=reason)


def normal_path(text: str) -> str:
    """``text`` as a path with ``.`` and ``..`` resolved, repeated and trailing slashes
    removed and a leading ``//`` made ``/`` (as the text, not on the disk: no symbolic
    link is followed)."""
    normal = posixpath.normpath(text)
    if normal.startswith("//"):
        normal = "/" + normal.lstrip("/")
    return normal


def _arg_matches(value: str, pattern: str, strict: bool) -> bool:
    """Whether an argument's text matches its glob; a path-like glob (one with a ``/``)
    is tried on the normalised path too: either matching is enough for a ``strict``
    rule (deny, ask), both must match for an allow."""
    raw = fnmatch.fnmatchcase(value, pattern)
    if "/" not in pattern or not value:
        return raw
    normal = fnmatch.fnmatchcase(normal_path(value), pattern)
    return (raw or normal) if strict else (raw and normal)


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _text(value: Any) -> str:
    """An argument's value as a rule's glob sees it: a string as it is, else JSON."""
    if isinstance(value, str):
        return value
    from ollm.types.text import encode_json

    return encode_json(value).decode()
