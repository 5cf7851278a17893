"""A real MCP server over stdio for red team 27 (tests/test_redteam27_inspected.py): its
tools echo exactly what they received, as JSON.

``share``'s visibility parameter is called ``ctx``, the name under which the framework's
generated MCP function takes its ``FunctionInvocationContext``: the framework binds that
name to the context, so a value the model sends for it never reaches the server, which then
runs with its own default.

``pay``'s ``cc`` is optional with no default in the schema the server advertises (its
validation still defaults it to ``None``): the framework's client sends the run's kwargs
under a declared name the call left out, whatever a later middleware put there.
"""

from __future__ import annotations

import json

from mcp.server.mcpserver import MCPServer

server = MCPServer("docs")


@server.tool()
def share(doc: str, ctx: str = "public") -> str:
    """Share a document (``ctx``: who may see it; echoes what it received)."""
    return "received " + json.dumps({"doc": doc, "ctx": ctx}, sort_keys=True)


@server.tool()
def pay(recipient: str, amount: int, cc: str | None = None) -> str:
    """Pay a recipient (echoes what it received)."""
    return "received " + json.dumps({"recipient": recipient, "amount": amount, "cc": cc},
                                    sort_keys=True)


_pay = server._tool_manager.get_tool("pay")  # a schema written by hand would say so
assert _pay is not None
del _pay.parameters["properties"]["cc"]["default"]


if __name__ == "__main__":
    server.run("stdio")
