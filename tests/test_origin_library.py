"""The shipped provenance library ``origin`` (src/guardrails/libraries/origin.yaml), loaded
by ``spec.uses: [origin]``, and ``s.urls()`` / ``s.emails()``, the links of any text as
``request.urls`` / ``request.emails`` list the request's.

The library: loaded once however many files name it (four files that each carried a copy
under one name were duplicates), a Library of the same name in the user's files wins, a
call without ``uses`` says what to write, its own PolicyTest suite passes and covers every
function, it is no file of the policy set (a bundle of a directory that uses it builds and
loads), and in the real loop the third outsider's policies rewritten on it decide as theirs.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import guardrails
from guardrails.engine.lint import lint_policies
from guardrails.expr import compile_expression
from guardrails.expr.lib_provenance import Request
from guardrails.expr.limits import METER, Meter
from guardrails.expr.values import CelError
from guardrails.model.loader import SHIPPED_LIBRARIES, shipped_library
from guardrails.testing import run_tests
from tests.agentdojo_support import load_replay

ROOT = Path(__file__).resolve().parent.parent
LIBRARIES = ROOT / "src" / "guardrails" / "libraries"
SHIPPED = ROOT / "benchmarks" / "agentdojo" / "shipped"
OUTSIDER3 = ROOT / "benchmarks" / "agentdojo" / "outsider3"

POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {{name: {name}}}
spec:
  match: {{tools: [send_money]}}
  {uses}
  params: {{known: [GB29NWBK60161331926819]}}
  rules:
    - name: from-content
      when: '!origin.vouched(args.recipient) && !origin.unknown(args.recipient)'
      action: require_approval
    - name: unknown-origin
      when: 'origin.unknown(args.recipient)'
      action: deny
"""
INVOICE = [{"tool": "read_file", "args": {"path": "bill-december.txt"}, "effect": "allow",
            "result": "Pay to US133000000121212121212 by Friday."}]


def _write(tmp_path: Path, name: str, uses: str = "uses: [origin]") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(POLICY.format(name=name, uses=uses), encoding="utf-8")
    return path


# ---------------------------------------------------------------- the shipped library


def test_the_shipped_library_is_package_data_and_its_suite_covers_every_function() -> None:
    assert set(SHIPPED_LIBRARIES) == {"origin"}
    assert Path(shipped_library("origin")) == LIBRARIES / "origin.yaml"
    report = run_tests(LIBRARIES / "origin.tests.yaml")
    assert report.passed and len(report.results) >= 12
    assert not report.uncovered
    policies = guardrails.load(LIBRARIES)
    assert [f for f in lint_policies(policies) if f.severity != "info"] == []
    text = (LIBRARIES / "origin.tests.yaml").read_text()
    functions = [f.name for lib in _library_documents() for f in lib.functions]
    assert functions == ["named", "vouched", "pointed", "followed", "seen", "unknown"]
    for name in functions:  # every function has a rule of its own in the probe
        assert f"'origin.{name}(args.v)'" in text, name


def _library_documents() -> Any:
    from guardrails.model import load_documents

    return load_documents(shipped_library("origin")).libraries


def test_files_that_each_use_it_load_together_once(tmp_path: Path) -> None:
    """Four suites that each copied the recipe under one name were duplicates; four files
    that each name the shipped library load as one set."""
    for name in ("pay-a", "pay-b", "pay-c"):
        _write(tmp_path, name)
    policies = guardrails.load(tmp_path)
    assert policies.evaluate(tool="send_money", args={"recipient": "gb29 nwbk 6016 1331 "
                                                      "9268 19"}, request="Pay the rent."
                             ).effect == "allow"
    held = policies.evaluate(tool="send_money", args={"recipient": "US133000000121212121212"},
                             request="Pay the bill in bill-december.txt.", history=INVOICE)
    assert held.effect == "require_approval"
    assert {r.rule for r in held.rules} == {"from-content"}
    denied = policies.evaluate(tool="send_money",
                               args={"recipient": "FR7630006000011234567890189"},
                               request="Pay the rent.")
    assert denied.effect == "deny" and {r.policy for r in denied.rules} == {"pay-a", "pay-b",
                                                                           "pay-c"}


def test_it_is_no_file_of_the_policy_set(tmp_path: Path) -> None:
    """Like a built-in function it comes with the package: a bundle of a directory that
    uses it holds the directory's files only, and loads."""
    from guardrails.fleet.bundle import build, load_bundle
    from guardrails.model import load_documents

    folder = tmp_path / "policies"
    folder.mkdir()
    _write(folder, "pay")
    documents = load_documents(folder)
    assert [lib.name for lib in documents.libraries] == ["origin"]
    assert list(documents.sources) == [str(folder / "pay.yaml")]
    assert documents.files == (str(folder / "pay.yaml"),)
    out = tmp_path / "policies.tgz"
    manifest = build(folder, out)
    assert list(manifest.files) == ["pay.yaml"]
    loaded = load_bundle(out.read_bytes())
    assert loaded.evaluate(tool="send_money", args={"recipient": "FR76300060000112345678"
                                                    "90189"}).effect == "deny"


