"""An MCP server written by hand over stdio, as a server of another SDK (or another era)
would answer: protocol 2025-11-25 only, keys in its own order.

Its tools:

- ``report``: ``execution.taskSupport`` is ``required`` (a plain call fails with -32601);
- ``deep``: answers with structured content nested ``levels`` deep, with its ``id`` written
  after the ``result`` (a parser that cannot read the result must still find the id);
- ``add``: adds ``a`` and ``b``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

TOOLS = [
    {
        "name": "report",
        "description": "A long report, run as an MCP task.",
        "inputSchema": {"type": "object"},
        "execution": {"taskSupport": "required"},
    },
    {
        "name": "deep",
        "description": "Nested structured content.",
        "inputSchema": {"type": "object", "properties": {"levels": {"type": "integer"}}},
    },
    {
        "name": "add",
        "description": "Add two whole numbers.",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
]


def answer(request: dict[str, Any]) -> str | None:
    method, ident = request.get("method"), request.get("id")
    if ident is None:
        return None  # a notification
    params = request.get("params") or {}
    if method == "initialize":
        return reply(
            ident,
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw", "version": "1"},
            },
        )
    if method == "tools/list":
        return reply(ident, {"tools": TOOLS})
    if method == "tools/call" and params.get("name") == "deep":
        levels = params["arguments"]["levels"]
        nested = '{"in":' * levels + "{}" + "}" * levels
        text = json.dumps(f"{levels} levels")
        result = f'{{"content":[{{"type":"text","text":{text}}}],"structuredContent":{nested}}}'
        return f'{{"jsonrpc":"2.0","result":{result},"id":{json.dumps(ident)}}}'
    if method == "tools/call" and params.get("name") == "add":
        total = params["arguments"]["a"] + params["arguments"]["b"]
        return reply(ident, {"content": [{"type": "text", "text": str(total)}]})
    error = {"code": -32601, "message": f"Method not found: {method}"}
    return json.dumps({"jsonrpc": "2.0", "id": ident, "error": error})


def reply(ident: object, result: dict[str, Any]) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": ident, "result": result})


def main() -> None:
    for line in sys.stdin:
        out = answer(json.loads(line))
        if out is not None:
            print(out, flush=True)


if __name__ == "__main__":
    main()
