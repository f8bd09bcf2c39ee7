"""``ollm logs``: the logged conversations, listed, searched, shown and removed.

Listing and showing only read: the log is opened read-only, so they work from a folder
or a database that cannot be written (and create nothing when nothing is logged yet).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ollm.cli import EXIT_OK
from ollm.cli.terminal import Terminal
from ollm.logs import (
    CompactionInfo,
    ConversationInfo,
    DecisionInfo,
    LogStore,
    ResponseInfo,
    logs_path,
)
from ollm.types.messages import Message, TextPart
from ollm.types.text import encode_json

__all__ = ["run_logs"]


def run_logs(args: argparse.Namespace, terminal: Terminal) -> int:
    """Run ``ollm logs [list|show|rm|path]``; return the exit code."""
    action = args.action or "list"
    as_json = bool(getattr(args, "json", False))
    if action == "path":
        terminal.write(f"{logs_path()}\n")
        return EXIT_OK
    with LogStore(readonly=action != "rm") as store:
        if action == "list":
            infos = store.list(
                limit=getattr(args, "n", 10),
                model=getattr(args, "model", None),
                query=getattr(args, "query", None),
            )
            if getattr(args, "data", False):
                _print_data(store, infos, terminal)
            else:
                _print_list(infos, terminal, as_json)
        elif action == "show":
            info = store.info(args.id)
            messages = store.load(info.id).messages
            responses = store.responses(info.id)
            decisions = store.decisions(info.id)
            compactions = store.compactions(info.id)
            if as_json:
                body = {
                    "conversation": info,
                    "messages": messages,
                    "responses": responses,
                    "decisions": decisions,
                    "compactions": compactions,
                }
                terminal.write(encode_json(body).decode() + "\n")
            else:
                terminal.write(_markdown(info, messages, responses, decisions, compactions))
        else:
            removed = store.remove(args.id)
            terminal.info(f"deleted conversation {removed}", "dim")
    return EXIT_OK


def _print_data(store: LogStore, infos: list[ConversationInfo], terminal: Terminal) -> None:
    """The typed output's values of these conversations, one JSON line each, oldest first."""
    for info in reversed(infos):
        for response in store.responses(info.id):
            if response.output is not None:
                terminal.write(response.output + "\n")


def _print_list(infos: list[ConversationInfo], terminal: Terminal, as_json: bool) -> None:
    if as_json:
        terminal.write(encode_json(infos).decode() + "\n")
        return
    if not infos:
        terminal.info("no conversation logged yet (or none matches)", "dim")
        return
    width = max(len(info.short_id) for info in infos)
    for info in infos:
        when = info.updated_at.astimezone().strftime("%Y-%m-%d %H:%M")
        model = info.model or "?"
        fork = f", branched from {info.forked_from}" if info.forked_from else ""
        terminal.write(
            f"{info.short_id:<{width}}  {when}  {model}  ({info.messages} messages{fork})\n"
        )
        if info.preview:
            terminal.write(f"    {info.preview}\n")


def _markdown(
    info: ConversationInfo,
    messages: tuple[Message, ...],
    responses: Sequence[ResponseInfo],
    decisions: Sequence[DecisionInfo] = (),
    compactions: Sequence[CompactionInfo] = (),
) -> str:
    when = info.created_at.astimezone().strftime("%Y-%m-%d %H:%M")
    lines = [f"# Conversation {info.id}", ""]
    lines.append(f"{when}, {info.model or '?'} via {info.provider or '?'}")
    if info.forked_from:
        lines.append(
            f"branched from conversation {info.forked_from} after {info.forked_at} messages"
        )
    if info.prompt_tokens or info.completion_tokens:
        lines.append(f"tokens: {info.prompt_tokens:,} in, {info.completion_tokens:,} out")
    if info.system:
        lines += ["", "## System", "", info.system]
    lines += _compacted(compactions, 0)
    lines += _outcomes(responses, 0)
    for number, message in enumerate(messages, start=1):
        lines += _message(message, decisions)
        lines += _compacted(compactions, number)
        lines += _outcomes(responses, number)
    return "\n".join(lines) + "\n"


def _message(message: Message, decisions: Sequence[DecisionInfo] = ()) -> list[str]:
    text = "".join(p.text for p in message.parts if isinstance(p, TextPart)).strip()
    if message.role == "user":
        return ["", "## User", "", text]
    if message.role == "assistant":
        lines = ["", "## Assistant" + (" (incomplete)" if message.incomplete else ""), ""]
        if text:
            lines.append(text)
        for call in message.tool_calls:
            lines.append(f"- calls `{call.name}({encode_json(call.args).decode()})`")
            if call.original_args is not None:
                asked = encode_json(call.original_args).decode()
                lines.append(f"  (the model asked `{call.name}({asked})`; changed before it ran)")
            for decision in decisions:
                if decision.call_id == call.id:
                    lines.append(f"  {_decision(decision)}")
        return lines
    if message.role == "tool":
        mark = " (error)" if message.is_error else ""
        return ["", f"### Result of `{message.name}`{mark}", "", "```", text, "```"]
    return ["", f"## {message.role.title()}", "", text]


def _decision(decision: DecisionInfo) -> str:
    """``allowed by rule: ...`` / ``denied by person: ...``."""
    verb = "allowed" if decision.decision == "allow" else "denied"
    scope = f" (for the {decision.scope})" if decision.scope in ("chat", "client") else ""
    reason = f": {decision.reason}" if decision.reason else ""
    return f"{verb} by {decision.by or 'no one'}{scope}{reason}"


def _compacted(compactions: Sequence[CompactionInfo], after: int) -> list[str]:
    """A marker for each compaction of a request sent after message number ``after``."""
    lines: list[str] = []
    for c in compactions:
        if c.messages_after != after:
            continue
        done = "left out"  # clear-results shortens them
        if "clear-results" in c.strategy:
            done = "shortened" if c.strategy == "clear-results" else "left out or shortened"
        plural = "s" if c.removed != 1 else ""
        lines += [
            "",
            f"· compacted ({c.strategy}): {c.removed:,} message{plural} {done}, "
            f"{c.tokens_before:,} → {c.tokens_after:,} tokens",
        ]
    return lines


def _outcomes(responses: Sequence[ResponseInfo], after: int) -> list[str]:
    """What went wrong in the chats that ended after message number ``after``."""
    lines: list[str] = []
    for response in responses:
        if response.messages_after != after:
            continue
        if response.unanswered is not None:
            lines += ["", "## User (not answered)", "", response.unanswered]
        if response.output is not None:
            lines += ["", f"> output: `{response.output}`"]
        if response.error_code or response.error_message:
            code = f"[{response.error_code}]" if response.error_code else ""
            lines += ["", f"> error{code}: {response.error_message or ''}".rstrip()]
        elif response.finish_reason == "cancelled":
            lines += ["", "> (cancelled)"]
    return lines
