"""MCP tools: the names a policy can match them by, whatever prefix the host chose.

``MCPStdioTool(name="bank", tool_name_prefix="bank")`` turns the server's ``send_money``
into the local tool ``bank_send_money``: a policy for ``send_money`` would silently stop
matching. So an MCP tool also answers to ``mcp:<server>/<tool>``, where ``<server>`` is the
name the host gave the MCP tool object and ``<tool>`` is the server's own name for the tool
(no prefix): ``match: {tools: ["mcp:bank/send_money"]}``, ``["mcp:bank/*"]`` for every tool
of a server, ``["mcp:*/send_money"]`` for that tool on any server.

The run boundary hands the agent's MCP tool objects (``Agent.mcp_tools`` and the run's own
tools) to the calls of the run; a call's server is the one whose functions hold the called
function. A function whose server is not found answers to ``mcp:/<tool>``, which no
server-specific glob matches (pair with ``guard(unmatched="deny")`` to fail closed).
"""

from __future__ import annotations

import contextvars
import weakref
from collections.abc import Iterable
from typing import Any

from agent_framework import MCPStdioTool, MCPStreamableHTTPTool, MCPWebsocketTool

from guardrails.agent_framework import _private

__all__ = ["MCP_PREFIX", "RUN_MCP_TOOLS", "register_servers", "run_mcp_tools", "tool_aliases"]

MCP_PREFIX = "mcp:"

_MCP_TYPES = (MCPStdioTool, MCPStreamableHTTPTool, MCPWebsocketTool)

# Function tool -> the name of the MCP tool object (server) that generated it.
_SERVERS: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()

RUN_MCP_TOOLS: contextvars.ContextVar[tuple[Any, ...]] = contextvars.ContextVar(
    "guardrails_run_mcp_tools", default=())
"""The MCP tool objects of the running agent (set by the run boundary). Read when a call
comes, not when the run starts: the agent may connect a server, and load its functions,
only after the boundary ran."""


def run_mcp_tools(agent: Any, tools: Any) -> tuple[Any, ...]:
    """The MCP tool objects of an agent (``Agent.mcp_tools``) and of a run's own tools."""
    found: list[Any] = []
    for source in (getattr(agent, "mcp_tools", None), tools):
        if source is None or (type(source) is list and not source):
            continue  # the common run: no MCP tool, no tool of its own
        if isinstance(source, list | tuple):
            found += [i for i in source if isinstance(i, _MCP_TYPES)]
        elif isinstance(source, _MCP_TYPES):
            found.append(source)
    return tuple(found)


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
    server = _server_of(function)
    if server is None:
        register_servers(RUN_MCP_TOOLS.get())
        server = _server_of(function)
    return (f"{MCP_PREFIX}{server or ''}/{remote}",)


def _server_of(function: Any) -> str | None:
    try:
        return _SERVERS.get(function)
    except TypeError:
        return None
