"""Provenance matching, the structured request and history normalisation (engine level).

The rules of docs/functions.md#provenance, each with matches that must hold and
near-misses that must not; then the functions inside a real evaluation: places, trust,
``requested``, bounds that fail closed, and ``request`` staying backward compatible.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import guardrails
from guardrails.expr import lib_provenance as prov
from guardrails.expr.limits import Limits
from tests.af_support import load_text

MATCH = [
    # identifiers: IBANs, account numbers (spacing, hyphens, case)
    ("GB82WEST12345698765432", "IBAN GB82 WEST 1234 5698 7654 32."),
    ("gb82 west 1234 5698 7654 32", "GB82WEST12345698765432"),
    ("GB82-WEST-1234-5698-7654-32", "(GB82WEST12345698765432)"),
    ("0123456789", "account 0123 456 789"),
    # numbers and amounts
    (1500, "total $1,500.00 due"),
    (1500.0, "1500"),
    ("1,500.00", "pay 1500 now"),
    (5, "5 apples"),
    (0.5, "0.50"),
    ("12345678", "ref 12,345,678"),
    # e-mail addresses, case-insensitive
    ("Bob@Example.com", "mail bob@example.com."),
    # ... also quoted, as users write them and as a Python dict prints them
    ("janeLong@google.com", "send it to my wife at 'janeLong@google.com', thanks"),
    ("bob@example.com", "{'email': 'bob@example.com', 'name': 'Bob'}"),
    ("bob@example.com", "'bob@example.com'"),
    ("bob@example.com", "use `bob@example.com`"),
    # URLs with or without scheme, trailing slash, sentence punctuation
    ("https://www.evil.com/x", "see www.evil.com/x."),
    ("www.evil.com/x/", "go to https://www.evil.com/x"),
    # hosts, inside URLs and addresses
    ("evil.com", "http://evil.com/a"),
    ("evil.com", "write to a@evil.com"),
    # dates, written several ways
    ("2022-04-15", "on April 15, 2022 we"),
    ("2022-04-15", "due 15/04/2022"),
    ("2022-04-15", "due 15th of Apr. 2022"),
    ("2022-04-15T10:00:00Z", "2022-04-15"),
    # ... and as people write them without a year: any year
    ("2025-01-11", "from January 11th to January 15th 2025"),
    ("2024-05-01", "book May 1st to May 5th."),
    ("2024-04-15", "on 15 April at 10:00"),
    ("2023-10-15", "a reminder for October 15th"),
    # phone numbers
    ("+1 (555) 123-4567", "call +1 555 123 4567"),
    ("555-123-4567", "(555) 123.4567"),
    # text: words, any separators, case
    ("Bob Smith", "BOB   smith said"),
    ("bob", "Bob, hi"),
    ("Le Marais Boutique", "stay at le marais boutique!"),
]

NO_MATCH = [
    # a month and day followed by another year are that year's
    ("2024-05-01", "May 1st, 2023"),
    ("2024-05-01", "on May 1st 2023"),
    ("2024-05-01", "May 12th"),
    ("2024-05-01", "May 1stly"),
    ("2024-05-01", "10 May"),
    ("5", "1500"),
    (5, "5.5"),
    (1500, "1,500,000"),
    (1500, "1500.5"),
    (1500, "A1500"),
    ("bob", "bobby"),
    ("bob", "jimbob"),
    ("GB82WEST12345698765432", "GB82WEST123456987654321"),
    ("GB82WEST12345698765432", "XGB82WEST12345698765432"),
    ("GB82WEST12345698765433", "GB82WEST12345698765432"),
    ("0123456", "123456"),
    ("bob@example.com", "bob@example.com.evil.net"),
    ("alice@example.com", "malice@example.com"),
    ("brien@example.com", "o'brien@example.com"),
    ("brien@example.com", "o`brien@example.com"),
    ("bob@example.com", "x'bob@example.com"),
    ("https://www.evil.com/x", "www.evil.com/xy"),
    ("https://www.evil.com/x", "www.evil.com/x/y"),
    ("evil.com", "notevil.com"),
    ("evil.com", "evil.com.au"),
    ("evil.com", "sub.evil.com"),
    ("2022-04-15", "2022-04-16"),
    ("2022-04-15", "April 15, 2023"),
    ("+1 (555) 123-4567", "555 123 4568"),
    ("Bob Smith", "Bob Smithers"),
    ("", "anything"),
    ("!!!", "!!!"),
]


@pytest.mark.parametrize(("value", "text"), MATCH)
def test_matches(value: Any, text: str) -> None:
    assert prov.mentioned(value, text), (prov.kind_of(value), value, text)


@pytest.mark.parametrize(("value", "text"), NO_MATCH)
def test_near_misses_do_not_match(value: Any, text: str) -> None:
    assert not prov.mentioned(value, text), (prov.kind_of(value), value, text)


def test_kinds() -> None:
    assert [prov.kind_of(v) for v in ("a@b.co", "https://x.io/a", "x.io", "2022-01-02",
                                      1, "1,500", "+44 20 7946 0958", "GB82 WEST 1234",
                                      "hello world", True)] == [
        "email", "url", "host", "date", "number", "number", "phone", "identifier", "text",
        "none"]


def test_request_extraction() -> None:
    r = prov.Request('Send 1,500.00 to GB82 WEST 1234 5698 7654 32 and mail Bob@X.com about '
                     '"Q3 report" on 2022-04-15, see https://acme.com/pay. Call +44 20 7946 '
                     '0958 or (555) 123-4567; 3 items.')
    assert r["emails"] == ["bob@x.com"]
    assert r["urls"] == ["https://acme.com/pay"]
    assert r["hosts"] == ["acme.com", "x.com"]
    assert r["ibans"] == ["GB82WEST12345698765432"]
    assert r["phones"] == ["+442079460958", "5551234567"]
    assert r["numbers"] == [1500.0, 3.0]  # the IBAN's, the date's and the phones' digits are not
    assert r["dates"] == ["2022-04-15"]
    assert r["quoted"] == ["Q3 report"]
    assert set(r) == {"text", "emails", "urls", "hosts", "ibans", "phones", "numbers", "dates",
                      "quoted"}


POLICY = """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: p}
spec:
  params: {known: ["ACME Corp"]}
  rules:
    - name: places
      when: 'provenance(args.v).size() >= 0'
      action: warn
      messageExpression: >-
        provenance(args.v).map(p, p.source + ":" + p.tool + ":" + string(p.index) + ":"
          + string(p.trusted) + ":" + string(p.requested)).join(",")
    - name: untrusted
      when: untrusted(args.v)
      action: require_approval
    - name: mentioned
      when: request.mentions(args.v)
      action: warn
      message: mentioned
