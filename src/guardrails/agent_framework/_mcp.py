"""MCP tools: the names a policy can match them by, whatever prefix the host chose.

``MCPStdioTool(name="bank", tool_name_prefix="bank")`` turns the server's ``send_money``
into the local tool ``bank_send_money``: a policy for ``send_money`` would silently stop
matching. So an MCP tool also answers to ``mcp:<server>/<tool>``, where ``<server>`` is the
name the host gave the MCP tool object and ``<tool>`` is the server's own name for the tool
(no prefix): ``match: {tools: ["mcp:bank/send_money"]}``, ``["mcp:bank/*"]`` for every tool
of a server, ``["mcp:*/send_money"]`` for that tool on any server.

The run boundary sees the agent's tool objects (before the framework expands an MCP tool
into its functions) and records which server each function came from.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import Any

from agent_framework import MCPStdioTool, MCPStreamableHTTPTool, MCPWebsocketTool

from guardrails.agent_framework import _private

__all__ = ["MCP_PREFIX", "register_servers", "tool_aliases"]

MCP_PREFIX = "mcp:"

_MCP_TYPES = (MCPStdioTool, MCPStreamableHTTPTool, MCPWebsocketTool)

# Function tool -> the name of the MCP tool object (server) that generated it.
_SERVERS: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def register_servers(tools: Iterable[Any] | Any) -> None:
    """Remember the server of every function of the MCP tool objects in ``tools``."""
    if tools is None:
        return
    items = tools if isinstance(tools, list | tuple) else [tools]
    for item in items:
        if isinstance(item, _MCP_TYPES):
            server = getattr(item, "name", None)
            if not isinstance(server, str):
                continue
            try:
                functions = list(item.functions)
            except Exception:
                continue
            for function in functions:
                try:
                    _SERVERS[function] = server
                except TypeError:
                    continue


def tool_aliases(function: Any) -> tuple[str, ...]:
    """The other names a tool answers to: ``("mcp:<server>/<tool>",)`` for an MCP tool
    (``mcp:/<tool>`` when its server is unknown), nothing for any other tool."""
    remote = _private.mcp_remote_name(function)
    if remote is None:
        return ()
    try:
        server = _SERVERS.get(function, "")
    except TypeError:
        server = ""
    return (f"{MCP_PREFIX}{server}/{remote}",)
