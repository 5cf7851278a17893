"""Bindings, ``match.agents`` and counters in the engine (loader and evaluation)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import guardrails
from guardrails.engine.counters import CounterRequest, MemoryStore, StoreUnavailable
from tests.engine_support import load_text, policy

PAYMENTS = policy("payments", spec="""
    match: {tools: [send_money]}
    params: {cap: 100}
    rules:
      - name: over-cap
        when: 'args.amount > params.cap'
        action: deny
        message: over the cap
""")


def binding(name: str, spec: str) -> str:
    import textwrap
    body = textwrap.indent(textwrap.dedent(spec).strip(), "  ")
    return (f"apiVersion: guardrails/v1\nkind: PolicyBinding\nmetadata:\n  name: {name}\n"
            f"spec:\n{body}\n")


# --- bindings ------------------------------------------------------------------------


def test_binding_applies_policy_per_tenant_with_its_params_and_mode(tmp_path: Path) -> None:
    ps = load_text(tmp_path, PAYMENTS,
                   binding("acme", """
                       policy: payments
                       match: {when: 'principal.tenant == "acme"'}
                       params: {cap: 1000}
                   """),
                   binding("globex-shadow", """
                       policy: payments
                       mode: audit
                       match: {when: 'principal.tenant == "globex"'}
                   """))
    acme = {"tenant": "acme"}
    assert ps.evaluate("send_money", {"amount": 500}, principal=acme).effect == "allow"
    d = ps.evaluate("send_money", {"amount": 5000}, principal=acme)
    assert d.effect == "deny" and [f"{r.policy}/{r.rule}" for r in d.rules] == [
        "payments@acme/over-cap"]
    # The audit binding records the would-be denial and changes nothing.
    g = ps.evaluate("send_money", {"amount": 500}, principal={"tenant": "globex"})
    assert g.effect == "allow" and g.rules[0].audit and g.rules[0].policy == "payments@globex-shadow"
    # A policy with bindings applies only through them: another tenant is not covered.
    other = ps.evaluate("send_money", {"amount": 5000}, principal={"tenant": "initech"})
    assert other.effect == "allow" and other.policies == ()


def test_switching_a_tenant_from_audit_to_enforce_is_one_field(tmp_path: Path) -> None:
    shadow = binding("acme", "policy: payments\nmode: audit\nmatch: {when: 'principal.tenant == \"acme\"'}")
    live = shadow.replace("mode: audit", "mode: enforce")
    args, who = {"amount": 500}, {"tenant": "acme"}
    assert load_text(tmp_path, PAYMENTS, shadow).evaluate(
        "send_money", args, principal=who).effect == "allow"
    assert load_text(tmp_path, PAYMENTS, live).evaluate(
        "send_money", args, principal=who).effect == "deny"


def test_binding_problems_name_their_position(tmp_path: Path) -> None:
    with pytest.raises(guardrails.PolicyError) as e:
        load_text(tmp_path, PAYMENTS, binding("b", "policy: paymnets\nmode: shadow"))
    messages = {(p.line, p.message.split(":")[0]) for p in e.value.errors}
    texts = " | ".join(p.message for p in e.value.errors)
    assert "invalid value 'shadow'" in texts
    with pytest.raises(guardrails.PolicyError) as e:
        load_text(tmp_path, PAYMENTS, binding("b", "policy: paymnets"))
    (problem,) = e.value.errors
    assert "no policy named 'paymnets'" in problem.message and "did you mean 'payments'" in (
        problem.message)
    lines = (tmp_path / "set.yaml").read_text().splitlines()
    assert lines[problem.line - 1][problem.column - 1:] == "paymnets", messages
    with pytest.raises(guardrails.PolicyError) as e:
        load_text(tmp_path, PAYMENTS, binding("b", "policy: payments\nmatch: {when: 'principal.'}"))
    lines = (tmp_path / "set.yaml").read_text().splitlines()
    assert "principal." in lines[e.value.errors[0].line - 1]


def test_erroring_selector_fails_closed(tmp_path: Path) -> None:
    ps = load_text(tmp_path, PAYMENTS, binding("acme", """
        policy: payments
        match: {when: 'principal.tenant.startsWith("a")'}
    """))
    d = ps.evaluate("send_money", {"amount": 500}, principal={"tenant": 7})
    assert d.effect == "deny" and d.errors[0].element == "binding.match.when"


# --- agents ----------------------------------------------------------------------------


def test_two_agents_same_tool_different_policies(tmp_path: Path) -> None:
    ps = load_text(tmp_path,
                   policy("support-mail", spec="""
                       match: {tools: [send_email], agents: [support]}
                       rules:
                         - {name: outside, when: '!args.to.endsWith("@acme.com")', action: deny}
                   """),
                   policy("sales-mail", spec="""
                       match: {tools: [send_email], agents: [sales, agent-42]}
                       rules:
                         - {name: bulk, when: 'size(args.to) > 40', action: deny}
                   """))
    outside = {"to": "x@other.org"}
    assert ps.evaluate("send_email", outside, agent="support").effect == "deny"
    assert ps.evaluate("send_email", outside, agent="sales").effect == "allow"
    # By id, among the agent's names.
    assert ps.evaluate("send_email", outside, agent=("Sales Bot", "agent-42")).policies == (
        "sales-mail",)
    # An agent no policy names: none applies. An unknown agent: all apply (fail closed).
    assert ps.evaluate("send_email", outside, agent="billing").policies == ()
    assert ps.evaluate("send_email", outside).policies == ("support-mail", "sales-mail")


def test_binding_agents_and_policy_agents_both_hold(tmp_path: Path) -> None:
    ps = load_text(tmp_path, PAYMENTS.replace("tools: [send_money]",
                                              "tools: [send_money], agents: [a, b]"),
                   binding("only-b", "policy: payments\nmatch: {agents: [b, c]}"))
    big = {"amount": 5000}
    assert ps.evaluate("send_money", big, agent="b").effect == "deny"
    assert ps.evaluate("send_money", big, agent="a").effect == "allow"
    assert ps.evaluate("send_money", big, agent="c").effect == "allow"


def test_empty_agents_list_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(guardrails.PolicyError, match="matches no agent"):
        load_text(tmp_path, PAYMENTS.replace("tools: [send_money]", "agents: []"))


# --- counters --------------------------------------------------------------------------

NEW_PAYEES = policy("payees", spec="""
    match: {tools: [send_money]}
    params: {known: [alice]}
    counters:
      - name: new_payees
        key: 'principal.user'
        when: '!(args.to in params.known)'
        window: 7d
        limit: 3
    rules:
      - name: too-many-new-payees
        when: 'counters.new_payees.exceeded'
        action: deny
        messageExpression: '"new payees this week: " + string(counters.new_payees.count)'
      - name: tiny
        when: 'args.amount < 1'
        action: deny
