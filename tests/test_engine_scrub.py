"""The one scrubber (engine, integration, telemetry), secret argument names, deciding rules."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import guardrails
from guardrails.agent_framework import _secrets
from guardrails.engine import Action, Decision, Effect, FiredRule, PolicySet, PolicyViolation
from guardrails.engine.decision import REDACTED
from guardrails.engine.policy import RedactPattern
from guardrails.engine.scrub import MIN_SUBSTRING_LENGTH, Scrubber
from guardrails.telemetry import _reason, decision_record
from tests.engine_support import load_text, policy

# -- one implementation, one rule for short values -------------------------------------


def test_integration_and_engine_share_one_scrubber() -> None:
    assert _secrets.Scrubber is Scrubber


def test_short_values_are_replaced_only_as_whole_texts() -> None:
    scrub = Scrubber(["abc", 5, "long-secret"])
    assert MIN_SUBSTRING_LENGTH == 4
    assert scrub("abc") == REDACTED and scrub("5") == REDACTED
    assert scrub("abcdef has 5 fives: 55555") == "abcdef has 5 fives: 55555"
    assert scrub("key=long-secret!") == f"key={REDACTED}!"


def test_longest_value_is_removed_whole_in_one_pass() -> None:
    scrub = Scrubber(["secret", "my-secret-key"])
    assert scrub("a my-secret-key and a secret") == f"a {REDACTED} and a {REDACTED}"


def test_every_spelling_of_a_value_is_scrubbed() -> None:
    scrub = Scrubber([{"nested": [123456.0, b"bytes-val"]}, "  padded-val  "])
    assert scrub("n=123456 f=123456.0 b=bytes-val p=padded-val") == (
        f"n={REDACTED} f={REDACTED} b={REDACTED} p={REDACTED}")


def test_a_failing_pattern_blanks_the_whole_text() -> None:
    def broken(text: str) -> str:
        raise RuntimeError("bad pattern")

    assert Scrubber([], broken)("anything at all") == REDACTED


def test_values_are_computed_on_first_use_only() -> None:
    asked: list[int] = []

    def values() -> list[str]:
        asked.append(1)
        return ["computed-late"]

    scrub = Scrubber(values)
    assert asked == []
    assert scrub("x computed-late") == f"x {REDACTED}"
    scrub("again")
    assert asked == [1]


def test_with_values_returns_itself_when_nothing_is_new() -> None:
    base = Scrubber(["known-value"], str.upper)
    assert base.with_values(["known-value"]) is base
    more = base.with_values(["other-value"])
    assert more("known-value other-value x") == f"{REDACTED} {REDACTED} X".upper()


# -- the engine uses it ----------------------------------------------------------------


SHORT_PIN = policy("login", spec="""
    match:
      tools: [login]
    secrets:
      arguments: [pin]
    rules:
      - name: five-boxes
        when: 'true'
        action: deny
        messageExpression: '"5 items in 5 boxes for " + args.user'
      - name: exact
        when: 'true'
        action: warn
        messageExpression: 'string(args.pin)'
