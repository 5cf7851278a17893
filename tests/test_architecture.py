"""The module structure: no import cycles, and imports that only point one way.

Read from the source (every ``import``, also those inside functions), not from what Python
happens to have loaded, so a lazy import that closes a circle is caught too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "guardrails"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """The ``guardrails`` modules ``path`` imports (``from x import y`` counts ``x.y`` when
    ``x.y`` is a module, else ``x``)."""
    modules = {module_name(p) for p in PACKAGE.rglob("*.py")}
    found: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("guardrails"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if not node.module.startswith("guardrails"):
                continue
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                found.add(sub if sub in modules else node.module)
    return found - {module_name(path)}


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports_of(p) for p in PACKAGE.rglob("*.py")}


def find_cycle(edges: dict[str, set[str]], within: str) -> list[str] | None:
    """A cycle among modules under ``within`` (package ``__init__`` re-exports excluded:
    a package importing its own submodules is not a circle between them)."""
    nodes = {m for m in edges if m.startswith(within) and m != within}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(edges.get(m, set()) & nodes):
            if state.get(n) == 1:
                return [*stack[stack.index(n) :], n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(nodes):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_the_graph_reads_real_imports() -> None:
    edges = graph()
    assert "guardrails.expr.checker" in edges["guardrails.expr.compiler"]
    assert "guardrails.expr.interpreter" in edges["guardrails.expr.compiler"]  # a lazy import
    assert find_cycle({"p.a": {"p.b"}, "p.b": {"p.a"}}, "p") == ["p.a", "p.b", "p.a"]
    assert find_cycle({"p.a": {"p.b"}, "p.b": set()}, "p") is None


@pytest.mark.parametrize("package", ["guardrails.expr", "guardrails"])
def test_no_import_cycles(package: str) -> None:
    edges = graph()
    # The top-level package re-exports: leave out every __init__ for the whole-tree check.
    if package == "guardrails":
        inits = {module_name(p) for p in PACKAGE.rglob("__init__.py")}
        edges = {m: e - inits for m, e in edges.items() if m not in inits}
    assert find_cycle(edges, package) is None


FRONT_END = {
    "guardrails.expr.ast",
    "guardrails.expr.parser",
    "guardrails.expr.macros",
    "guardrails.expr.checker",
    "guardrails.expr.stdlib",
    "guardrails.expr.library",
    "guardrails.expr.values",
    "guardrails.expr.limits",
    "guardrails.expr.program",
}
BACKENDS = {
    "guardrails.expr.closures",
    "guardrails.expr.codegen",
    "guardrails.expr.interpreter",
}


def test_the_front_end_imports_no_backend() -> None:
    edges = graph()
    for module in FRONT_END:
        assert not edges[module] & (BACKENDS | {"guardrails.expr.compiler"}), module


def test_backends_depend_on_the_front_end_only() -> None:
    """Backends never import the compiler (which picks them); generated code may fall back
    to the closures of the same checked tree, and nothing else imports a backend."""
    edges = graph()
    for module in BACKENDS:
        assert "guardrails.expr.compiler" not in edges[module], module
        assert "guardrails.expr.checker" in edges[module], module
    importers = {m for m, targets in edges.items() if targets & BACKENDS}
    assert importers == {"guardrails.expr.compiler", "guardrails.expr.codegen"}
    assert edges["guardrails.expr.codegen"] & BACKENDS == {"guardrails.expr.closures"}
    assert edges["guardrails.expr.closures"] & BACKENDS == set()
    assert edges["guardrails.expr.interpreter"] & BACKENDS == set()


def test_expr_is_standalone() -> None:
    edges = graph()
    for module, targets in edges.items():
        if module.startswith("guardrails.expr"):
            outside = {t for t in targets if not t.startswith("guardrails.expr")}
            assert outside == set(), module


def test_layers_point_one_way() -> None:
    """``agent_framework`` -> ``engine`` -> ``model`` and ``expr``, never back; ``fleet``
    (files, HTTP, SQLite, Redis) is an edge beside ``agent_framework`` that no layer below
    imports and that does not import the framework integration."""
    edges = graph()
    below = {
        "guardrails.engine": ("guardrails.agent_framework", "guardrails.fleet"),
        "guardrails.model": ("guardrails.agent_framework", "guardrails.engine",
                             "guardrails.fleet"),
        "guardrails.expr": (
            "guardrails.agent_framework",
            "guardrails.engine",
            "guardrails.model",
            "guardrails.fleet",
        ),
        "guardrails.fleet": ("guardrails.agent_framework",),
        "guardrails.agent_framework": ("guardrails.fleet",),
    }
    for module, targets in edges.items():
        for layer, forbidden in below.items():
            if module.startswith(layer):
                bad = {t for t in targets if t.startswith(forbidden)}
                assert bad == set(), module
