"""A stand-in for ``mcp-server-git`` in the documentation's tests: MCP over stdio.

The documents start ``uvx mcp-server-git``; the docs' world puts a ``uvx`` first on the
PATH that runs this instead (no download, no SDK: it starts in milliseconds). It offers
``status`` and ``log``, which ollm names ``git_status`` and ``git_log``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

TOOLS = [
    {
        "name": "status",
        "description": "Show the working tree status.",
        "inputSchema": {"type": "object", "properties": {}},
    },
    {
        "name": "log",
        "description": "Show the commit log.",
        "inputSchema": {
            "type": "object",
            "properties": {"max_count": {"type": "integer", "description": "How many."}},
        },
    },
]


def answer(request: dict[str, Any]) -> dict[str, Any] | None:
    """The reply to one JSON-RPC message (None for a notification)."""
    method, params = request.get("method"), request.get("params") or {}
    if "id" not in request:
        return None
    result: dict[str, Any]
    if method == "initialize":
        result = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "mcp-server-git", "version": "0"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        text = "On branch main\nnothing to commit" if params.get("name") == "status" else ""
        result = {"content": [{"type": "text", "text": text or "commit 1: the first"}]}
    elif method == "ping":
        result = {}
    else:
        error = {"code": -32601, "message": f"Method not found: {method}"}
        return {"jsonrpc": "2.0", "id": request["id"], "error": error}
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = answer(json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
