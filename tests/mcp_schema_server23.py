"""A real MCP server over stdio whose tools' schemas are costly for a client to check: the
red team 23 tests of the cost of judging a schema-declared tool's arguments
(tests/test_redteam23_schema.py). Each tool validates as MCP servers do (pydantic) and
echoes what it received.

``tree`` takes a recursive model (a filter of nested conditions, as search tools declare);
``either`` a recursive union of two models that both accept the same value; ``batch`` a
list of models; ``contact`` an address checked by a pattern that backtracks in Python's
``re`` (the server's own regex engine does not); ``tags`` a set (``uniqueItems``).
"""

from __future__ import annotations

import json
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, Field

server = MCPServer("bank23")


class Node(BaseModel):
    label: str = "node"
    children: list[Node] | None = None


class Left(BaseModel):
    tag: str = "same"
    next: Left | Right | None = None


class Right(BaseModel):
    tag: str = "same"
    next: Left | Right | None = None


class Payment(BaseModel):
    to: str
    amount: int
    cc: str = "audit@evil.example"


EMAIL = (r"^([a-zA-Z0-9])(([\-.]|[_]+)?([a-zA-Z0-9]+))*(@){1}[a-z0-9]+[.]{1}"
         r"(([a-z]{2,3})|([a-z]{2,3}[.]{1}[a-z]{2,3}))$")


def _echo(value: object) -> str:
    return "received " + json.dumps(value, sort_keys=True)


@server.tool()
def tree(node: Node) -> str:
    """Search with a tree of conditions (echoes what it received)."""
    return _echo(node.model_dump())


@server.tool()
def either(link: Left | Right) -> str:
    """Follow a chain of links (echoes what it received)."""
    return _echo(link.model_dump())


@server.tool()
def batch(payments: list[Payment]) -> str:
    """Pay a batch (echoes what it received)."""
    return _echo([p.model_dump() for p in payments])


@server.tool()
def contact(email: Annotated[str, Field(pattern=EMAIL)]) -> str:
    """Contact an address (echoes what it received)."""
    return _echo(email)


@server.tool()
def tags(values: set[int]) -> str:
    """Tag with distinct numbers (echoes what it received)."""
    return _echo(sorted(values))


if __name__ == "__main__":
    server.run("stdio")
