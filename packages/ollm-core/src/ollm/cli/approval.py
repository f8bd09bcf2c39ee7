"""``ollm chat``'s approval of tool calls: the rules (the policy file and the flags), and
the questions asked at the terminal.

At a terminal, each call a rule (or the tool itself) wants approved is asked about in
turn, on standard error: yes, no, always for this chat, or edit the arguments. Without a
terminal (the prompt piped in), no one can answer: each such call is refused, said in
one line, and the chat goes on.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TextIO

from ollm.cli.terminal import Terminal
from ollm.runtime.client import ChatStream
from ollm.tools.approval import (
    ENV_POLICY,
    ApprovalAction,
    ApprovalPolicy,
    ApprovalRule,
    policy_path,
    read_policy_text,
)
from ollm.types.events import ApprovalRequestEvent
from ollm.types.middleware import Deny
from ollm.types.text import encode_json

__all__ = ["TerminalQuestions", "named_policy", "no_terminal", "policy_from", "user_policy"]

_CHOICES = "[y]es, [n]o, [a]lways in this chat, [e]dit the arguments"


def policy_from(args: argparse.Namespace) -> ApprovalPolicy | None:
    """The chat's approval rules: the user's policy file (if there is one), then the
    flags: ``--approve`` makes the default ``ask`` (a ``deny`` default stays), and
    ``--allow``, ``--ask``, ``--deny`` add rules; ``None`` when neither says anything."""
    policy = user_policy(args)
    rules: list[ApprovalRule] = []
    flags: tuple[tuple[ApprovalAction, list[str]], ...] = (
        ("allow", args.allow),
        ("ask", args.ask),
        ("deny", args.deny),
    )
    for action, globs in flags:
        rules += [ApprovalRule(action, glob, reason=f"--{action} {glob}") for glob in globs]
    if not rules and not args.approve:
        return policy
    policy = (policy or ApprovalPolicy()).with_rules(rules)
    if args.approve and policy.default == "allow":
        policy = ApprovalPolicy(policy.rules, "ask")
    return policy


def named_policy(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> bool:
    """Whether the user named a policy file (``--policy``, ``$OLLM_POLICY``)."""
    env = os.environ if environ is None else environ
    return bool(getattr(args, "policy", None) or env.get(ENV_POLICY, "").strip())


def user_policy(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> ApprovalPolicy | None:
    """The policy file ``--policy`` names, else ``$OLLM_POLICY``'s, else the default one
    (``~/.config/ollm/policy.toml``) when something is there. A file that cannot be read
    or understood raises ``PolicyError``: only a default file that is not there at all
    means no policy."""
    env = os.environ if environ is None else environ
    flag = getattr(args, "policy", None)
    if flag:
        path, named_by = Path(flag).expanduser(), "--policy"
    else:
        path = policy_path(env)
        named_by = ENV_POLICY if env.get(ENV_POLICY, "").strip() else ""
    if not named_by:
        try:
            os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None  # no policy of one's own
        except OSError:
            pass  # reading it says what is wrong
    return ApprovalPolicy.from_toml(read_policy_text(path, named_by), f"The approval policy {path}")


def no_terminal(policy: ApprovalPolicy | None) -> Callable[[ApprovalRequestEvent], Deny]:
    """The answer when no one can be asked (no terminal): the call does not run, and
    the refusal says what would let it run, never a flag already given."""

    def refuse(request: ApprovalRequestEvent) -> Deny:
        call = request.call
        rules = policy.rules if policy is not None else ()
        asking = [r for r in rules if r.action == "ask" and r.matches(call)]
        if asking:
            step = (
                f"The rule {asking[0].describe()} asks whatever an allow rule says: run it "
                "at a terminal to answer"
            )
        elif any(r.action == "allow" and not r.args and r.matches(call) for r in rules):
            step = "Run it at a terminal to answer"
        else:
            step = f"To let it run, allow it: --allow {call.name}"
        why = request.reason or "the tool asks to be approved"
        return Deny(f"it needs approval ({why}), and there is no terminal to ask at. {step}")

    return refuse


class TerminalQuestions:
    """Asks at the terminal about each call waiting for approval, one by one."""

    def __init__(self, terminal: Terminal, stdin: TextIO | None = None) -> None:
        self.terminal = terminal
        self.stdin = stdin or sys.stdin

    def __call__(self, request: ApprovalRequestEvent, stream: ChatStream) -> None:
        """Ask about ``request`` (unless it was answered meanwhile) and answer the stream."""
        if not stream.pending(request.id):
            return  # an "always" before answered it
        call = request.call
        shown = f"{call.name}({_arguments(call.args)})"
        why = f": {request.reason}" if request.reason else ""
        self.terminal.info(f"? {shown} wants your approval{why}", "bold")
        while True:
            answer = self._ask(f"  run it? {_CHOICES}: ")
            if answer is None or answer in ("n", "no"):
                stream.deny(request.id, "the person at the terminal said no")
                return
            if answer in ("y", "yes"):
                stream.approve(request.id)
                return
            if answer in ("a", "always"):
                stream.approve(request.id, scope="chat")
                return
            if answer in ("e", "edit"):
                edited = self._edit(request)
                if edited is not None:
                    stream.approve(request.id, args=edited)
                    return
                continue
            self.terminal.info("  (answer y, n, a or e)", "dim")

    def _edit(self, request: ApprovalRequestEvent) -> dict[str, object] | None:
        self.terminal.info(
            f"  the arguments now: {_arguments(request.call.args, json=True)}", "dim"
        )
        text = self._ask("  the arguments to run it with (a JSON object; empty to go back): ")
        if not text:
            return None
        try:
            value = json.loads(text)
        except ValueError as exc:
            self.terminal.info(f"  that is not JSON ({exc}); try again", "dim")
            return None
        if not isinstance(value, dict):
            self.terminal.info("  the arguments must be a JSON object, {...}; try again", "dim")
            return None
        return value

    def _ask(self, question: str) -> str | None:
        """A line typed at the terminal, stripped and in lower case for a choice;
        ``None`` at the end of input."""
        self.terminal.end_line()
        self.terminal.err.write(self.terminal.style(question, "bold"))
        self.terminal.err.flush()
        line = self.stdin.readline()
        if not line:
            self.terminal.end_line()
            return None
        text = line.strip()
        return text if text.startswith("{") else text.lower()


def _arguments(args: dict[str, object], *, json: bool = False) -> str:
    if json:
        return encode_json(args).decode()
    return ", ".join(f"{key}={encode_json(value).decode()}" for key, value in args.items())
