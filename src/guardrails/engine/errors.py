"""The public exception a halted run ends with."""

from __future__ import annotations

from guardrails.engine.decision import Decision


class PolicyViolation(Exception):
    """A policy halted the run. ``decision`` says which rules fired and why.

    Raised by the integration's run boundary, only for halts this package minted.
    Its text is the decision's (already scrubbed) message, never argument values.
    """

    def __init__(self, decision: Decision) -> None:
        self.decision = decision
        super().__init__(f"run halted by policy: {decision.message or decision.effect.value}")
