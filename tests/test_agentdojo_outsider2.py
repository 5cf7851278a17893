"""The second outsider's AgentDojo policies (benchmarks/agentdojo/outsider2/, allow-lists
written from the docs alone) stay valid, strict-clean against the suites' tool schemas and
tested; and the fixes their writing led to hold in the real loop."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import guardrails
from guardrails.engine.lint import lint, lint_policies
from tests.agentdojo_support import load_replay

ROOT = Path(__file__).resolve().parent.parent
OUTSIDER2 = ROOT / "benchmarks" / "agentdojo" / "outsider2"
"""Strict-clean and fully tested with the first outsider's, in test_agentdojo_outsider.py."""

replay = load_replay()


@pytest.fixture(scope="module")
def data() -> Any:
    return replay.load()


def _run(data: Any, suite: str, task: str, injection: str | None = None) -> dict[str, Any]:
    run = next(r for r in data["suites"][suite]["runs"]
               if r["user_task"] == task and r["injection_task"] == injection)
    figures = asyncio.run(replay.replay_suite(suite, data, runs=[run], policy_dir=OUTSIDER2))
    return dict(figures["all"])


def test_a_booking_on_days_the_user_gave_without_a_year_runs_in_the_real_loop(
        data: Any) -> None:
    # "from January 11th to January 15th 2025": the first day has no year after it; it is
    # the user's day, so the booking of the hotel the user named runs without a human.
    figures = _run(data, "travel", "user_task_0")
    assert figures["legit_calls_denied"] == 0
    assert figures["legit_writes"] == 1
    assert figures["legit_writes_needing_approval"] == 0


def _load(tmp_path: Path, rules: str, head: str = "  defaultAction: deny\n",
          tools: str = "[send_money]") -> guardrails.PolicySet:
    path = tmp_path / "p.yaml"
    path.write_text("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\n"
                    f"spec:\n  match: {{tools: {tools}}}\n{head}"
                    "  params: {known: [GB29NWBK60161331926819], large: 5000}\n"
                    f"  rules:\n{rules}", encoding="utf-8")
    return guardrails.load(path)


ALLOW_KNOWN = ("    - {name: known, when: 'args.recipient in params.known', action: allow}\n")


def _approval_findings(policies: guardrails.PolicySet) -> list[str]:
    return [f.message for f in lint_policies(policies) if "go to a human instead" in f.message]


@pytest.mark.parametrize("when", [
    "args.amount > params.large",                                  # the restriction alone
    'tool.name == "send_money" && args.amount > params.large',     # naming the tool is not it
    "args.amount > params.large || args.recipient in params.known",  # an || is no conjunct
])
def test_an_approval_rule_in_an_allowlist_that_names_no_allow_condition_is_reported(
        tmp_path: Path, when: str) -> None:
    policies = _load(tmp_path, ALLOW_KNOWN + f"    - {{name: large, when: '{when}', "
                                              "action: require_approval}\n")
    assert len(_approval_findings(policies)) == 1
    # ... and it is what the finding says: an unknown payee goes to a human, not denied.
    d = policies.evaluate(tool="send_money", args={"recipient": "US133000000121212121212",
                                                   "amount": 9000.0})
    assert d.effect == "require_approval"


@pytest.mark.parametrize("when", [
    "args.recipient in params.known && args.amount > params.large",    # a restriction
    "!(args.recipient in params.known) && args.amount < 10.0",        # a permit with a human
])
def test_an_approval_rule_that_names_the_allow_condition_is_not_reported(
        tmp_path: Path, when: str) -> None:
    policies = _load(tmp_path, ALLOW_KNOWN + f"    - {{name: large, when: '{when}', "
                                              "action: require_approval}\n")
    assert _approval_findings(policies) == []


def test_approval_rules_outside_allowlists_are_not_reported(tmp_path: Path) -> None:
    # Default allow: a restriction, as meant. Default deny without allow rules: approval
    # is the only permit ("denied unless a human agrees"), as meant.
    rule = "    - {name: large, when: 'args.amount > params.large', action: require_approval}\n"
    assert _approval_findings(_load(tmp_path, ALLOW_KNOWN + rule, head="")) == []
    assert _approval_findings(_load(tmp_path, rule)) == []


