"""A small real MCP server over stdio, for the MCP tests (started by ``MCPStdioTool``).

Its tools echo what they are given, so a test can check what the guard let through and
what it scrubbed: ``send_money`` reports the payment, ``call_api`` echoes the key it was
sent (an injected secret) in its text *and* its structured content, ``failing_api`` raises
an error quoting it, ``statement`` returns a text holding a card number (a redact-pattern
match).
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("bank")


@server.tool()
def send_money(recipient: str, amount: float) -> str:
    """Send money to a recipient."""
    return f"sent {amount} to {recipient}"


@server.tool()
def call_api(endpoint: str, api_key: str) -> dict[str, Any]:
    """Call an API with a key (echoes the key back, as a careless API might)."""
    return {"endpoint": endpoint, "echo": f"authorised with {api_key}"}


@server.tool()
def failing_api(endpoint: str, api_key: str) -> str:
    """Fails, quoting the key it was sent (as careless error messages do)."""
    raise ToolError(f"upstream rejected key {api_key} for {endpoint}")  # shown to the model


@server.tool()
def statement() -> str:
    """The account statement."""
    return "card on file: 4111 1111 1111 1111"


@server.tool()
def unlisted_tool(note: str) -> str:
    """A tool no policy names."""
    return f"noted {note}"


if __name__ == "__main__":
    server.run("stdio")
