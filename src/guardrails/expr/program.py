"""``Program``: what every backend produces from a checked tree, behind one interface.

Backends (``closures``, ``codegen``, ``interpreter``) build ``Program`` records; the front
end (``checker``) never sees them and ``compiler`` picks the backend in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from guardrails.expr import ast
from guardrails.expr.ast import TreeShape
from guardrails.expr.limits import DEFAULT_LIMITS, METER, Limits, Meter, too_deep
from guardrails.expr.stdlib import Activation
from guardrails.expr.values import CelError, CostLimitExceeded

Fn = Callable[[Activation], Any]

Hit = tuple[int, Any, Exception | None]
"""One rule of a fused function that did not evaluate to ``false``: its index, its value,
or what it raised (``codegen.fused_rules``)."""
FusedRun = Callable[[Mapping[str, Any], Meter, int], list[Hit] | None]
"""A fused function: bindings, the call's meter, the index of the first rule to run."""


@dataclass(frozen=True, slots=True)
class Program:
    """A compiled expression: evaluate it as often as needed; it holds no mutable state."""

    source: str
    ast: ast.Node
    _fn: Fn = field(repr=False, compare=False)
    _slots: int = field(default=0, repr=False, compare=False)
    _limits: Limits = field(default=DEFAULT_LIMITS, repr=False, compare=False)
    _direct: bool = field(default=False, repr=False, compare=False)
    """Charge the call's meter itself, not a local copy (``checker.reads_variables``)."""
    shape: TreeShape | None = field(default=None, repr=False, compare=False)
    """The tree's shape (``ast.shape``), when the compiler worked it out: load-time
    checks that depend only on it are done once per shape (``engine.compile``,
    ``engine.typecheck``)."""
    metered: bool = field(default=True, repr=False, compare=False)
    """Whether evaluating it draws on the call's cost budget. Only the cel-python reference
    backend (``interpreter``) keeps none: its cost has no bound, so ``guard()`` refuses
    policies compiled with it (docs/security-model.md, promise 8)."""

    def evaluate(self, bindings: Mapping[str, Any]) -> Any:
        # The call's meter when the engine passes one (see ``limits.Meter``).
        meter = bindings.get(METER)
        start = self._limits.max_cost if meter is None else meter.left
        if start < 0:
            raise CostLimitExceeded("evaluation cost limit exceeded")
        act = Activation(bindings, self._slots, start) if meter is None or not self._direct \
            else MeterActivation(bindings, self._slots, meter)
        try:
            return self._fn(act)
        except CelError:
            raise
        except RecursionError:
            raise too_deep(meter) from None
        except Exception as e:  # fail closed: a non-CEL exception is an evaluation error
            raise CelError(f"evaluation failed: {type(e).__name__}: {e}") from e
        finally:
            if meter is not None and type(act) is Activation:
                meter.left -= start - act.budget


class MeterActivation(Activation):
    """An activation whose budget is the call's meter itself (``Program._direct``): an
    evaluation nested in this one (a variable read) sees what this one spent so far."""

    __slots__ = ("meter",)

    def __init__(self, variables: Mapping[str, Any], slots: int, meter: Meter) -> None:
        self.vars = variables
        self.slots = [None] * slots
        self.meter = meter

    @property
    def budget(self) -> int:
        return self.meter.left

    @budget.setter
    def budget(self, value: int) -> None:
        self.meter.left = value


__all__ = ["Fn", "FusedRun", "Hit", "MeterActivation", "Program"]
