"""``ollm logs``: the logged conversations, listed, searched, shown and removed."""

from __future__ import annotations

import argparse

import msgspec

from ollm.cli import EXIT_OK
from ollm.cli.terminal import Terminal
from ollm.logs import ConversationInfo, LogStore, logs_path
from ollm.types.messages import Message, TextPart

__all__ = ["run_logs"]


def run_logs(args: argparse.Namespace, terminal: Terminal) -> int:
    """Run ``ollm logs [list|show|rm|path]``; return the exit code."""
    action = args.action or "list"
    as_json = bool(getattr(args, "json", False))
    if action == "path":
        terminal.write(f"{logs_path()}\n")
        return EXIT_OK
    with LogStore() as store:
        if action == "list":
            infos = store.list(
                limit=getattr(args, "n", 10),
                model=getattr(args, "model", None),
                query=getattr(args, "query", None),
            )
            _print_list(infos, terminal, as_json)
        elif action == "show":
            info = store.info(args.id)
            messages = store.load(info.id).messages
            if as_json:
                body = {"conversation": info, "messages": messages}
                terminal.write(msgspec.json.encode(body).decode() + "\n")
            else:
                terminal.write(_markdown(info, messages))
        else:
            removed = store.remove(args.id)
            terminal.info(f"deleted conversation {removed}", "dim")
    return EXIT_OK


def _print_list(infos: list[ConversationInfo], terminal: Terminal, as_json: bool) -> None:
    if as_json:
        terminal.write(msgspec.json.encode(infos).decode() + "\n")
        return
    if not infos:
        terminal.info("no conversation logged yet (or none matches)", "dim")
        return
    for info in infos:
        when = info.updated_at.astimezone().strftime("%Y-%m-%d %H:%M")
        model = info.model or "?"
        terminal.write(f"{info.id}  {when}  {model}  ({info.messages} messages)\n")
        if info.preview:
            terminal.write(f"    {info.preview}\n")


def _markdown(info: ConversationInfo, messages: tuple[Message, ...]) -> str:
    when = info.created_at.astimezone().strftime("%Y-%m-%d %H:%M")
    lines = [f"# Conversation {info.id}", ""]
    lines.append(f"{when}, {info.model or '?'} via {info.provider or '?'}")
    if info.prompt_tokens or info.completion_tokens:
        lines.append(f"tokens: {info.prompt_tokens:,} in, {info.completion_tokens:,} out")
    if info.system:
        lines += ["", "## System", "", info.system]
    for message in messages:
        text = "".join(p.text for p in message.parts if isinstance(p, TextPart)).strip()
        if message.role == "user":
            lines += ["", "## User", "", text]
        elif message.role == "assistant":
            lines += ["", "## Assistant" + (" (incomplete)" if message.incomplete else ""), ""]
            if text:
                lines.append(text)
            for call in message.tool_calls:
                args = msgspec.json.encode(call.args).decode()
                lines.append(f"- calls `{call.name}({args})`")
        elif message.role == "tool":
            mark = " (error)" if message.is_error else ""
            lines += ["", f"### Result of `{message.name}`{mark}", "", "```", text, "```"]
        else:
            lines += ["", f"## {message.role.title()}", "", text]
    return "\n".join(lines) + "\n"