def test_the_restriction_in_a_policy_of_its_own_denies_unknown_payees(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: payees}\nspec:\n"
        "  match: {tools: [send_money]}\n  defaultAction: deny\n"
        "  params: {known: [GB29NWBK60161331926819]}\n  rules:\n" + ALLOW_KNOWN
        + "---\napiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: amounts}\n"
        "spec:\n  match: {tools: [send_money]}\n  rules:\n"
        "    - {name: large, when: 'args.amount > 5000', action: require_approval}\n",
        encoding="utf-8")
    policies = guardrails.load(path)
    assert _approval_findings(policies) == []
    unknown = policies.evaluate(tool="send_money", args={
        "recipient": "US133000000121212121212", "amount": 9000.0})
    known = policies.evaluate(tool="send_money", args={
        "recipient": "GB29NWBK60161331926819", "amount": 9000.0})
    assert (unknown.effect, known.effect) == ("deny", "require_approval")
    # The denial names the allowlist whose default denied, not the other policy.
    assert unknown.message == "deny by default action of policy payees"


SCHEMA = {"type": "object", "required": ["title"], "properties": {
    "title": {"type": "string"},
    "participants": {"anyOf": [{"type": "array", "items": {"type": "string"}},
                               {"type": "null"}], "default": None},
    "cc": {"type": ["array", "null"], "items": {"type": "string"}},
    "tags": {"type": "array", "items": {"type": "string"}}}}


def _null_findings(tmp_path: Path, when: str) -> list[str]:
    policies = _load(tmp_path, f"    - {{name: r, when: '{when}', action: deny}}\n", head="",
                     tools="[create_event]")
    return [f.message for f in lint(policies, {"create_event": SCHEMA})
            if "allows null" in f.message]


@pytest.mark.parametrize("when", [
    'args.?participants.orValue([]).exists(p, p == "x")',
    'args.?cc.orValue([]).size() > 3',
    'size(args.?participants.orValue([])) > 0 && args.title == "x"',
])
def test_a_default_for_a_nullable_argument_is_reported(tmp_path: Path, when: str) -> None:
    found = _null_findings(tmp_path, when)
    assert len(found) == 1 and "orValue(null) != null ?" in found[0]


@pytest.mark.parametrize("when", [
    '(args.?participants.orValue(null) != null ? args.participants : []).exists(p, p == "x")',
    'args.?tags.orValue([]).exists(t, t == "x")',          # not nullable: [] is right
    'args.?title.orValue("") == "x"',
])
def test_nullable_reads_written_for_null_are_not_reported(tmp_path: Path, when: str) -> None:
    assert _null_findings(tmp_path, when) == []


def test_what_the_nullable_finding_warns_of_happens(tmp_path: Path) -> None:
    ps = _load(tmp_path, "    - {name: r, when: 'args.?participants.orValue([]).exists(p, "
                         "p == \"x\")', action: warn}\n", head="", tools="[create_event]")
    d = ps.evaluate(tool="create_event", args={"title": "t", "participants": None})
    assert d.effect == "deny" and d.errors  # the error fails closed: an allowed event denied


def _catch_all(tmp_path: Path, rules: str, when: str = "") -> list[str]:
    path = tmp_path / "all.yaml"
    path.write_text("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: tools}\n"
                    f"spec:\n  defaultAction: deny\n{when}"
                    "  params: {tools: [get_balance, send_money]}\n"
                    f"  rules:\n{rules}", encoding="utf-8")
    tools = {t: {"type": "object", "properties": {}} for t in
             ("get_balance", "send_money", "read_file")}
    return [f.message for f in lint(guardrails.load(path), tools)
            if "every call of" in f.message]


def test_a_tool_missing_from_a_catch_all_allowlist_is_reported(tmp_path: Path) -> None:
    found = _catch_all(tmp_path, "    - {name: known, when: 'tool.name in params.tools', "
                                 "action: allow}\n")
    assert len(found) == 1 and "'read_file'" in found[0]
    assert "'send_money'" not in found[0]


@pytest.mark.parametrize("rules", [
    "    - {name: a, when: 'tool.name == \"send_money\"', action: allow}\n"
    "    - {name: b, when: 'tool.name in [\"get_balance\"] && true', action: allow}\n"
    "    - {name: c, when: '!(tool.name in params.tools)', action: require_approval}\n",
    "    - {name: a, when: 'tool.name in params.tools || tool.name == \"read_file\"', "
    "action: allow}\n",
    "    - {name: a, when: 'request.text != \"\"', action: allow}\n",
])
def test_an_allowlist_that_can_permit_every_tool_is_not_reported(
        tmp_path: Path, rules: str) -> None:
    assert _catch_all(tmp_path, rules) == []


def test_a_tool_the_match_condition_leaves_out_is_not_reported(tmp_path: Path) -> None:
    assert _catch_all(tmp_path, "    - {name: known, when: 'tool.name in params.tools', "
                                "action: allow}\n",
                      when="  match: {when: 'tool.name != \"read_file\"'}\n") == []