def test_a_library_of_the_same_name_in_the_users_files_wins(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text(
        "apiVersion: guardrails/v1\nkind: Library\nmetadata: {name: origin}\nspec:\n"
        "  functions:\n"
        "    - {name: vouched, params: [{name: v}], expression: 'v == \"everyone\"'}\n"
        "    - {name: unknown, params: [{name: v}], expression: 'v != \"everyone\"'}\n",
        encoding="utf-8")
    _write(tmp_path, "pay")
    policies = guardrails.load(tmp_path)
    assert policies.evaluate(tool="send_money", args={"recipient": "GB29NWBK60161331926819"},
                             request="Pay GB29NWBK60161331926819.").effect == "deny"
    assert policies.evaluate(tool="send_money", args={"recipient": "everyone"}).effect == "allow"


def test_a_call_without_uses_says_to_name_it(tmp_path: Path) -> None:
    path = _write(tmp_path, "pay", uses="")
    with pytest.raises(guardrails.PolicyError) as caught:
        guardrails.load(path)
    assert "unknown function 'origin.vouched' ('origin' is a library shipped with the " \
           "package: name it in this policy's spec.uses: [origin])" in str(caught.value)


def test_a_policy_loaded_with_a_user_of_it_needs_no_list_of_its_own(tmp_path: Path) -> None:
    """Its functions read ``params.known`` optionally: a policy that calls them without
    ``uses`` (loaded beside one that names it) reads the request, never an error."""
    _write(tmp_path, "pay")
    (tmp_path / "other.yaml").write_text(
        "apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: other}\nspec:\n"
        "  match: {tools: [send_email]}\n  rules:\n"
        "    - {name: unknown, when: 'origin.unknown(args.to)', action: deny}\n",
        encoding="utf-8")
    policies = guardrails.load(tmp_path)
    assert policies.evaluate(tool="send_email", args={"to": "bob@x.com"},
                             request="Mail bob@x.com.").effect == "allow"
    decision = policies.evaluate(tool="send_email", args={"to": "eve@x.com"},
                                 request="Mail bob@x.com.")
    assert decision.effect == "deny" and not decision.errors


# ---------------------------------------------------------------- a text's links


def _links(text: str) -> tuple[Any, Any]:
    program = compile_expression("[s.urls(), s.emails()]", declared=("s",))
    urls, emails = program.evaluate({"s": text})
    return urls, emails


@pytest.mark.parametrize(("text", "urls", "emails"), [
    ("Post it on www.x.com. Then tell me", ["www.x.com"], []),
    ("see https://a.b/c?d=1, and (http://p.q/r)!", ["https://a.b/c?d=1", "http://p.q/r"], []),
    # a sentence glued to a link: the link meant, then the link as written
    ("to our website www.our-company.com.They sent it",
     ["www.our-company.com", "www.our-company.com.They"], []),
    ("upload to https://acme.com.Ru now", ["https://acme.com", "https://acme.com.Ru"], []),
    # not glued: a capitalised host, a word after another mark
    ("www.Example.Com.They said", ["www.Example.Com.They"], []),
    ("www.x.com.They, said", ["www.x.com.They"], []),
    # a URL holding an address is one URL; the address is an address too
    ("open https://u@evil.com/x now", ["https://u@evil.com/x"], ["u@evil.com"]),
    ("mail Info@www.Example.org.", [], ["info@www.example.org"]),
    ("Bob@X.com, 'ann@y.org' and <c.d+e@z.net>", [], ["bob@x.com", "ann@y.org",
                                                      "c.d+e@z.net"]),
    ("ébob@x.com and éwww.x.com", [], []),
    ("HTTPS://X.COM/A", ["HTTPS://X.COM/A"], []),
])
def test_links_leave_the_sentence_out(text: str, urls: list[str], emails: list[str]) -> None:
    assert _links(text) == (urls, emails)


_PIECES = st.sampled_from([
    " ", ". ", ".", ",", "!", "?", ":", ";", "\n", "(", ")", "'", '"', "<", "@", "é", "\u00a0",
    "www.", "http://", "https://", "HTTPS://", "x", "Bob", ".com", ".They", ".Ru", "/a",
    "?q=1", "-", "%", "_", "+", "a@b.com", "ann.lee@mail.example", "2024-05-01", "GB29",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=24).map("".join))
def test_request_lists_are_the_functions_on_the_request_text(text: str) -> None:
    """Conformance: ``request.urls`` is ``request.text.urls()``, ``request.emails`` is
    ``request.text.emails()``, on the engine's own request value."""
    program = compile_expression(
        "request.urls == request.text.urls() && request.emails == request.text.emails()",
        declared=("request",))
    assert program.evaluate({"request": Request(text)}) is True


def test_the_request_conforms_through_the_engine(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(
        "apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
        "  match: {tools: [post]}\n  rules:\n"
        "    - name: differs\n"
        "      when: 'request.urls != request.text.urls() || request.emails != "
        "request.text.emails()'\n      action: deny\n"
        "    - name: unnamed-link\n"
        "      when: 'args.body.urls().exists(u, !(u in request.urls))'\n"
        "      action: deny\n", encoding="utf-8")
    policies = guardrails.load(tmp_path)
    request = "Post to www.our-company.com.They said hi to bob@x.com, see https://a.b/c."
    assert policies.evaluate(tool="post", args={"body": "Visit www.our-company.com."},
                             request=request).effect == "allow"
    denied = policies.evaluate(tool="post", args={"body": "Visit www.evil.com."},
                               request=request)
    assert [r.rule for r in denied.rules] == ["unnamed-link"]


def test_a_link_past_the_searched_part_of_a_text_is_still_a_link() -> None:
    urls, _ = _links("x" * 70_000 + " https://evil.example/x")
    assert urls == ["https://evil.example/x"]


def test_links_are_charged_by_the_text_and_each_link() -> None:
    program = compile_expression("s.urls()", declared=("s",))
    costs = []
    for text in ("a " * 1_000, "a " * 10_000, "www.x.com " * 1_000):
        meter = Meter(3_000_000)
        program.evaluate({"s": text, METER: meter})
        costs.append(3_000_000 - meter.left)
    assert costs[0] >= 4 * 2_000 and costs[1] >= 4 * 20_000
    assert costs[2] >= 4 * 10_000 + 40 * 1_000  # and every link as a regex match


def test_a_flood_of_links_is_over_the_calls_cost_bound() -> None:
    """More than 2,048 links in one text: the call is over its bound (denied whatever the
    policy's failurePolicy), as a flood of findAll matches is."""
    for source in ("s.urls() == [] || true", "s.emails() == [] || true"):
        program = compile_expression(source, declared=("s",))
        meter = Meter(3_000_000)
        with contextlib.suppress(CelError):
            program.evaluate({"s": "www.x.com a@b.cc " * 1_100, METER: meter})
        assert meter.left < 0, source  # over its bound, whatever absorbed the error
        meter = Meter(3_000_000)
        assert program.evaluate({"s": "www.x.com a@b.cc " * 1_000, METER: meter}) is True
        assert meter.left > 0


@pytest.mark.parametrize("text", ["%" * 65_536, "a." * 32_768, "a@" * 32_768])
def test_request_addresses_are_read_once_per_run(text: str) -> None:
    """The e-mail pattern starts only where no local-part character precedes (a run of
    ``%`` was read once per character: 17 s for 64 K). Counted, not timed: the request's
    lists are built and hold nothing."""
    request = Request(text)
    assert request["emails"] == [] and request["urls"] == []


def test_a_bad_receiver_is_no_matching_overload() -> None:
    for source in ("dyn(1).urls()", "dyn(['a']).emails()"):
        with pytest.raises(CelError, match="no matching overload"):
            compile_expression(source, declared=()).evaluate({})


# ---------------------------------------------------------------- in the real loop

replay = load_replay()


@pytest.fixture(scope="module")
def data() -> Any:
    return replay.load()


@pytest.mark.parametrize(("suite", "user_task"), [("slack", "user_task_4"),
                                                  ("slack", "user_task_11"),
                                                  ("banking", "user_task_2"),
                                                  ("workspace", "user_task_0")])
def test_in_the_real_loop_the_rewrite_decides_as_the_copy(data: Any, suite: str,
                                                          user_task: str) -> None:
    """The third outsider's policies on the shipped library decide every call of these
    runs (the glued URL, the second hop, an update without a payee) as their own copy."""
    run = next(r for r in data["suites"][suite]["runs"]
               if r["user_task"] == user_task and r["injection_task"] is None)
    tools = data["suites"][suite]["tools"]
    outcomes = [asyncio.run(replay.replay_run(guardrails.load(d / f"{suite}.yaml"), tools, run,
                                              data["results"]))
                for d in (OUTSIDER3, SHIPPED)]
    copy, shipped = ([(o.ran[i], o.held(i)) for i in range(len(run["calls"]))]
                     for o in outcomes)
    assert copy == shipped
    assert all(ran for ran, _ in shipped)


def test_the_checker_types_them(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(
        "apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
        "  match: {tools: [t]}\n  rules:\n"
        "    - {name: a, when: 'request.text.urls()[0] + 1 > 2', action: deny}\n"
        "    - {name: b, when: '1.emails() == []', action: deny}\n", encoding="utf-8")
    with pytest.raises(guardrails.PolicyError) as caught:
        guardrails.load(tmp_path)
    message = str(caught.value)
    assert "rules.a.when: no operator + for string and int" in message
    assert "rules.b.when: no overload of int.emails(); it takes: string.emails() -> " \
           "list(string)" in message


def test_four_suites_on_it_test_as_one_set() -> None:
    """``guardrails test shipped/`` loads the four suites together: one library, no
    duplicate (outsider3/ needed four names for four copies)."""
    report = run_tests(SHIPPED)
    assert report.passed and len(report.results) >= 50