""")


def test_counter_admits_exactly_the_limit_per_key(tmp_path: Path) -> None:
    ps = load_text(tmp_path, NEW_PAYEES)
    store = MemoryStore()
    ann = {"user": "ann"}
    effects = [ps.evaluate("send_money", {"to": f"p{i}", "amount": 5}, principal=ann,
                           counters=store).effect for i in range(5)]
    assert effects == ["allow"] * 3 + ["deny"] * 2
    d = ps.evaluate("send_money", {"to": "p9", "amount": 5}, principal=ann, counters=store)
    assert d.message == "new payees this week: 4"
    # Known payees are not counted and not refused; other users have their own count.
    assert ps.evaluate("send_money", {"to": "alice", "amount": 5}, principal=ann,
                       counters=store).effect == "allow"
    assert ps.evaluate("send_money", {"to": "p1", "amount": 5}, principal={"user": "bob"},
                       counters=store).effect == "allow"


def test_denied_calls_are_not_counted(tmp_path: Path) -> None:
    ps = load_text(tmp_path, NEW_PAYEES)
    store = MemoryStore()
    for i in range(10):  # denied by another rule: their reservations are given back
        assert ps.evaluate("send_money", {"to": f"p{i}", "amount": 0}, principal={"user": "u"},
                           counters=store).effect == "deny"
    for i in range(3):
        assert ps.evaluate("send_money", {"to": f"q{i}", "amount": 5}, principal={"user": "u"},
                           counters=store).effect == "allow"


def test_windows_roll_over(tmp_path: Path) -> None:
    ps = load_text(tmp_path, NEW_PAYEES)
    now = [1_000_000.0]
    store = MemoryStore(clock=lambda: now[0])
    u = {"user": "u"}
    for i in range(3):
        ps.evaluate("send_money", {"to": f"p{i}", "amount": 5}, principal=u, counters=store)
    assert ps.evaluate("send_money", {"to": "x", "amount": 5}, principal=u,
                       counters=store).effect == "deny"
    now[0] += 7 * 86400
    assert ps.evaluate("send_money", {"to": "x", "amount": 5}, principal=u,
                       counters=store).effect == "allow"


def test_cost_expression_counts_amounts(tmp_path: Path) -> None:
    ps = load_text(tmp_path, policy("daily", spec="""
        counters:
          - {name: spent, key: 'principal.tenant', window: 1d, limit: 2000, cost: 'int(args.amount)'}
        rules:
          - {name: over, when: 'counters.spent.exceeded', action: deny}
    """))
    store = MemoryStore()
    t = {"tenant": "acme"}
    assert ps.evaluate("pay", {"amount": 1500}, principal=t, counters=store).effect == "allow"
    assert ps.evaluate("pay", {"amount": 600}, principal=t, counters=store).effect == "deny"
    assert ps.evaluate("pay", {"amount": 500}, principal=t, counters=store).effect == "allow"
    assert ps.evaluate("pay", {"amount": 1}, principal=t, counters=store).effect == "deny"
    # A negative cost (an attempt to "refund" the window) is an error: fail closed.
    d = ps.evaluate("pay", {"amount": -5000}, principal=t, counters=store)
    assert d.effect == "deny" and d.errors[0].element == "counters.spent"


class BrokenStore:
    blocking = False

    def reserve(self, requests: object) -> list[object]:
        raise StoreUnavailable("connection refused")

    def release(self, reservations: object) -> None:
        raise StoreUnavailable("connection refused")


def test_unreachable_store_fails_closed_by_default_and_ignore_is_configurable(
        tmp_path: Path) -> None:
    ps = load_text(tmp_path, NEW_PAYEES)
    d = ps.evaluate("send_money", {"to": "new", "amount": 5}, principal={"user": "u"},
                    counters=BrokenStore())  # type: ignore[arg-type]
    assert d.effect == "deny"
    assert [(e.element, e.handled_as) for e in d.errors] == [("counters.new_payees", "fired")]
    lenient = load_text(tmp_path, NEW_PAYEES.replace("limit: 3", "limit: 3\n      failurePolicy: Ignore"))
    d = lenient.evaluate("send_money", {"to": "new", "amount": 5}, principal={"user": "u"},
                         counters=BrokenStore())  # type: ignore[arg-type]
    assert d.effect == "allow" and d.errors[0].handled_as == "skipped"


def test_counter_load_errors(tmp_path: Path) -> None:
    bad = policy("c", spec="""
        counters:
          - {name: x, key: 'principal.user', window: 7 days, limit: -1}
        rules:
          - {name: r, when: 'counters.y.exceeded', action: deny}
    """)
    with pytest.raises(guardrails.PolicyError) as e:
        load_text(tmp_path, bad)
    text = " | ".join(p.message for p in e.value.errors)
    assert "expected a duration" in text and "an integer >= 0" in text
    fixed = bad.replace("7 days", "7d").replace("-1", "3")
    with pytest.raises(guardrails.PolicyError, match="unknown counter 'y'"):
        load_text(tmp_path, fixed)
    no_counters = policy("n", spec="rules:\n  - {name: r, when: 'counters.y > 1', action: deny}")
    with pytest.raises(guardrails.PolicyError, match="counters"):
        load_text(tmp_path, no_counters)


def test_memory_store_admits_exactly_the_limit_under_threads() -> None:
    store = MemoryStore()
    request = CounterRequest("k", 3600, 500, 1)
    granted: list[bool] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(200):
            (r,) = store.reserve([request])
            with lock:
                granted.append(r.granted)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert granted.count(True) == 500 and store.count("k", 3600) == 500


def test_policy_test_cases_and_eval_name_the_agent(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from guardrails.cli import main
    from guardrails.testing import run_tests

    suite = """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: support-only}
