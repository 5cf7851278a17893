"""Red team 16b: what held of the fast paths, pinned in the real agent loop.

Candidates prepared at load for exactly named tools (``policyset._prepared``): names
with regex and glob characters, a name only a glob matches beside an exact one, case
and Unicode forms, a hot reload that moves a name from one policy to another. Params
texts compiled as patterns at load: invalid, non-Unicode and non-text ones load and
fail the call that uses them (closed), a reload that changes a pattern is followed.
Fused rules with their constants as defaults and library calls in line: library errors
on hostile values are the closure backend's, and scrubbed of secret arguments.
"""

from __future__ import annotations

import itertools
import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from agent_framework import FunctionTool

import guardrails
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call, text
from tests.af_support import agent_with, load_text
from tests.test_engine_fast_path import both, record


def _tool(name: str, ran: list[tuple[str, dict[str, Any]]]) -> FunctionTool:
    def run(**kwargs: Any) -> str:
        ran.append((name, kwargs))
        return "done"

    return FunctionTool(name=name, description="A tool.", func=run,
                        input_model={"type": "object", "properties": {"s": {"type": "string"}}})


async def _ran(policies: Any, names: list[str], tools: list[str],
               **arguments: Any) -> list[str]:
    ran: list[tuple[str, dict[str, Any]]] = []
    client = ScriptedChatClient([[call(n, **arguments) for n in names], [text("ok")]])
    await agent_with(client, [_tool(t, ran) for t in tools], guard(policies)).run("go")
    return sorted(name for name, _ in ran)


_NAMES = """\
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {{name: exact}}
spec:
  match: {{tools: {exact}}}
  defaultAction: deny
---
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {{name: globbed}}
spec:
  match: {{tools: ["send?money", "cafe*"]}}
  rules:
    - {{name: no-x, when: 'args.?s.orValue("") == "x"', action: deny}}
"""

_NFC = unicodedata.normalize("NFC", "café")
_NFD = unicodedata.normalize("NFD", "café")


async def test_prepared_names_match_exactly_what_their_globs_match(tmp_path: Path) -> None:
    exact = json.dumps(["send.money", "a+b", "x(y)", _NFC, "Tool"])
    policies = load_text(tmp_path, _NAMES.format(exact=exact))
    assert set(json.loads(exact)) <= set(policies._by_tool)  # prepared at load
    tools = ["send.money", "sendXmoney", "a+b", "aab", "x(y)", "xy", _NFC, _NFD,
             "Tool", "tool", "TOOL"]
    # Denied by default: the exact names only ("." and "+" are no regex, case and the
    # Unicode form are the name's own); "sendXmoney" only the glob matches.
    assert await _ran(policies, tools, tools, s="y") == sorted(
        ["sendXmoney", "aab", "xy", _NFD, "tool", "TOOL"])
    # The glob policy judges both names its glob matches, prepared or not.
    assert await _ran(policies, ["send.money", "sendXmoney", _NFD], tools, s="x") == []
    for name in tools:  # the prepared entry decides as the general path
        fast, general = both(policies, {"tool": name, "args": {"s": "x"}})
        assert record(fast) == record(general), name