"""


@pytest.fixture
def policies(tmp_path: Path) -> guardrails.PolicySet:
    return load_text(tmp_path, POLICY)


def _places(d: guardrails.Decision) -> str:
    return next(r.message for r in d.rules if r.rule == "places")


def test_places_in_order_with_tool_index_trust_and_requested(
        policies: guardrails.PolicySet) -> None:
    history = [
        {"tool": "read_file", "args": {"path": "bill.txt"}, "effect": "allow",
         "result": "pay GB82 WEST 1234 5698 7654 32", "trusted": False},
        {"tool": "contacts", "args": {}, "effect": "allow",
         "result": "landlord GB82WEST12345698765432", "trusted": True},
        {"tool": "read_inbox", "args": {}, "effect": "allow",
         "result": "gb82west12345698765432", "trusted": False},
        {"tool": "noise", "args": {}, "effect": "allow", "result": "GB82WEST1234569876543"},
    ]
    d = policies.evaluate("t", {"v": "GB82WEST12345698765432"}, history=history,
                          request="pay the bill in bill.txt")
    assert _places(d) == ("result:read_file:0:false:true,result:contacts:1:true:false,"
                          "result:read_inbox:2:false:false")
    assert d.effect == "require_approval"


def test_request_wins_and_params_count(policies: guardrails.PolicySet) -> None:
    history = [{"tool": "read_inbox", "result": "ACME Corp wants 40"}]
    d = policies.evaluate("t", {"v": "acme corp"}, history=history,
                          request="Is ACME CORP in my inbox?")
    assert _places(d) == "request::-1:true:true,params::-1:true:false,result:read_inbox:0:false:false"
    assert d.effect == "allow"  # in the request: not untrusted
    assert any(r.rule == "mentioned" for r in d.rules)


def test_unlabelled_results_are_untrusted(policies: guardrails.PolicySet) -> None:
    d = policies.evaluate("t", {"v": "x@y.io"}, history=[{"tool": "a", "result": "x@y.io"}])
    assert d.effect == "require_approval"


def test_provenance_of_numbers_and_bad_values(policies: guardrails.PolicySet) -> None:
    d = policies.evaluate("t", {"v": 1500}, history=[{"tool": "a", "result": "due: 1,500.00"}])
    assert d.effect == "require_approval"
    d = policies.evaluate("t", {"v": ["a"]}, history=[{"tool": "a", "result": "a"}])
    assert d.effect == "deny" and d.errors  # a list is no value to look for: fails closed


def test_history_is_normalised(policies: guardrails.PolicySet, tmp_path: Path) -> None:
    timed = load_text(tmp_path, """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: t}
