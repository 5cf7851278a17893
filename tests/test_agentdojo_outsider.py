"""The outsider's AgentDojo policies (benchmarks/agentdojo/outsider/, written from the docs
alone) stay valid, strict-clean against the suites' tool schemas and tested; and the fixes
their writing led to hold: a library's functions are named by their qualified name in
error hints, quoted e-mail addresses are found by provenance in the real loop."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Agent, Content

import guardrails
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import text
from guardrails.engine.lint import lint
from guardrails.testing import run_tests
from tests.af_support import load_text
from tests.agentdojo_support import load_replay

ROOT = Path(__file__).resolve().parent.parent
OUTSIDER = ROOT / "benchmarks" / "agentdojo" / "outsider"
OUTSIDERS = (OUTSIDER, ROOT / "benchmarks" / "agentdojo" / "outsider2",
             ROOT / "benchmarks" / "agentdojo" / "outsider3",
             ROOT / "benchmarks" / "agentdojo" / "shipped")
"""The outsiders' policy sets (and the third's on the shipped library, shipped/): each stays
strict-clean and fully tested (test_agentdojo_outsider2.py
and test_agentdojo_outsider3.py hold the second's and third's own tests)."""
SUITES = ("banking", "slack", "travel", "workspace")


replay = load_replay()


@pytest.fixture(scope="module")
def data() -> Any:
    return replay.load()


@pytest.mark.parametrize("outsider", OUTSIDERS, ids=lambda d: d.name)
@pytest.mark.parametrize("suite", SUITES)
def test_policies_are_strict_clean_against_the_tools(suite: str, outsider: Path,
                                                     data: Any) -> None:
    policies = guardrails.load(outsider / f"{suite}.yaml")
    tools = {t["name"]: t["parameters"] for t in data["suites"][suite]["tools"]}
    findings = [f for f in lint(policies, tools) if f.severity != "info"]
    assert findings == []


@pytest.mark.parametrize("outsider", OUTSIDERS, ids=lambda d: d.name)
@pytest.mark.parametrize("suite", SUITES)
def test_policy_tests_pass_and_cover_every_rule(suite: str, outsider: Path) -> None:
    report = run_tests(outsider / f"{suite}.tests.yaml")
    assert report.passed and report.results
    assert not report.uncovered


def test_replay_takes_another_policy_directory(data: Any) -> None:
    run = next(r for r in data["suites"]["travel"]["runs"]
               if r["user_task"] == "user_task_3" and r["injection_task"] is None)
    figures = asyncio.run(replay.replay_suite("travel", data, runs=[run], policy_dir=OUTSIDER))
    # The wife's address the user quoted ('janeLong@google.com') is hers: the mail is sent.
    assert figures["all"]["legit_calls"] == len(run["calls"])
    assert figures["all"]["legit_calls_denied"] == 0


LIBRARY = """
apiVersion: guardrails/v1
kind: Library
metadata: {name: origin}
spec:
  functions:
    - name: named
      params: [{name: v}]
      expression: 'request.mentions(v)'
    - name: both
      params: [{name: a}, {name: b}]
      expression: BODY
---
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: p}
spec:
  match: {tools: [send]}
  rules:
    - {name: r, when: WHEN, action: deny}
"""


def _problems(tmp_path: Path, body: str, when: str) -> str:
    path = tmp_path / "p.yaml"
    path.write_text(LIBRARY.replace("BODY", json.dumps(body)).replace("WHEN", json.dumps(when)))
    with pytest.raises(guardrails.PolicyError) as e:
        guardrails.load(path)
    return str(e.value)


def test_an_unqualified_call_in_a_library_body_says_the_qualified_name(tmp_path: Path) -> None:
    message = _problems(tmp_path, "named(a) && origin.named(b)", "origin.both(args.a, args.b)")
    assert "library function origin.both: unknown function 'named'" in message
    assert "write 'origin.named'" in message


def test_an_unqualified_call_in_a_rule_says_the_qualified_name(tmp_path: Path) -> None:
    message = _problems(tmp_path, "origin.named(a)", "!named(args.to)")
    assert "unknown function 'named'" in message and "write 'origin.named'" in message


def test_an_unknown_function_no_library_defines_gets_no_library_hint(tmp_path: Path) -> None:
    message = _problems(tmp_path, "origin.named(a)", "!nameless(args.to)")
    assert "unknown function 'nameless'" in message and "qualified" not in message


MAIL = """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: book}
spec:
  match: {tools: [contacts]}
  results: trusted
---
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: mail}
spec:
  match: {tools: [send_email]}
  rules:
    - name: unknown
      when: '!provenance(args.to).exists(p, p.source == "result" && p.trusted)'
      action: deny
