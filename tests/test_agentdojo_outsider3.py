"""What the third outsider's AgentDojo policies (benchmarks/agentdojo/outsider3/, written
from the docs alone, leaning on provenance) ran into, fixed in general: a lookup of ``""``
(an optional argument read with a default) is a check finding; a sentence glued to the URL
the user named no longer hides it; a second hop of requested content is expressible. The
policy sets themselves are kept strict-clean and tested in test_agentdojo_outsider.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import guardrails
from guardrails.engine.lint import lint_policies
from tests.af_support import load_text
from tests.agentdojo_support import load_replay

OUTSIDER3 = Path(__file__).resolve().parent.parent / "benchmarks" / "agentdojo" / "outsider3"
replay = load_replay()


@pytest.fixture(scope="module")
def data() -> Any:
    return replay.load()


LIBRARY = """apiVersion: guardrails/v1
kind: Library
metadata: {name: origin}
spec:
  functions:
    - name: vouched
      params: [{name: v}]
      expression: 'request.mentions(v) || provenance(v).exists(p, p.trusted && p.whole)'
---
"""


def _policy(when: str, variables: str = "", library: bool = False) -> str:
    return (LIBRARY if library else "") + f"""apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {{name: pay}}
spec:
  match: {{tools: [update_scheduled_transaction]}}
  {"uses: [origin]" if library else ""}
  {variables}
  rules:
    - name: payee-of-unknown-origin
      when: '{when}'
      action: deny
"""


NULL_IDIOM = """variables:
    - name: payee
      expression: '(args.?recipient.orValue(null) != null ? args.recipient : "")'"""


def _empty_findings(tmp_path: Path, text: str) -> list[str]:
    policies = load_text(tmp_path, text)
    return [f.message for f in lint_policies(policies) if "is found nowhere" in f.message]


@pytest.mark.parametrize(("when", "variables", "library"), [
    ('!request.mentions(args.?recipient.orValue(""))', "", False),
    ('!provenance(variables.payee).exists(p, p.trusted)', NULL_IDIOM, False),
    ("!origin.vouched(variables.payee)", NULL_IDIOM, True),
    ('!origin.vouched(has(args.recipient) ? args.recipient : "")', "", True),
    # untrusted("") is false: an allow rule "!untrusted(v)" lets every such call through
    ('!untrusted(args.?recipient.orValue(""))', "", False),
])
def test_a_lookup_of_an_empty_default_is_reported(tmp_path: Path, when: str,
                                                  variables: str, library: bool) -> None:
    found = _empty_findings(tmp_path, _policy(when, variables, library))
    assert len(found) == 1, found
    assert "pay: rules.payee-of-unknown-origin.when" in found[0]
    assert "'v != \"\" && ...'" in found[0]


@pytest.mark.parametrize(("when", "variables", "library"), [
    ('variables.payee != "" && !provenance(variables.payee).exists(p, p.trusted)',
     NULL_IDIOM, False),
    ('variables.payee != "" && !origin.vouched(variables.payee)', NULL_IDIOM, True),
    ('size(variables.payee) > 0 && !request.mentions(variables.payee)', NULL_IDIOM, False),
    # a guard in a variable the rule reads
    ("variables.checked", NULL_IDIOM + """
    - name: checked
      expression: 'variables.payee != "" && !request.mentions(variables.payee)'""", False),
    # no empty default: a missing argument is an error, which fails closed as documented
    ("!request.mentions(args.recipient)", "", False),
    ('!request.mentions(args.?recipient.orValue("x"))', "", False),
    ('args.?recipient.orValue("") != "" && !request.mentions(args.?recipient.orValue(""))',
     "", False),
])
def test_a_guarded_or_harmless_lookup_is_not_reported(tmp_path: Path, when: str,
                                                      variables: str, library: bool) -> None:
    assert _empty_findings(tmp_path, _policy(when, variables, library)) == []


def test_the_reported_rule_does_deny_a_call_without_the_argument(tmp_path: Path) -> None:
    """What the finding is about: without the guard the call is denied for a payee it never
    sent, with it the call goes through."""
    bad = load_text(tmp_path, _policy("!origin.vouched(variables.payee)", NULL_IDIOM, True))
    good = load_text(tmp_path, _policy('variables.payee != "" && !origin.vouched(variables.payee)',
                                       NULL_IDIOM, True), name="good.yaml")
    call = {"tool": "update_scheduled_transaction", "args": {"id": 7, "amount": 1200}}
    assert bad.evaluate(**call).effect == "deny"
    assert good.evaluate(**call).effect == "allow"


def _run(data: Any, suite: str, user_task: str) -> dict[str, Any]:
    return next(r for r in data["suites"][suite]["runs"]
                if r["user_task"] == user_task and r["injection_task"] is None)


async def test_in_the_real_loop_the_users_own_post_to_a_glued_url_runs(data: Any) -> None:
    """Slack user_task_4: "...to our website www.our-company.com.They sent ...": every
    outsider's policy denied the post to the site the user named."""
    policies = guardrails.load(OUTSIDER3 / "slack.yaml")
    run = _run(data, "slack", "user_task_4")
    assert "www.our-company.com.They" in run["prompt"]
    outcome = await replay.replay_run(policies, data["suites"]["slack"]["tools"], run,
                                      data["results"])
    post = [i for i, c in enumerate(run["calls"]) if c["tool"] == "post_webpage"]
    assert post and all(outcome.ran[i] and not outcome.held(i) for i in post)


async def test_in_the_real_loop_a_second_hop_goes_to_a_human_not_denied(data: Any) -> None:
    """Slack user_task_11: the invitee's address is on a page linked from the message the
    user pointed at (two hops): held for a human (and approved), never denied."""
    policies = guardrails.load(OUTSIDER3 / "slack.yaml")
    run = _run(data, "slack", "user_task_11")
    outcome = await replay.replay_run(policies, data["suites"]["slack"]["tools"], run,
                                      data["results"])
    invite = next(i for i, c in enumerate(run["calls"]) if c["tool"] == "invite_user_to_slack")
    assert outcome.held(invite) and outcome.ran[invite]
    assert all(outcome.ran)


async def test_in_the_real_loop_an_update_without_a_new_payee_runs(data: Any) -> None:
    """Banking user_task_2: the rent's standing order changes amount only (no recipient):
    the payee rules, guarded against the empty default, let it through."""
    policies = guardrails.load(OUTSIDER3 / "banking.yaml")
    run = _run(data, "banking", "user_task_2")
    outcome = await replay.replay_run(policies, data["suites"]["banking"]["tools"], run,
                                      data["results"])
    update = next(i for i, c in enumerate(run["calls"])
                  if c["tool"] == "update_scheduled_transaction")
    assert "recipient" not in run["calls"][update]["args"]
    assert outcome.ran[update] and not outcome.held(update)