spec:
  match: {tools: [refund], agents: [support]}
  rules:
    - {name: no-refunds, when: 'true', action: deny}
---
apiVersion: guardrails/v1
kind: PolicyTest
metadata: {name: agents}
spec:
  cases:
    - name: support is refused
      call: {tool: refund, agent: support}
      expect: {effect: deny, rules: [support-only/no-refunds]}
    - name: billing is not
      call: {tool: refund, agent: billing}
      expect: {effect: allow, rules: []}
"""
    (tmp_path / "s.yaml").write_text(suite)
    report = run_tests(tmp_path)
    assert report.passed and len(report.results) == 2
    assert main(["eval", str(tmp_path / "s.yaml"), "--tool", "refund", "--agent", "billing"]) == 0
    assert '"effect": "allow"' in capsys.readouterr().out
    assert main(["eval", str(tmp_path / "s.yaml"), "--tool", "refund", "--agent", "support"]) == 0
    assert '"effect": "deny"' in capsys.readouterr().out


def test_policy_tests_preset_counts_to_reach_the_exceeded_branch(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from guardrails.cli import main

    suite = NEW_PAYEES + """---
apiVersion: guardrails/v1
kind: PolicyTest
metadata: {name: payee-limits}
spec:
  cases:
    - name: the fourth new payee of the week is refused
      call: {tool: send_money, args: {to: zed, amount: 5}, principal: {user: u},
             counters: {new_payees: 3}}
      expect: {effect: deny, rules: [payees/too-many-new-payees],
               message: "new payees this week: 4"}
    - name: the third is not
      call: {tool: send_money, args: {to: zed, amount: 5}, principal: {user: u},
             counters: {payees/new_payees: 2}}
      expect: {effect: allow, rules: []}
    - name: a known payee is not counted
      call: {tool: send_money, args: {to: alice, amount: 5}, principal: {user: u},
             counters: {new_payees: 3}}
      expect: {effect: allow}
    - name: tiny
      call: {tool: send_money, args: {to: alice, amount: 0}, principal: {user: u}}
      expect: {effect: deny}
