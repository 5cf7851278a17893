"""``kind: Library``: functions shared across policies and files, params shared across the
documents of a file and by ``spec.uses``; misuse reported at the call site."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import guardrails
from tests.test_cli_commands import run

LIB = """\
apiVersion: guardrails/v1
kind: Library
metadata: {name: text}
spec:
  params: {internal: [example.com], limit: 5}
  functions:
    - name: compact
      params: [{name: s, type: string}]
      expression: 's.replace(" ", "").lowerAscii()'
    - name: named
      params: [{name: value, type: string}]
      expression: 'value != "" && text.compact(request.text).contains(text.compact(value))'
    - name: shadow
      params: [{name: request}, {name: n, type: int}]
      expression: '[1, 2].exists(n, n == 2) && request == "x" && n > 0'
    - name: heavy
      params: [{name: s, type: string}]
      expression: '[s, s, s, s, s, s, s, s, s, s].all(l, size(l) > 0)'
"""


def policy(body: str, *, uses: str = "") -> str:
    """A one-rule policy; ``uses`` is extra ``spec`` lines (two-space indented)."""
    extra = "".join(f"  {line}\n" for line in uses.splitlines()) if uses else "  mode: enforce\n"
    return ("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
            + extra + "  match: {tools: [t]}\n  rules:\n    - name: r\n"
            f"      when: '{body}'\n      action: deny\n")


def load(tmp_path: Path, *files: str, backend: str = "compiled") -> guardrails.PolicySet:
    for i, text in enumerate(files):
        (tmp_path / f"f{i}.yaml").write_text(text, encoding="utf-8")
    return guardrails.load(tmp_path, backend=backend)  # type: ignore[arg-type]


BACKENDS = pytest.mark.parametrize("backend", ["compiled", "closures"])


@BACKENDS
def test_a_function_from_another_file_is_inlined(tmp_path: Path, backend: str) -> None:
    ps = load(tmp_path, LIB, policy("!text.named(args.to)"), backend=backend)
    assert ps.evaluate("t", {"to": "Bob Smith"}, request="mail bobsmith").effect.value == "allow"
    d = ps.evaluate("t", {"to": "Eve"}, request="mail bob")
    assert d.effect.value == "deny" and [r.rule for r in d.rules] == ["r"]


@BACKENDS
def test_a_wrong_argument_type_at_run_time_fails_closed_with_a_clear_error(
        tmp_path: Path, backend: str) -> None:
    ps = load(tmp_path, LIB, policy("!text.named(args.to)"), backend=backend)
    d = ps.evaluate("t", {"to": 42}, request="x")
    assert d.effect.value == "deny"
    assert d.errors[0].message == "text.named: argument 'value' must be string, got int"


@BACKENDS
def test_parameters_do_not_capture_names_of_the_call_site(tmp_path: Path, backend: str) -> None:
    # The parameter `request` shadows the global inside the body only; the argument
    # `request.text` is read at the call site. The body's own `n` comprehension variable
    # is not the parameter `n`.
    ps = load(tmp_path, LIB, policy("text.shadow(request.text, -1)"), backend=backend)
    assert ps.evaluate("t", {}, request="x").effect.value == "allow"  # n > 0 is false
    ps = load(tmp_path, LIB, policy("text.shadow(request.text, 1)"), backend=backend)
    assert ps.evaluate("t", {}, request="x").effect.value == "deny"
    assert ps.evaluate("t", {}, request="y").effect.value == "allow"


@BACKENDS
def test_an_argument_is_evaluated_once_however_often_the_body_uses_it(
        tmp_path: Path, backend: str) -> None:
    # The body uses s ten times; the argument costs about 6,000 units (lowerAscii reads
    # and writes 3,000 characters), so ten evaluations would exceed a budget of 10,000.
    (tmp_path / "lib.yaml").write_text(LIB, encoding="utf-8")
    (tmp_path / "p.yaml").write_text(policy("text.heavy(args.s.lowerAscii())"),
                                     encoding="utf-8")
    ps = guardrails.load(tmp_path, backend=backend,  # type: ignore[arg-type]
                         limits=guardrails.Limits(max_cost=10_000))
    d = ps.evaluate("t", {"s": "A" * 3000})
    assert d.errors == () and d.effect.value == "deny"
    # The same body with the argument written out ten times does exceed it: the bound holds.
    (tmp_path / "p.yaml").write_text(policy("[" + ", ".join(["args.s.lowerAscii()"] * 10)
                                            + "].all(l, size(l) > 0)"), encoding="utf-8")
    ps = guardrails.load(tmp_path, backend=backend,  # type: ignore[arg-type]
                         limits=guardrails.Limits(max_cost=10_000))
    assert "cost" in ps.evaluate("t", {"s": "A" * 3000}).errors[0].message


def test_params_are_shared_by_the_documents_of_a_file_and_by_uses(tmp_path: Path) -> None:
    same_file = LIB + "---\n" + policy('args.n > params.limit')
    ps = load(tmp_path, same_file)
    assert ps.evaluate("t", {"n": 6}).effect.value == "deny"
    assert ps.evaluate("t", {"n": 5}).effect.value == "allow"


def test_uses_shares_params_across_files_and_the_policy_own_params_win(tmp_path: Path) -> None:
    own = policy("args.n > params.limit && args.d in params.internal",
                 uses="uses: [text]\nparams: {limit: 1}")
    ps = load(tmp_path, LIB, own)
    assert ps.evaluate("t", {"n": 2, "d": "example.com"}).effect.value == "deny"
    assert ps.evaluate("t", {"n": 1, "d": "example.com"}).effect.value == "allow"


def test_without_uses_another_file_params_are_not_visible(tmp_path: Path) -> None:
    ps = load(tmp_path, LIB, policy("args.n > params.limit"))
    d = ps.evaluate("t", {"n": 2})
    assert d.effect.value == "deny" and "limit" in d.errors[0].message


@pytest.mark.parametrize(("body", "message", "column"), [
    ("text.named(args.a, 1)", "text.named() takes 1 argument (value), got 2", 19),
    ("text.named(42)", "text.named: argument 'value' must be string, got int", 25),
    ("text.named([1])", "text.named: argument 'value' must be string, got list", 25),
    ("text.nope(1)", "unknown function 'text.nope'", 19),
])
def test_check_reports_misuse_at_the_call_site(tmp_path: Path, body: str, message: str,
                                               column: int) -> None:
    (tmp_path / "lib.yaml").write_text(LIB, encoding="utf-8")
    p = tmp_path / "p.yaml"
    p.write_text(policy(body), encoding="utf-8")
    proc = run("check", tmp_path)
    assert proc.returncode == 1, proc.stdout
    assert f"{p}:9:{column}: {message}" in proc.stdout, proc.stdout


RECURSIVE = """\
apiVersion: guardrails/v1
kind: Library
metadata: {name: loops}
spec:
  functions:
    - name: a
      params: [{name: x}]
      expression: 'loops.b(x)'
    - name: b
      params: [{name: x}]
      expression: 'x && loops.a(x)'
    - name: self
      expression: 'loops.self()'
    - name: typo
      params: [{name: x}]
      expression: 'x + argz'