""")


def test_engine_short_secret_does_not_blank_every_digit(tmp_path: Path) -> None:
    """Before: a secret 5 turned every "5" of every message into [REDACTED]."""
    ps = load_text(tmp_path, SHORT_PIN)
    d = ps.evaluate("login", {"user": "bob", "pin": 5})
    messages = {r.rule: r.message for r in d.rules}
    assert messages["five-boxes"] == "5 items in 5 boxes for bob"
    assert messages["exact"] == REDACTED  # the whole text is the secret
    assert d.to_dict()["arguments"]["pin"] == REDACTED  # by name, whatever its length


def test_engine_survives_a_failing_redact_pattern(tmp_path: Path) -> None:
    """Before: a pattern raising at substitution escaped ``evaluate`` (which never raises)."""

    class Broken:
        def sub(self, replacement: str, text: str) -> str:
            raise RuntimeError("pattern failed")

    ps = load_text(tmp_path, SHORT_PIN)
    [compiled] = ps.policies
    broken = dataclasses.replace(compiled, redact=(RedactPattern("b", Broken(), "x"),))
    d = PolicySet([broken], revision="r").evaluate("login", {"user": "bob", "pin": 5})
    assert d.effect is Effect.DENY
    assert {r.message for r in d.rules} == {REDACTED}


def test_telemetry_blanks_quoted_values_with_the_same_scrubber() -> None:
    d = Decision(id="x", tool="t", effect=Effect.DENY,
                 arguments={"to": "mallory@example.com", "n": 5},
                 rules=(FiredRule("p", "r", Action.DENY, "no mail to mallory@example.com, 5"),))
    rec = decision_record(d)
    assert rec["rules"][0]["message"] == f"no mail to {REDACTED}, 5"
    assert rec["message"] == f"no mail to {REDACTED}, 5"


# -- one meaning of secret_arguments ---------------------------------------------------


INJECTING = policy("api", spec="""
    match:
      tools: [call_api]
    secrets:
      arguments: [pin]
      inject:
        api_key: {env: SOME_ENV}
    rules:
      - name: r
        when: 'false'
        action: deny
        message: m
""")


def test_decision_secret_arguments_include_injected_names(tmp_path: Path) -> None:
    ps = load_text(tmp_path, INJECTING)
    d = ps.evaluate("call_api", {"api_key": "model-sent-key-123"})
    assert d.secret_arguments == frozenset({"pin", "api_key"})
    assert d.secret_arguments == ps.secret_arguments("call_api")
    assert "model-sent-key-123" not in json.dumps(d.to_dict())


# -- one "deciding rules" --------------------------------------------------------------


def _decision(effect: Effect, *rules: FiredRule, **kw: Any) -> Decision:
    return Decision(id="d1", tool="t", effect=effect, arguments={}, rules=rules, **kw)


def test_deciding_rules_are_the_effects_non_audit_rules() -> None:
    halt = FiredRule("p", "stop", Action.HALT, "stop now")
    audit = FiredRule("q", "would-stop", Action.HALT, "audit only", audit=True)
    deny = FiredRule("p", "no", Action.DENY, "denied")
    warn = FiredRule("p", "hmm", Action.WARN, "careful")
    d = _decision(Effect.HALT, warn, deny, audit, halt, policies=("p", "q"))
    assert d.deciding_rules == (halt,)
    assert d.message == "stop now"
    assert _reason(d) == "halt by rule p/stop"
    assert str(PolicyViolation(d)) == "run halted by p/stop (decision d1)"


def test_without_deciding_rules_all_three_fall_back_alike() -> None:
    audit = FiredRule("q", "would-stop", Action.HALT, "audit only", audit=True)
    d = _decision(Effect.HALT, audit, policies=("p",))
    assert d.deciding_rules == ()
    assert d.message == "halt by default action of policy p"
    assert _reason(d) == "halt by default action (p)"
    assert str(PolicyViolation(d)) == "run halted by p (decision d1)"


def test_a_secret_set_by_a_repair_is_scrubbed_even_after_an_early_scrub(tmp_path: Path) -> None:
    """A match.when error scrubs before repairs run; the repaired secret must still go."""
    path = tmp_path / "p.yaml"
    path.write_text("""
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: early}
spec:
  match: {when: 'principal.missing == 1'}
  secrets: {arguments: [token]}
  repairs:
    - name: normalise
      set: {token: 'args.token.upperAscii()'}
  rules:
    - name: quote
      when: 'true'
      action: deny
      messageExpression: '"token is " + args.token'