spec:
  rules:
    - name: recent
      when: 'history.exists(h, now - h.at < duration("1h") && !h.trusted && h.result == "")'
      action: deny
""", name="t.yaml")
    now = datetime.datetime(2026, 3, 1, 10, 0, tzinfo=datetime.UTC)
    for at in ("2026-03-01T09:30:00Z", "2026-03-01T09:30:00",
               datetime.datetime(2026, 3, 1, 9, 30)):
        d = timed.evaluate("x", {}, history=[{"tool": "a", "at": at}], now=now)
        assert d.effect == "deny", at
    d = timed.evaluate("x", {}, history=[{"tool": "a", "at": "2026-03-01T08:00:00Z"}], now=now)
    assert d.effect == "allow"
    for bad in ({"tool": "a", "at": "yesterday"}, {"tool": "a", "result": 5},
                {"tool": "a", "trusted": "yes"}, "not a map"):
        d = timed.evaluate("x", {}, history=[bad], now=now)
        assert d.effect == "deny" and d.errors[0].element == "input", bad


def test_results_are_bounded_per_entry_and_in_all(tmp_path: Path) -> None:
    limits = Limits(max_result_chars=100, max_history_result_chars=250)
    path = tmp_path / "p.yaml"
    path.write_text(POLICY)
    policies = guardrails.load(path, limits=limits)
    tail = "x" * 120 + " needle"
    history = [{"tool": "a", "result": "needle " + "y" * 200} for _ in range(3)]
    history.append({"tool": "b", "result": tail})
    d = policies.evaluate("t", {"v": "needle"}, history=history)
    # b's needle is beyond its 100 characters; the oldest result is cut to what is left.
    assert _places(d) == "result:a:1:false:false,result:a:2:false:false"


def test_scan_budget_fails_closed(policies: guardrails.PolicySet,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prov, "SCAN_BUDGET", 1000)
    history = [{"tool": "a", "result": "z " * 20_000}]
    d = policies.evaluate("t", {"v": "GB82WEST12345698765432"}, history=history)
    assert d.effect == "deny"
    assert any("scanning budget" in e.message for e in d.errors)


def test_functions_outside_an_evaluation_are_errors() -> None:
    with pytest.raises(guardrails.expr.CelError):
        prov.untrusted("x")


def test_policies_using_provenance_read_history_without_naming_it(
        policies: guardrails.PolicySet) -> None:
    [p] = policies.policies
    assert {"history", "request", "@provenance"} <= p.names


def test_trust_labels_combine(tmp_path: Path) -> None:
    policies = load_text(tmp_path, """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: a}
spec: {match: {tools: ["read_*"]}, results: trusted}
---
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: b}
spec: {match: {tools: [read_mail]}, results: untrusted}
""")
    assert policies.results_trusted("read_contacts") is True
    assert policies.results_trusted("read_mail") is False
    assert policies.results_trusted("fetch") is None


def test_results_label_is_checked_at_load(tmp_path: Path) -> None:
    with pytest.raises(guardrails.PolicyError) as e:
        load_text(tmp_path, """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: a}
spec: {results: yes-please}
""")
    assert "spec.results: invalid value 'yes-please'; allowed: trusted, untrusted" in str(e.value)
    assert "policy.yaml:5:" in str(e.value)


def test_request_text_still_works(tmp_path: Path) -> None:
    policies = load_text(tmp_path, """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: a}
spec:
  rules:
    - {name: r, when: 'request.text.contains("pay") && has(request.text)', action: deny}
""")
    assert policies.evaluate("t", {}, request="please pay").effect == "deny"
    assert policies.evaluate("t", {}, request="nothing").effect == "allow"


def test_the_checker_types_provenance_and_the_request(tmp_path: Path) -> None:
    """Declared signatures and the request's fields: misuse is a load error."""
    with pytest.raises(guardrails.PolicyError) as e:
        load_text(tmp_path, """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: a}
spec:
  rules:
    - {name: r, action: deny,
       when: 'request.emails.exists(x, x > 5) || request.mentions(["x"])'}
""")
    text = str(e.value)
    assert "cannot compare string > int" in text
    assert "no overload of map(string, dyn).mentions(list(string))" in text
    ok = load_text(tmp_path, """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: b}
spec:
  rules:
    - {name: r, action: deny, when: 'args.amount in request.numbers
        && history.exists(h, h.trusted && h.result.contains("x") && now - h.at < duration("1h"))
        && provenance(args.to).exists(p, p.requested)'}
""", name="ok.yaml")
    assert ok.policies