"""


def test_recursion_and_body_errors_are_reported_in_the_library(tmp_path: Path) -> None:
    lib = tmp_path / "loops.yaml"
    lib.write_text(RECURSIVE, encoding="utf-8")
    proc = run("check", lib)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert any(ln.startswith(f"{lib}:8:") and "loops.a -> loops.b -> loops.a" in ln
               for ln in lines), lines
    assert any(ln.startswith(f"{lib}:13:") and "loops.self -> loops.self" in ln
               for ln in lines), lines
    assert any(ln.startswith(f"{lib}:16:") and "undeclared reference to 'argz'" in ln
               for ln in lines), lines


def test_nested_calls_expand_linearly(tmp_path: Path) -> None:
    twice = ("apiVersion: guardrails/v1\nkind: Library\nmetadata: {name: d}\nspec:\n"
             "  functions:\n    - name: twice\n      params: [{name: x}]\n"
             "      expression: '[x, x]'\n")
    call = "args.v"
    for _ in range(40):
        call = f"d.twice({call})"
    ps = load(tmp_path, twice, policy(f"size({call}) == 2"))
    assert ps.evaluate("t", {"v": 1}).effect.value == "deny"


@pytest.mark.parametrize(("doc", "message"), [
    (policy("true", uses="uses: [txt]"), "spec.uses: no Library named 'txt' is loaded "
                                         "(did you mean 'text'?)"),
    (LIB.replace("name: text", "name: text-lib"), "invalid library name 'text-lib'"),
    (LIB.replace("type: string}]\n      expression: 's.", "type: str}]\n      expression: 's."),
     "invalid value 'str'"),
    (LIB.replace("{name: request}, {name: n, type: int}", "{name: n}, {name: n}"),
     "duplicate parameter name 'n'"),
    (LIB + "---\n" + LIB, "duplicate library name 'text'"),
])
def test_library_document_mistakes_have_positions(tmp_path: Path, doc: str,
                                                  message: str) -> None:
    (tmp_path / "lib.yaml").write_text(LIB, encoding="utf-8")
    (tmp_path / "other.yaml").write_text(doc, encoding="utf-8")
    with pytest.raises(guardrails.PolicyError) as info:
        guardrails.load(tmp_path)
    assert any(message in p.message and p.line > 0 for p in info.value.errors), \
        info.value.errors


def test_the_reference_backend_runs_library_calls_on_closures(tmp_path: Path) -> None:
    ps = load(tmp_path, LIB, policy("!text.named(args.to)"), backend="interpreter")
    assert ps.evaluate("t", {"to": "bob"}, request="bob").effect.value == "allow"
    assert ps.evaluate("t", {"to": "eve"}, request="bob").effect.value == "deny"


@given(st.text(alphabet=st.characters(max_codepoint=0x24F), max_size=40))
def test_lower_and_upper_ascii_change_only_ascii_letters(text: str) -> None:
    from guardrails.expr.lib_strings import lower_ascii, upper_ascii

    lowered = "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in text)
    uppered = "".join(chr(ord(c) - 32) if "a" <= c <= "z" else c for c in text)
    assert lower_ascii(text) == lowered and upper_ascii(text) == uppered