async def test_a_reload_moves_a_prepared_name(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(_NAMES.format(exact='["one"]'), encoding="utf-8")
    with guardrails.PolicySource(path, interval=3600) as source:
        assert await _ran(source, ["one", "two"], ["one", "two"], s="y") == ["two"]
        path.write_text(_NAMES.format(exact='["two"]'), encoding="utf-8")
        assert source.refresh()
        assert await _ran(source, ["one", "two"], ["one", "two"], s="y") == ["one"]


_PATTERNS = """\
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {{name: patterns}}
spec:
  match: {{tools: [t]}}
  failurePolicy: Fail
  params: {{re: {re}, many: {many}}}
  rules:
    - {{name: one, when: 'args.s.matches(params.re)', action: deny}}
    - {{name: any, when: 'params.many.exists(p, args.s.matches(p))', action: deny}}
"""


@pytest.mark.parametrize("many", ['["^z", "a{1001}", "[", 7, ["^q"]]', '["\\\\"]',
                                  '["(?P<n>a)(?P=n)", "^z"]'])
async def test_an_invalid_pattern_in_a_params_list_loads_and_fails_its_call_closed(
        tmp_path: Path, many: str) -> None:
    policies = load_text(tmp_path, _PATTERNS.format(re='"^z"', many=many))
    assert await _ran(policies, ["t"], ["t"], s="abc") == []
    decision = policies.evaluate("t", {"s": "abc"})
    assert decision.effect is guardrails.Effect.DENY and decision.errors


@pytest.mark.parametrize("re", ['"("', '"(?P<n>a)(?P=n)"', '"a{1001}"'])
def test_an_invalid_params_pattern_is_a_load_error_naming_its_place(
        tmp_path: Path, re: str) -> None:
    with pytest.raises(guardrails.PolicyError, match=r"policy\.yaml:9:\d+: rules\.one\.when: "
                       r"params\.re: invalid regular expression"):
        load_text(tmp_path, _PATTERNS.format(re=re, many='["^q"]'))


async def test_a_reload_that_changes_a_params_pattern_is_followed(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(_PATTERNS.format(re='"^a"', many='["^q"]'), encoding="utf-8")
    with guardrails.PolicySource(path, interval=3600) as source:
        assert await _ran(source, ["t"], ["t"], s="abc") == []
        assert await _ran(source, ["t"], ["t"], s="bcd") == ["t"]
        path.write_text(_PATTERNS.format(re='"^b"', many='["^q"]'), encoding="utf-8")
        assert source.refresh()
        assert await _ran(source, ["t"], ["t"], s="abc") == ["t"]
        assert await _ran(source, ["t"], ["t"], s="bcd") == []


_SECRET = "S3CRETzz-9"
_LIBRARY = [
    "int(args.s) > 0", "double(args.s) > 0.0", "args.s.split(args.t).size() > 0",
    "url(args.s).getHost() == 'x'", "ip(args.s).family() == 4", "args.s.matches(args.t)",
    "base64.decode(args.s).size() > 0", "'%s %d'.format([args.s, args.s]) == ''",
    "timestamp(args.s) > timestamp('2020-01-01T00:00:00Z')", "duration(args.s) > duration('1s')",
    "args.s.charAt(100) == ''", "args.s.substring(5, 1) == ''",
    "args.s.lastIndexOf(args.t, 99) > 0", "cidr(args.s).containsIP(ip('1.1.1.1'))",
    "[3, 1, 2].reverse() == [2, 1, 3] && [3, 1, 2][0] == 3", "args.s.join(args.l) == ''",
]


def _library_policy(index: int, expression: str) -> str:
    return f"""apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {{name: p{index}}}
spec:
  failurePolicy: Fail
  match: {{tools: [t]}}
  secrets: {{arguments: [s]}}
  rules:
    - {{name: r0, when: 'args.s == "never"', action: deny}}
    - name: r1
      when: {json.dumps(expression)}
      action: deny
      message: m
    - {{name: r2, when: {json.dumps(expression.replace("args.s", "args.t"))}, action: warn}}
"""


def test_library_errors_in_fused_code_are_the_closures_and_scrubbed(tmp_path: Path) -> None:
    text = "---\n".join(_library_policy(i, e) for i, e in enumerate(_LIBRARY))
    sets = [load_text(tmp_path, text, f"{backend}.yaml") if backend == "compiled" else
            guardrails.load(_write(tmp_path / f"{backend}.yaml", text), backend="closures")
            for backend in ("compiled", "closures")]
    assert all(p.fused is not None for p in sets[0].policies)
    values = [_SECRET, "x" + _SECRET, "%" + _SECRET, "9" * 40 + _SECRET, "::1/200" + _SECRET,
              "http://[" + _SECRET, "\ud800" + _SECRET, ""]
    for value, other in itertools.product(values, ["", "%", "x", "::"]):
        args = {"s": value, "t": other, "l": [3, "a", 1.5]}
        records = []
        for policies in sets:
            fast, general = both(policies, {"tool": "t", "args": dict(args)})
            assert record(fast) == record(general)
            shown = json.dumps(fast.to_dict(), default=str) + repr(fast.errors)
            assert _SECRET not in shown and fast.errors
            records.append(record(fast))
        assert records[0] == records[1], value


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path
