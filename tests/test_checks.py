"""No silent policy mistakes: what `guardrails check` and the loader report, message by message.

Golden outputs for the eight mistakes of issue 11 (each at its own file:line:column), run
through the installed console script; then other mistakes of the same kinds tried
against the library, and the guards that must keep a correct policy clean.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

import guardrails
from guardrails.engine.compile import load_with_warnings
from guardrails.engine.lint import Finding, lint
from tests.test_cli_commands import run

DATA = Path(__file__).parent / "data" / "checks"
TOOLS = DATA / "tools.json"
RUN_SQL: dict[str, Any] = json.loads(TOOLS.read_text())["run_sql"]


def lines(proc: subprocess.CompletedProcess[str], root: Path = DATA) -> list[str]:
    return [line.replace(str(root) + "/", "") for line in proc.stdout.splitlines()]


# -- the eight mistakes, golden ------------------------------------------------------------


def test_the_issue_mistakes_in_one_policy_are_each_reported_at_their_position() -> None:
    proc = run("check", DATA / "mistakes", "--tools", TOOLS)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert lines(proc) == [
        "mistakes/run_sql.yaml:8:32: warning: spec.params: YAML reads the plain 'no' among "
        "strings as false (YAML 1.1); quote it (\"no\") if you mean the text",
        "mistakes/run_sql.yaml:11:54: error: policy sql: rules.long-timeout.when: cannot "
        "compare int > string: CEL does not convert between types; write the number without "
        "quotes: 300",
        "mistakes/run_sql.yaml:13:38: error: policy sql: rules.long-timeout.messageExpression: "
        "no operator + for string and int; convert the other operand with string(...)",
        "mistakes/run_sql.yaml:15:14: error: policy sql: rules.database-named.when: must be a "
        "bool, but this expression gives a string (a string is not a condition: compare it, "
        "e.g. args.x == \"value\", or test that it is there with has(args.x))",
        "mistakes/run_sql.yaml:18:19: warning: policy sql: rules.big-limit.when: 'args.limit' "
        "may be absent (it is not a required parameter): reading it when a call leaves it out "
        "is an evaluation error (the rule then fails closed); test has(args.limit) first",
        "mistakes/run_sql.yaml:21:34: warning: in double quotes YAML turns \\b into a control "
        "character, so the value does not contain the backslash written here; use single "
        "quotes (where a backslash is kept) and write a single quote inside as ''",
        "3 errors",
    ]


def test_strict_turns_warnings_into_errors() -> None:
    fixed = DATA / "mistakes"
    proc = run("check", fixed, "--tools", TOOLS, "--strict", "--format", "json")
    out = json.loads(proc.stdout)
    assert proc.returncode == 1 and out["ok"] is False
    assert {f["severity"] for f in out["findings"]} == {"error", "warning"}


def test_warnings_alone_pass_unless_strict(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(_policy("rules:\n  - {name: r, when: 'args.limit > 10', action: warn}"))
    assert run("check", path, "--tools", TOOLS).returncode == 0
    proc = run("check", path, "--tools", TOOLS, "--strict")
    assert proc.returncode == 1 and "warning:" in proc.stdout
    assert proc.stdout.splitlines()[-1] == "1 error or warning (--strict)"


def test_a_lookahead_is_a_load_error_at_the_literal_and_re2_prints_nothing() -> None:
    proc = run("check", DATA / "lookahead.yaml")
    assert proc.returncode == 1
    assert lines(proc) == [
        "lookahead.yaml:8:33: rules.drop.when: invalid regular expression "
        "'^(?=.*\\bdrop\\b)': invalid perl operator: (?= (RE2 has no lookahead or lookbehind: "
        "match the parts separately and combine them with && and !)",
        "1 problem",
    ]
    assert proc.stderr == ""


def test_a_regex_taken_from_params_is_a_constant_too(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(_policy("params: {re: '^(?=.*drop)'}\nrules:\n"
                            "  - {name: r, when: 'args.q.matches(params.re)', action: deny}"))
    with pytest.raises(guardrails.PolicyError) as info:
        guardrails.load(path)
    [p] = info.value.errors
    assert (p.line, p.column) == (8, 39), p
    path.write_text(_policy("params: {re: '(a)(?=b)'}\nrules:\n"
                            "  - {name: r, when: 'regex.replace(args.q, params.re, \"x\") == \"\"',"
                            " action: deny}"))
    with pytest.raises(guardrails.PolicyError) as info:
        guardrails.load(path)
    assert "params.re: invalid regular expression '(a)(?=b)'" in str(info.value)
    assert p.message.startswith("rules.r.when: params.re: invalid regular expression "
                                "'^(?=.*drop)': invalid perl operator: (?= (RE2 has no "
                                "lookahead"), p.message


def test_a_structural_problem_in_one_file_does_not_hide_a_cel_error_in_another() -> None:
    proc = run("check", DATA / "split")
    assert lines(proc) == [
        "split/a_broken.yaml:5:9: spec.mode: invalid value 'strict'; allowed: enforce, audit",
        "split/b_cel.yaml:7:34: rules.r.when: cannot compare int > string: CEL does not "
        "convert between types; write the number without quotes: 10",
        "2 problems",
    ]


def test_regex_errors_at_run_time_write_nothing_to_stderr(capfd: pytest.CaptureFixture[str],
                                                          tmp_path: Path) -> None:
    """A pattern only known at run time still fails as an evaluation error, silently."""
    path = tmp_path / "p.yaml"
    path.write_text(_policy("rules:\n"
                            "  - {name: r, when: 'args.q.matches(args.re)', action: deny}"))
    decision = guardrails.load(path).evaluate("run_sql", {"q": "x", "re": "(?=x)"})
    assert decision.effect.value == "deny" and decision.errors
    assert capfd.readouterr().err == ""


# -- the same kinds of mistakes, more of them -----------------------------------------------


def _policy(spec: str, tools: str = "[run_sql]") -> str:
    return ("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
            f"  match: {{tools: {tools}}}\n" + textwrap.indent(spec, "  ") + "\n")


def _rule(when: str, extra: str = "") -> str:
    return f"rules:\n  - name: r\n    when: '{when}'\n    action: deny\n{extra}"


def load_problems(tmp_path: Path, spec: str) -> list[str]:
    path = tmp_path / "p.yaml"
    path.write_text(_policy(spec))
    with pytest.raises(guardrails.PolicyError) as info:
        guardrails.load(path)
    return [f"{p.line}:{p.column}: {p.message}" for p in info.value.errors]


def typed(tmp_path: Path, spec: str, schema: dict[str, Any] | None = None) -> list[Finding]:
    path = tmp_path / "p.yaml"
    path.write_text(_policy(spec))
    policies, warnings = load_with_warnings(path)
    return [Finding("warning", w.file, w.line, w.column, w.message) for w in warnings] + [
        f for f in lint(policies, {"run_sql": schema or RUN_SQL}) if f.severity != "info"]


@pytest.mark.parametrize(("when", "column", "message"), [
    # literals and params are known without tool schemas: load errors
    ('params.n * 1.5 > 2.0', 23, "no operator * for int and double"),
    ('"a" + 1 == "a1"', 18, "no operator + for string and int"),
    ('params.names.contains("x")', 27, "no overload of list(string).contains(string)"),
    ('"x" in "xyz"', 18, "'in' needs a list or a map; for a substring test write"),
    ('params.n == "3"', 26, "int == string is never true"),
    ('size(params.n) > 0', 14, "no overload of size(int)"),
    ('[1, 2].exists(x, x == "1")', 36, "int == string is never true"),
    ('params.names[0] > 3', 32, "cannot compare string > int"),
    ('params.n', 14, "must be a bool, but this expression gives an int"),
    ('!params.names', 22, "! needs a bool, not a list(string)"),
    ('duration("5 minutes") > duration("1m")', 23, "invalid duration literal '5 minutes'"),
    ('timestamp("2024-13-01T00:00:00Z") < now', 24, "invalid timestamp literal"),
    ('ip("300.1.1.1").isLoopback()', 17, "invalid ip literal '300.1.1.1'"),
    ('cidr("10.0.0.0/33").containsIP(ip("10.0.0.1"))', 19, "invalid cidr literal"),
    ('url("::").getHost() == ""', 18, "invalid url literal '::'"),
    ('args.q.find("(") == ""', 26, "invalid regular expression '('"),
    ('args.q.findAll("a{2,1}").size() > 0', 29, "invalid regular expression 'a{2,1}'"),
    ('regex.extract(args.q, "(").hasValue()', 36, "invalid regular expression '('"),
    ('regex.extractAll(args.q, "a(?=b)") == []', 39,
     "invalid regular expression 'a(?=b)': invalid perl operator: (?= (RE2 has no lookahead"),
    ('regex.replace(args.q, "[z-a]", "") == ""', 36, "invalid regular expression '[z-a]'"),
    ('matches(args.q, "(?<name>x)\\\\1")', 30,
     "invalid regular expression '(?<name>x)\\1': invalid escape sequence: \\1 (RE2 has no "
     "backreferences)"),
    ('args.q.startsWith(1)', 21, "no overload of dyn.startsWith(int); it takes: "
                                 "string.startsWith(string) -> bool"),
    ('args.q.size() == "3"', 31, "int == string is never true"),
])
def test_mistakes_knowable_without_schemas_fail_the_load(tmp_path: Path, when: str,
                                                         column: int, message: str) -> None:
    found = load_problems(tmp_path, "params: {n: 3, names: [a, b]}\n" + _rule(when))
    assert len(found) == 1, found
    assert found[0].startswith(f"9:{column}: rules.r.when: {message}"), found


@pytest.mark.parametrize(("when", "message"), [
    ('args.timeout_s + 1.0 > 3.0', "no operator + for int and double"),
    ('args.query > 3', "cannot compare string > int"),
    ('args.timeout_s.contains("3")', "no overload of int.contains(string)"),
    ('args.query.timeout > 3', "a string has no fields (reading '.timeout')"),
    ('args.query[0] == "s"', "a string cannot be indexed with [...]"),
    ('args.query', "must be a bool, but this expression gives a string"),
    ('has(args.limit) ? args.limit : 0', "must be a bool, but this expression gives an int"),
    ('args.database == "production"', "'production' is not one of the values the tool "
                                       "schema allows ('prod', 'staging', 'dev')"),
    ('args.limit > 3 || args.query == ""', "'args.limit' may be absent"),
    ('has(args.timeout_s) || args.limit > 3', "'args.limit' may be absent"),
    ('has(args.limit) || args.limit > 3', "'args.limit' may be absent"),
    ('!has(args.limit) && args.limit > 3', "'args.limit' may be absent"),
    ('args["limit"] > 3', "'args.limit' may be absent"),
    ('args.?limit.orValue(null) == null && args.limit > 3', "'args.limit' may be absent"),
    ('args.?timeout_s.hasValue() && args.limit > 3', "'args.limit' may be absent"),
    ('args.?limt.orValue(0) > 3', "tool 'run_sql' has no parameter 'limt'; did you mean "
                                "'limit'?"),
])
def test_mistakes_against_the_tool_schema(tmp_path: Path, when: str, message: str) -> None:
    found = [f for f in typed(tmp_path, _rule(when))
             if "may be absent" in message or "may be absent" not in f.message]
    assert [f.message.split(": ", 2)[2][:len(message)] for f in found] == [message], found
    assert found[0].line == 8


@pytest.mark.parametrize("when", [
    'has(args.limit) && args.limit > 3',
    '!has(args.limit) || args.limit > 3',
    'has(args.limit) ? args.limit > 3 : false',
    '!has(args.limit) ? false : args.limit > 3',
    '"limit" in args && args.limit > 3',
    'has(args.timeout_s) && has(args.limit) && args.limit > args.timeout_s',
    'args.query.matches("(?i)\\\\bdrop\\\\b")',
    'type(args.query) == string && args.query.trim() == ""',
    'args.database in ["prod", "staging"] && args.query.size() > 3',
    'args.database == "prod" || args.database == "dev"',
    '[args.query].all(q, q.size() < 10000)',
    'args.exists(k, k == "limit")',
    'has(args.timeout_s) && args.timeout_s > 3 && args.timeout_s < 10',
    'dyn(args.query) > 3 || true',
    'args.?limit.hasValue() && args.limit > 3',
    'args.?limit.orValue(null) != null && args.limit > 3',
    'null != args.?limit.orValue(null) && args.limit > 3',
    'args.?limit.orValue(null) == null || args.limit > 3',
    'args.?limit.orValue(0) > 3',
])
def test_correct_expressions_stay_clean(tmp_path: Path, when: str) -> None:
    assert typed(tmp_path, _rule(when)) == []


def test_a_repair_guarded_by_its_own_when_is_not_flagged(tmp_path: Path) -> None:
    spec = ("repairs:\n  - name: cap\n    when: 'has(args.limit) && args.limit > 100'\n"
            "    set: {limit: 'args.limit / 2'}\n" + _rule("args.query == \"\""))
    assert typed(tmp_path, spec) == []
    # The same set without the guard reads an optional argument.
    spec = "repairs:\n  - name: cap\n    set: {limit: 'args.limit / 2'}\n" + _rule('true')
    [f] = typed(tmp_path, spec)
    assert f.severity == "warning" and "repairs.cap.set.limit" in f.message


def test_a_message_expression_is_guarded_by_its_rule(tmp_path: Path) -> None:
    extra = "    messageExpression: '\"limit \" + string(args.limit)'\n"
    assert typed(tmp_path, _rule("has(args.limit) && args.limit > 3", extra)) == []
    [f] = typed(tmp_path, _rule("args.query == \"\"", extra))
    assert "messageExpression" in f.message and "'args.limit' may be absent" in f.message


def test_variables_carry_their_types_into_rules(tmp_path: Path) -> None:
    # size() gives an int whatever it is applied to: known at load, without schemas.
    spec = ("variables:\n  - {name: n, expression: 'size(args.query)'}\n"
            + _rule('variables.n > "3"'))
    [p] = load_problems(tmp_path, spec)
    assert p.startswith("10:28: rules.r.when: cannot compare int > string"), p
    spec = ("variables:\n  - {name: q, expression: 'args.query'}\n"
            + _rule('variables.q > 3'))
    [f] = typed(tmp_path, spec)
    assert f.severity == "error" and "cannot compare string > int" in f.message


def test_schema_refs_defs_enums_and_nested_objects(tmp_path: Path) -> None:
    schema = {"type": "object", "required": ["opts"],
              "properties": {"opts": {"$ref": "#/$defs/Opts"}},
              "$defs": {"Opts": {"type": "object", "required": ["depth"],
                                 "properties": {"depth": {"type": "integer"},
                                                "mode": {"enum": ["a", "b"]}}}}}
    [f] = typed(tmp_path, _rule('args.opts.depth > "2"'), schema)
    assert "cannot compare int > string" in f.message
    [f] = typed(tmp_path, _rule('args.opts.mode == "a"'), schema)
    assert "'args.opts.mode' may be absent" in f.message
    assert typed(tmp_path, _rule('has(args.opts.mode) && args.opts.mode == "a"'), schema) == []


def test_number_parameters_accept_ints_and_doubles(tmp_path: Path) -> None:
    schema = {"type": "object", "required": ["amount"],
              "properties": {"amount": {"type": "number"}}}
    for when in ('args.amount > 3', 'args.amount > 3.5', 'args.amount * 2 > 10'):
        assert typed(tmp_path, _rule(when), schema) == [], when


def test_the_shipped_payments_policy_passes_a_strict_check(tmp_path: Path) -> None:
    schema = {"type": "object", "required": ["recipient", "amount"],
              "properties": {"recipient": {"type": "string"}, "amount": {"type": "number"}}}
    policies = guardrails.load([Path("policies") / "payments.yaml",
                                Path("policies") / "common.yaml"])
    assert [f for f in lint(policies, {"send_money": schema})
            if f.severity in ("error", "warning")] == []


# -- YAML pitfalls -------------------------------------------------------------------------


def test_a_quote_that_ends_the_yaml_value_and_a_cel_escape_get_hints(tmp_path: Path) -> None:
    head = ("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
            "  rules:\n    - name: r\n")
    path = tmp_path / "q.yaml"
    path.write_text(head + "      when: 'args.x == 'a''\n      action: deny\n")
    with pytest.raises(guardrails.PolicyError) as info:
        guardrails.load(path)
    [p] = info.value.errors
    assert (p.line, p.column) == (7, 25)
    assert "(hint: a quote inside a quoted value ends it" in p.message
    path.write_text(head + "      when: 'args.x.matches(\"\\d+\")'\n      action: deny\n")
    with pytest.raises(guardrails.PolicyError) as info:
        guardrails.load(path)
    [p] = info.value.errors
    assert (p.line, p.column) == (7, 30)
    assert p.message == ("invalid escape sequence \\d (in a CEL string a backslash starts "
                         "an escape: write \\\\d for a regex's \\d, or use a raw string, "
                         "r\"\\d+\")")


@pytest.mark.parametrize(("text", "line", "column", "message"), [
    ("  rules:\n    - {name: r, when: args.a: b, action: deny}\n", 7, 29,
     "YAML syntax error: while parsing a flow mapping: expected ',' or '}', but got ':' "
     "(hint: an unquoted ': ' inside a value starts a mapping; quote the expression"),
    ("  rules:\n    - name: r\n      when: args.a ? 1 : 2\n", 8, 24,
     "YAML syntax error: mapping values are not allowed here (hint: an unquoted ': ' inside "
     "a value starts a mapping; quote the expression"),
    ("  rules:\n    - {name: r, when: \"args.q.matches('\\d')\", action: deny}\n", 7, 41,
     "YAML syntax error: while scanning a double-quoted scalar: found unknown escape "
     "character 'd' (hint: inside double quotes YAML reads backslash escapes"),
])
def test_yaml_syntax_errors_carry_a_hint(tmp_path: Path, text: str, line: int, column: int,
                                         message: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\n"
                    "spec:\n  match: {tools: [t]}\n" + text)
    with pytest.raises(guardrails.PolicyError) as info:
        guardrails.load(path)
    [p] = info.value.errors
    assert (p.line, p.column) == (line, column), p
    assert p.message.startswith(message), p.message


def test_yaml_11_booleans_and_nulls_among_strings_warn_in_params_and_test_data(
        tmp_path: Path) -> None:
    (tmp_path / "params.yaml").write_text("regions: [eu, us, on]\n")
    path = tmp_path / "p.yaml"
    path.write_text(_policy("paramsFile: params.yaml\nparams:\n  dbs: [prod, staging, no]\n"
                            "  flags: {debug: off}\n  modes: [Yes, No]\n"
                            + _rule('true')) + "---\n" + textwrap.dedent("""\
        apiVersion: guardrails/v1
        kind: PolicyTest
        metadata: {name: t}
        spec:
          cases:
            - name: c
              call: {tool: run_sql, args: {tags: [a, ~, b], who: {name: x, admin: yes}}}
              expect: {effect: deny}
        """))
    _, warnings = load_with_warnings(path)
    got = sorted((w.file.rsplit("/", 1)[1], w.line, w.message.split(" among")[0])
                 for w in warnings)
    assert got == [
        ("p.yaml", 8, "spec.params: YAML reads the plain 'no'"),
        ("p.yaml", 23, "spec.cases[0].call.args: YAML reads the plain 'yes'"),
        ("p.yaml", 23, "spec.cases[0].call.args: YAML reads the plain '~'"),
        ("params.yaml", 1, "params: YAML reads the plain 'on'"),
    ]
    # A bool among bools ({debug: off}, [Yes, No]) is meant as one: no warning.


def test_quoted_or_single_quoted_text_is_not_a_pitfall(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(_policy("params: {dbs: [prod, 'no', \"off\"]}\n"
                            + _rule("args.query.matches(''\\\\b(drop)\\\\b'')")))
    assert load_with_warnings(path)[1] == ()


# -- clean policies stay clean ----------------------------------------------------------------


@pytest.mark.parametrize("path", ["policies", "src/guardrails/demo_policies"])
def test_shipped_policies_have_no_warnings(path: str) -> None:
    from guardrails import demo

    class Log:
        policies: Any = None

        def ran(self, *_: Any) -> None:
            pass

    tools = {t.name: t.parameters() for t in demo._tools(Log())}  # type: ignore[arg-type]
    policies, warnings = load_with_warnings(path)
    assert warnings == ()
    noisy = [f for f in lint(policies, tools) if f.severity in ("error", "warning")
             and "matches none of the known tools" not in f.message]
    assert noisy == []


def test_samples_policies_check_clean_against_their_tools() -> None:
    from tests.af_tools import send_money, write_note

    tools = {t.name: t.parameters() for t in (send_money, write_note)}
    proc = run("check", "policies", "--format", "json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["findings"] == []
    policies = guardrails.load("policies")
    assert [f for f in lint(policies, tools) if f.severity == "error"] == []


def test_a_hostile_tool_schema_is_read_in_bounded_time() -> None:
    """Tool schemas can come from a remote MCP server: recursion and fan-out through
    $ref must not blow up (each $ref is read once; the number of nodes read is bounded)."""
    from guardrails.expr.types import _SchemaReader, of_json_schema

    node = {"type": "object", "required": [f"p{i}" for i in range(20)],
            "properties": {f"p{i}": {"$ref": "#/$defs/N"} for i in range(20)}}
    schema = {**node, "$defs": {"N": node}}
    t = of_json_schema(schema)
    f = t.field("p0")
    assert f is not None and f.required and f.type.field("p0") is not None
    # 50 definitions, each referring 50 times to the next, each used 50 x 50 times: read
    # naively that is 50^17 nodes; each reference is read once instead.
    wide = {"type": "object", "properties": {
        f"p{i}": {"anyOf": [{"$ref": f"#/$defs/D{j}"} for j in range(50)]} for i in range(50)},
        "$defs": {f"D{j}": {"type": "object", "properties": {
            f"q{k}": {"$ref": f"#/$defs/D{(j + 1) % 50}"} for k in range(50)}}
            for j in range(50)}}
    reader = _SchemaReader(wide)
    reader.read(wide, 0)
    assert len(reader.refs) == 50
    assert 10_000 - reader.budget < 10_000  # finished well inside the node budget