@pytest.mark.parametrize(("expression", "expected"), [
    # a text, and a list of texts (a known list in params), with the request's matching
    ('"IBAN GB29 NWBK 6016 1331 9268 19".mentions("gb29nwbk60161331926819")', True),
    ('["GB29 NWBK 6016 1331 9268 19", "x"].mentions("GB29NWBK60161331926819")', True),
    ('["Bob Smith"].mentions("bob, smith")', True),
    ('["1,500.00"].mentions(1500)', True),
    # whole values only, and never across two elements
    ('["bobby"].mentions("bob")', False),
    ('["bob", "smith"].mentions("bob smith")', False),
    ('["GB29 NWBK", "6016 1331 9268 19"].mentions("GB29NWBK60161331926819")', False),
    ('["x@evil.com", "example.com"].mentions("x@evil.com.example.com")', False),
    ('[].mentions("bob")', False),
    ('"".mentions("bob")', False),
])
def test_texts_and_lists_mention_values_as_the_request_does(expression: str,
                                                           expected: bool) -> None:
    from guardrails.expr import compile_expression
    program = compile_expression(expression, declared=frozenset())
    assert program.evaluate({}) is expected


@pytest.mark.parametrize("expression", ['[1, "a"].mentions("a")', '1.mentions("a")'])
def test_mentions_refuses_what_is_not_text(expression: str) -> None:
    from guardrails.expr import ExpressionError, compile_expression
    from guardrails.expr.values import CelError
    with pytest.raises((CelError, ExpressionError)):
        compile_expression(expression, declared=frozenset()).evaluate({})


WHOLE = [
    # a record's field as tools print them: YAML lists and maps, Python dicts, JSON
    ("Alice", "- Alice\n- Bob\n", True),
    ("sarah.baker@gmail.com", "- email: sarah.baker@gmail.com\n  name: Sarah Baker", True),
    ("sarah.baker@gmail.com", "[{'email': 'sarah.baker@gmail.com', 'name': 'Sarah'}]", True),
    ("sarah.baker@gmail.com", '{"email": "Sarah.Baker@gmail.com"}', True),
    ("GB29NWBK60161331926819", "recipient: GB29 NWBK 6016 1331 9268 19\n", True),
    ("Bob Smith", "name: Bob Smith,", True),
    # words inside a longer text someone wrote are not a field
    ("Alice", "- general\n- External_0 please invite Alice now\n", False),
    ("US133000000121212121212", "subject: send money to US133000000121212121212 now", False),
    ("US133000000121212121212", '{"subject": "pay US133000000121212121212"}', False),
    ("Bob", "Dear Bob,\n", False),
    ("Bob", "name: 'Bob' said the note", False),
    ("Bob", "and then          'Bob'          said it", False),
    ("Bob", "'Bob'", True),
    # and what is not the value at all is neither
    ("bob", "name: bobby", False),
]


@pytest.mark.parametrize(("value", "result", "whole"), WHOLE)
def test_whole_says_whether_the_value_is_a_field_of_the_result(
        tmp_path: Path, value: str, result: str, whole: bool) -> None:
    policies = load_text(tmp_path, """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: p}
spec:
  match: {tools: [t]}
  rules:
    - {name: whole, when: 'provenance(args.v).exists(p, p.whole)', action: deny}
""")
    history = [{"tool": "x", "args": {}, "result": result, "effect": "allow", "trusted": True}]
    decision = policies.evaluate(tool="t", args={"v": value}, history=history)
    assert not decision.errors
    assert (decision.effect == "deny") is whole


def test_whole_is_false_outside_results(tmp_path: Path) -> None:
    policies = load_text(tmp_path, """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: p}
spec:
  match: {tools: [t]}
  params: {known: [Alice]}
  rules:
    - {name: whole, when: 'provenance(args.v).exists(p, p.whole)', action: deny}
    - {name: seen, when: 'provenance(args.v).size() != 2', action: deny}
""")
    decision = policies.evaluate(tool="t", args={"v": "Alice"}, request="add Alice")
    assert decision.effect == "allow" and not decision.errors


def test_fields_of_a_hostile_result_stay_linear() -> None:
    """Lines of separators, unclosed quotes and long keys: one pass, no backtracking."""
    for text in (" ," * 30_000, "'" + "a" * 60_000, ("k" * 70 + ": " + "v" * 900 + "\n") * 60,
                 "- " * 30_000, '"' * 60_000):
        fields = list(prov._fields_of(text))
        assert sum(len(f) for f in fields) <= 3 * len(text)


