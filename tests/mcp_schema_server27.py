"""A real MCP server over stdio for red team 27 (tests/test_redteam27_inspected.py): its
tools echo exactly what they received, as JSON.

``share``'s visibility parameter is called ``ctx``, the name under which the framework's
generated MCP function takes its ``FunctionInvocationContext``: the framework binds that
name to the context, so a value the model sends for it never reaches the server, which then
runs with its own default.
"""

from __future__ import annotations

import json

from mcp.server.mcpserver import MCPServer

server = MCPServer("docs")


@server.tool()
def share(doc: str, ctx: str = "public") -> str:
    """Share a document (``ctx``: who may see it; echoes what it received)."""
    return "received " + json.dumps({"doc": doc, "ctx": ctx}, sort_keys=True)


if __name__ == "__main__":
    server.run("stdio")