"""


@pytest.mark.parametrize(("to", "sent"), [("sarah.baker@gmail.com", True),
                                          ("Sarah.Baker@gmail.com", True),
                                          ("brien@x.com", False)])
def test_quoted_addresses_in_results_are_found_in_the_real_loop(
        tmp_path: Path, to: str, sent: bool) -> None:
    """A trusted address book printed as a Python dict vouches for its addresses; a quote
    inside a local part does not split an address (``brien@x.com`` is not
    ``o'brien@x.com``)."""
    policies = load_text(tmp_path, MAIL)
    outbox: list[str] = []

    def contacts() -> str:
        return "[{'name': 'Sarah', 'email': 'sarah.baker@gmail.com'}, {'email': \"o'brien@x.com\"}]"

    def send_email(to: str) -> str:
        outbox.append(to)
        return "sent"

    client = ScriptedChatClient([
        [Content.from_function_call(call_id="c0", name="contacts", arguments={})],
        [Content.from_function_call(call_id="c1", name="send_email", arguments={"to": to})],
        [text("done")]])
    agent = Agent(client=client, tools=[contacts, send_email], middleware=guard(policies))
    asyncio.run(agent.run("mail my contact"))
    assert outbox == ([to] if sent else [])


def test_a_name_defined_in_two_files_says_they_load_as_one_set(tmp_path: Path) -> None:
    """Two deployments' policy files in one directory: the duplicate says why it is one."""
    doc = ("apiVersion: guardrails/v1\nkind: Library\nmetadata: {name: origin}\n"
           "spec:\n  functions:\n    - {name: f, expression: 'true'}\n")
    (tmp_path / "a.yaml").write_text(doc)
    (tmp_path / "b.yaml").write_text(doc)
    with pytest.raises(guardrails.PolicyError) as e:
        guardrails.load(tmp_path)
    assert "duplicate library name 'origin'" in str(e.value)
    assert "load the policies of different deployments separately" in str(e.value)
    (tmp_path / "b.yaml").unlink()
    (tmp_path / "a.yaml").write_text(doc + "---\n" + doc)
    with pytest.raises(guardrails.PolicyError) as e:
        guardrails.load(tmp_path)
    assert "duplicate library name 'origin'" in str(e.value)
    assert "deployments" not in str(e.value)


PATTERNS = """
apiVersion: guardrails/v1
kind: Library
metadata: {name: o}
spec:
  params: {bad: '(?<=x)'}
  functions:
    - name: asked
      params: [{name: pattern, type: string}]
      expression: 'request.text.matches("(?i)" + pattern)'
    - name: askedAny
      params: [{name: pattern}]
      expression: 'o.asked(pattern)'
---
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: p}
spec:
  match: {tools: [x]}
  uses: [o]
  params: {ok: book, lookbehind: '(?<=x)'}
  rules:
    - {name: literal, when: WHEN, action: deny}
"""


@pytest.mark.parametrize(("when", "bad"), [
    # a pattern a library function builds from a constant argument is a constant
    ('o.asked("(?<=book)")', True),
    ('o.asked(params.lookbehind)', True),
    ('o.askedAny(params.bad)', True),
    # ... and so is a concatenation of literals and params written in the rule
    ('request.text.matches("(?i)" + "(?<=book)")', True),
    ('request.text.matches("(?i)" + params.lookbehind)', True),
    # valid, or not constant: nothing to report
    ('o.asked("\\\\b(book|reserv)")', False),
    ('o.asked(params.ok)', False),
    ('o.asked(args.x)', False),
    ('request.text.matches("(?i)" + "book")', False),
])
def test_a_constant_pattern_re2_rejects_is_a_load_error(tmp_path: Path, when: str,
                                                        bad: bool) -> None:
    """It would fail every call (and so deny every call, fail closed), however the
    pattern reaches the regex function."""
    path = tmp_path / "p.yaml"
    path.write_text(PATTERNS.replace("WHEN", json.dumps(when)))
    if not bad:
        guardrails.load(path)
        return
    with pytest.raises(guardrails.PolicyError) as e:
        guardrails.load(path)
    assert "invalid regular expression" in str(e.value)
    assert "RE2 has no lookahead or lookbehind" in str(e.value)


def test_patterns_of_one_shape_are_checked_apart(tmp_path: Path) -> None:
    """Two rules that differ only in a literal joined into the pattern: the checker's
    cache by tree shape must not let the invalid one pass because the valid one did."""
    rules = ("    - {name: a, when: 'request.text.matches(\"(?i)\" + \"book\")', action: deny}\n"
             "    - {name: b, when: 'request.text.matches(\"(?i)\" + \"(?<=x)\")', "
             "action: deny}\n")
    path = tmp_path / "p.yaml"
    path.write_text(PATTERNS.split("  rules:\n")[0] + "  rules:\n" + rules)
    with pytest.raises(guardrails.PolicyError) as e:
        guardrails.load(path)
    assert "rules.b.when: invalid regular expression '(?i)(?<=x)'" in str(e.value)
    assert "rules.a" not in str(e.value)