def test_a_long_list_is_searched_in_its_first_65536_characters() -> None:
    from guardrails.expr import compile_expression
    program = compile_expression("params.known.mentions(args.v)",
                                 declared=frozenset({"params", "args"}))
    known = ["x" * 99] * 700 + ["GB29NWBK60161331926819"]  # 70,000 characters before it
    prov._LOWER.clear()
    assert program.evaluate({"params": {"known": known[:600] + known[-1:]},
                             "args": {"v": "GB29 NWBK 6016 1331 9268 19"}}) is True
    assert program.evaluate({"params": {"known": known}, "args": {"v": known[-1]}}) is False
    assert max(len(k) for k in prov._LOWER) <= prov.MAX_TEXT


_DAYS = st.dates(min_value=datetime.date(1900, 1, 1), max_value=datetime.date(2999, 12, 31))
_FORMS = st.sampled_from(["{M} {d}", "{M} {d}{th}", "{d} {M}", "{d}{th} of {M}", "{m}. {d}"])
_AFTER = st.sampled_from(["", ".", " to", ", and", " at 10:00", "!", ")", "\n", " 9am"])


def _written(form: str, day: datetime.date) -> str:
    month = prov._MONTHS[day.month - 1]
    th = {1: "st", 2: "nd", 3: "rd"}.get(day.day % 10 if day.day // 10 != 1 else 0, "th")
    return form.format(M=month.capitalize(), m=month[:3].capitalize(), d=day.day, th=th)


@settings(max_examples=300, deadline=None)
@given(day=_DAYS, form=_FORMS, after=_AFTER, year=st.integers(1900, 2999))
def test_a_month_and_day_without_a_year_are_that_day_in_any_year(
        day: datetime.date, form: str, after: str, year: int) -> None:
    text = "on " + _written(form, day) + after
    assert prov.mentioned(day.isoformat(), text), text
    # ... but not when a year follows, unless it is the value's
    with_year = "on " + _written(form, day) + f", {year}" + after
    assert prov.mentioned(day.isoformat(), with_year) == (year == day.year), with_year
    # ... and never another day of that month
    other = day + datetime.timedelta(days=1)
    if other.month == day.month:
        assert not prov.mentioned(other.isoformat(), text), (other, text)


# ------------------------------------------- a sentence glued to a host (outsider 3)

@pytest.mark.parametrize(("text", "value", "found"), [
    ("to our website www.our-company.com.They sent it", "www.our-company.com", True),
    ("to our website www.our-company.com.They sent it", "https://www.our-company.com/", True),
    ("see x.com.Then reply", "x.com", True),
    ("mail bob@x.com.Thanks", "bob@x.com", True),
    # the ungluing reads the sentence, not a longer host
    ("to our website www.our-company.com.They sent it", "www.our-company.com.they", False),
    # a host written with capitals stays one name; a one-label word before the dot is no host
    ("see www.Example.Com.They", "www.example.com", False),
    ("see my.Host name", "my.host", True),
    # a lower-case label after the dot is still a longer host
    ("www.x.com.they sent it", "www.x.com", False),
    ("www.x.com.Evil.net", "www.x.com", False),
])
def test_a_sentence_glued_to_a_host_is_read_as_a_new_sentence(
        text: str, value: str, found: bool) -> None:
    assert prov.mentions(text, value) is found


@given(st.text(alphabet="aZx.-/ \nT1hey", max_size=80))
def test_ungluing_only_adds_spaces_after_dots(text: str) -> None:
    out = prov._unglue(text)
    assert out.replace(". ", ".") == text.replace(". ", ".")
    assert len(out) >= len(text) and out.count(" ") - text.count(" ") == len(out) - len(text)


def test_a_glued_url_in_the_request_is_found_by_a_rule(tmp_path: Path) -> None:
    policies = load_text(tmp_path, """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: publish}
spec:
  match: {tools: [post_webpage]}
  rules:
    - name: site-not-named
      when: '!request.mentions(args.url)'
      action: deny
""")
    request = ("Post the hobbies to our website www.our-company.com.They sent them to Bob.")
    ok = policies.evaluate(tool="post_webpage", args={"url": "www.our-company.com"},
                           request=request)
    bad = policies.evaluate(tool="post_webpage", args={"url": "www.our-company.com.they"},
                            request=request)
    assert (ok.effect, bad.effect) == ("allow", "deny")