""")
    policies = guardrails.load(path)
    d = policies.evaluate("t", {"token": "tok-repaired-secret"}, principal={})
    assert d.errors and d.errors[0].element == "match.when"
    assert d.message == "token is [REDACTED]"
    assert "TOK-REPAIRED-SECRET" not in repr(d.to_dict())


# -- spellings and many values ---------------------------------------------------------

_VALUE_CHARS = st.sampled_from(list("abcxyz019\"'\\\n\tñ€𝄞 -"))


@settings(max_examples=150, deadline=None)
@given(values=st.lists(st.text(_VALUE_CHARS, min_size=4, max_size=24), min_size=1, max_size=40),
       filler=st.text(st.sampled_from(list("pqr <>{}")), max_size=8))
def test_every_spelling_of_every_value_is_removed(values: list[str], filler: str) -> None:
    """Raw, JSON-escaped (both ways) and repr-escaped, with few values (the per-needle scan)
    or many (one RE2 search): the same result, and no value survives in any spelling."""
    scrub = Scrubber(values)
    serialized = [filler.join(values), json.dumps(values), json.dumps(values, ensure_ascii=False),
                  repr(values), str(KeyError(filler.join(values))), ascii(values),
                  json.dumps(repr(values)), json.dumps([str(v.encode()) for v in values]),
                  json.dumps(repr(values), ensure_ascii=False)]
    for text in serialized:
        out = scrub(text)
        for v in values:
            for form in (v, json.dumps(v)[1:-1], json.dumps(v, ensure_ascii=False)[1:-1],
                         repr(v)[1:-1], ascii(v)[1:-1], json.dumps(repr(v)[1:-1])[1:-1],
                         repr(v.encode())[2:-1]):
                assert form not in out.replace(REDACTED, "\0"), (form, out)


def test_many_values_take_the_same_path_as_few() -> None:
    values = [f"value-{i:03d}-\"q\"" for i in range(200)]
    many, few = Scrubber(values), Scrubber(values[:3])
    text = f"a {values[1]} b {json.dumps(values[2])} c"
    assert many(text) == few(text) == 'a [REDACTED] b "[REDACTED]" c'


def test_a_scrubber_pickles_with_its_values_and_patterns() -> None:
    import pickle

    from guardrails.engine.evaluate import Redactor

    pattern = RedactPattern("k", __import__("re2").compile("k-[0-9]+"), "[K]")
    scrub = Scrubber(lambda: ["lazy-secret"], Redactor([pattern]))
    copy = pickle.loads(pickle.dumps(scrub))
    assert copy("x lazy-secret k-123") == "x [REDACTED] [K]"


def test_layers_remove_values_that_contain_or_overlap_each_other() -> None:
    memory = Scrubber([f"memory-{i:04d}-value" for i in range(100)])  # one RE2 search
    call = memory.with_values(["0042-value-and-more", "x-memory-0007"])
    assert call._base is memory  # a layer, not a copy of the memory
    text = "a memory-0042-value-and-more b x-memory-0007-value c"
    assert call(text) == "a [REDACTED] b [REDACTED] c"
    assert memory("memory-0042-value") == REDACTED and call.hides("x-memory-0007")


def test_a_merged_memory_is_one_layer() -> None:
    memory = Scrubber(["first-secret"]).merged(["second-secret"])
    assert memory._base is None
    assert memory("first-secret second-secret") == "[REDACTED] [REDACTED]"


# -- the rough view decodes without a warning ------------------------------------------


@settings(max_examples=300, deadline=None)
@given(text=st.text(st.sampled_from("\\ xnuU0N{}\"'/&%a\n"), max_size=40))
def test_the_rough_views_codec_warns_of_no_escape(text: str) -> None:
    """A backslash after another escape's backslash (``\\\\ ``) started no escape, but was
    not doubled: the codec wrote a DeprecationWarning into the host's warnings (red team
    18). Every backslash that starts no escape is doubled, whatever run it follows."""
    import warnings

    from guardrails.engine import scrub

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rough = scrub._rough("pad-" + text)
    assert rough.startswith("pad-")
