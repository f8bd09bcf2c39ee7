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
import sys
from typing import TextIO

from ollm.cli.terminal import Terminal
from ollm.runtime.client import ChatStream
from ollm.tools.approval import ApprovalAction, ApprovalPolicy, ApprovalRule, policy_path
from ollm.types.events import ApprovalRequestEvent
from ollm.types.middleware import Deny
from ollm.types.text import encode_json

__all__ = ["TerminalQuestions", "no_terminal", "policy_from"]

_CHOICES = "[y]es, [n]o, [a]lways in this chat, [e]dit the arguments"


def policy_from(args: argparse.Namespace) -> ApprovalPolicy | None:
    """The chat's approval rules: the policy file (if there is one), then the flags
    (``--approve``, ``--allow``, ``--ask``, ``--deny``); ``None`` when neither says
    anything."""
    path = policy_path()
    policy = ApprovalPolicy.from_file(path) if path.is_file() else None
    rules = [ApprovalRule("ask", "*", reason="--approve")] if args.approve else []
    flags: tuple[tuple[ApprovalAction, list[str]], ...] = (
        ("allow", args.allow),
        ("ask", args.ask),
        ("deny", args.deny),
    )
    for action, globs in flags:
        rules += [ApprovalRule(action, glob, reason=f"--{action} {glob}") for glob in globs]
    if not rules:
        return policy
    return (policy or ApprovalPolicy()).with_rules(rules)


def no_terminal(request: ApprovalRequestEvent) -> Deny:
    """The answer when no one can be asked (no terminal): the call does not run."""
    name = request.call.name
    return Deny(
        f"it needs approval ({request.reason or 'the tool asks to be approved'}), and there "
        f"is no terminal to ask at. To let it run, allow it: --allow {name}"
    )


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
