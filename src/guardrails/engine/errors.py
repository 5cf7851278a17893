"""The public exception a halted run ends with."""

from __future__ import annotations

from guardrails.engine.decision import Decision


class PolicyViolation(Exception):
    """A policy halted the run. ``decision`` says which rules fired and why.

    Raised by the integration's run boundary, only for halts this package minted.
    Its text names the rules and the decision only: exception text ends up in logs and
    in the caller's spans, and rule messages may quote (non-secret) argument values.
    The messages are on ``decision.message``. ``other_failure`` is another failure that
    ended the halted run as well (a sibling call's), kept visible rather than winning.
    """

    # Tracebacks and logs name the type as users import it, not the module defining it.
    __module__ = "guardrails"

    def __init__(self, decision: Decision, *, other_failure: BaseException | None = None) -> None:
        self.decision = decision
        self.other_failure = other_failure
        rules = sorted({f"{r.policy}/{r.rule}" for r in decision.deciding_rules})
        named = ", ".join(rules) or ", ".join(decision.policies) or "policy"
        super().__init__(f"run halted by {named} (decision {decision.id})")