"""
    (tmp_path / "suite.yaml").write_text(suite)
    assert main(["test", str(tmp_path), "--require-coverage"]) == 0, capsys.readouterr().out
    (tmp_path / "suite.yaml").write_text(suite.replace("{new_payees: 3}}", "{new_payees: -3}}",
                                                       1))
    assert main(["test", str(tmp_path)]) == 2
    assert "an integer >= 0" in capsys.readouterr().err


class OddStore:
    blocking = False

    def reserve(self, requests: object) -> list[object]:
        return ["not a result"]

    def release(self, reservations: object) -> None:
        pass


def test_a_store_answering_nonsense_fails_closed(tmp_path: Path) -> None:
    ps = load_text(tmp_path, NEW_PAYEES)
    d = ps.evaluate("send_money", {"to": "new", "amount": 5}, principal={"user": "u"},
                    counters=OddStore())  # type: ignore[arg-type]
    assert d.effect == "deny" and d.errors[0].element == "counters.new_payees"


def test_two_bindings_matching_one_call_count_it_once(tmp_path: Path) -> None:
    ps = load_text(tmp_path, policy("daily", spec="""
        counters:
          - {name: calls, key: 'principal.tenant', window: 1d, limit: 2}
        rules:
          - {name: over, when: 'counters.calls.exceeded', action: deny}
    """), binding("all", "policy: daily"), binding("acme", """
        policy: daily
        match: {when: 'principal.tenant == "acme"'}
    """))
    store = MemoryStore()
    acme = {"tenant": "acme"}
    effects = [ps.evaluate("pay", {}, principal=acme, counters=store).effect for _ in range(3)]
    assert effects == ["allow", "allow", "deny"]
    d = ps.evaluate("pay", {}, principal=acme, counters=store)
    assert d.policies == ("daily@all", "daily@acme")


def test_comparing_a_counter_itself_to_a_number_is_a_load_error(tmp_path: Path) -> None:
    """``counters.x`` is a map: a new user's ``counters.x > 3`` would error on every call
    (and fail closed); the type checker stops it at load, at the operator."""
    bad = NEW_PAYEES.replace("when: 'counters.new_payees.exceeded'",
                             "when: 'counters.new_payees > 3'")
    with pytest.raises(guardrails.PolicyError, match="cannot compare map"):
        load_text(tmp_path, bad)
    fine = NEW_PAYEES.replace("when: 'counters.new_payees.exceeded'",
                              "when: 'counters.new_payees.count > 3'")
    assert load_text(tmp_path, fine).policies
    with pytest.raises(guardrails.PolicyError, match="cost"):
        load_text(tmp_path, NEW_PAYEES.replace("limit: 3", "limit: 3\n      cost: '\"one\"'"))
