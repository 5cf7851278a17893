"""The loader: every field read, every problem reported at its file:line:column, all or nothing."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from guardrails.model import (
    Documents,
    PolicyError,
    Position,
    Problem,
    ToolPolicy,
    load_documents,
)

DATA = Path(__file__).parent / "data" / "model"
HEADER = "apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata:\n  name: p\nspec:\n"
"""Five lines: a spec body written after it starts on line 6."""


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return str(path)


def problems(paths: str | list[str]) -> list[Problem]:
    with pytest.raises(PolicyError) as exc:
        load_documents(paths)
    return exc.value.errors


def only_problem(paths: str | list[str]) -> Problem:
    found = problems(paths)
    assert len(found) == 1, found
    return found[0]


@pytest.fixture
def valid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Documents:
    """The valid fixture tree, loaded through a relative path."""
    shutil.copytree(DATA / "valid", tmp_path / "valid")
    monkeypatch.chdir(tmp_path)
    return load_documents("valid")


# -- valid documents ---------------------------------------------------------------------


def test_every_tool_policy_field_is_read(valid: Documents) -> None:
    p = valid.policies[0]
    f = "valid/payments.yaml"
    assert p.name == "payments" and p.file == f and p.position == Position(f, 2, 1)
    assert p.metadata.description == "Money movement limits"
    assert dict(p.metadata.labels) == {"owner": "secops"}
    assert p.metadata.name_position == Position(f, 5, 9)
    assert (p.mode, p.failure_policy, p.default_action) == ("enforce", "Fail", "allow")
    assert p.match.tools == ("send_money", "update_*")
    assert p.match.when is not None and p.match.when.source == 'principal.tenant == "acme"'
    assert p.match.when.position == Position(f, 14, 12)
    assert p.match.matches_tool("update_x") and not p.match.matches_tool("Send_money")
    # Inline params win over the params file, per top-level key.
    assert dict(p.params) == {"max_amount": 10000, "known_ibans": ["UK12", "DE89"]}
    assert p.params_file == os.path.join("valid", "payments.params.yaml")
    [variable] = p.variables
    assert variable.name == "amount" and variable.expression.source == "double(args.amount)"
    assert variable.position == Position(f, 19, 7)
    assert variable.expression.position == Position(f, 20, 20)
    [repair] = p.repairs
    assert repair.name == "amount-as-string" and repair.unset == ()
    assert repair.when is not None and repair.when.source == "type(args.amount) == string"
    [(arg, expr)] = repair.set
    assert arg == "amount" and expr.source == 'double(args.amount.replace(",", ""))'
    assert expr.position == Position(f, 25, 18)
    assert p.secrets.arguments == ("api_key",)
    [inject] = p.secrets.inject
    assert (inject.argument, inject.env) == ("api_key", "PAYMENTS_API_KEY")
    assert p.secrets.secret_arguments == frozenset({"api_key"})
    first, second = p.rules
    assert (first.name, first.action) == ("unknown-recipient", "deny")
    assert first.message == "Recipient is not a known payee."
    assert first.message_expression is not None
    assert first.message_expression.source == '"unknown payee " + args.recipient'
    assert first.position == Position(f, 32, 7)
    assert (second.name, second.action, second.message) == ("large-amount",
                                                            "require_approval", None)
    assert second.when.source == ("variables.amount > params.max_amount\n"
                                  "  || variables.amount < 0.0\n")
    assert second.when.position == Position(f, 39, 9)
    [redaction] = p.redact
    assert redaction.regex == r"\b(?:\d[ -]?){13,16}\b"
    assert redaction.replacement == "[REDACTED:card]"
    assert redaction.regex_position == Position(f, 44, 14)


def test_defaults_json_params_and_multi_document_file(valid: Documents) -> None:
    shell, audit = valid.policies[1:]
    f = os.path.join("valid", "nested", "shell.yml")
    assert shell.file == f and audit.file == f and audit.position == Position(f, 22, 1)
    assert (shell.mode, shell.failure_policy, shell.default_action) == ("audit", "Ignore",
                                                                       "deny")
    assert dict(shell.params) == {"max_len": 200, "ratio": 1.5, "allowed": ["ls", "cat"]}
    assert type(shell.params["max_len"]) is int and type(shell.params["ratio"]) is float
    assert shell.rules[1].when.source == 'args.command.contains("rm -rf")'
    assert (audit.mode, audit.failure_policy, audit.default_action) == ("enforce", "Fail",
                                                                       "allow")
    assert audit.match.tools is None and audit.match.when is None
    assert audit.match.matches_tool("anything")
    assert dict(audit.params) == {} and audit.params_file is None
    assert audit.secrets.arguments == () and audit.secrets.position is None
    assert audit.rules[0].when.source == "true" and audit.rules[0].action == "warn"


def test_every_policy_test_field_is_read(valid: Documents) -> None:
    [t] = valid.tests
    f = os.path.join("valid", "tests", "payments-test.yaml")
    assert t.name == "payments-tests" and t.metadata.description == "SPEC example"
    assert t.policies == (os.path.join("valid", "payments.yaml"),
                          os.path.join("valid", "nested"))
    first, second = t.cases
    assert first.name == "repaired amount needs approval" and first.position == Position(f, 7, 7)
    assert first.call.tool == "send_money"
    assert dict(first.call.args) == {"recipient": "UK12", "amount": "1,500.00"}
    assert dict(first.call.principal) == {} and first.call.request == "pay UK12"
    assert first.call.history == () and first.call.description is None
    assert first.expect.effect == "require_approval"
    assert first.expect.arguments == {"amount": 1500.0}
    assert first.expect.rules == ("payments/large-amount",)
    assert (first.expect.message, first.expect.errors) == (None, None)
    assert second.call.description == "Sends money" and second.call.request is None
    assert dict(second.call.principal) == {"tenant": "acme", "roles": ["admin"]}
    assert [h.to_dict() for h in second.call.history] == [
        {"tool": "lookup", "args": {"q": 1}, "effect": "deny", "result": "", "trusted": False},
        {"tool": "lookup", "args": {}, "effect": "allow", "result": "", "trusted": False},
    ]
    assert second.call.history[0].position == Position(f, 20, 13)
    assert (second.expect.effect, second.expect.message) == ("deny", "unknown payee")
    assert (second.expect.rules, second.expect.errors) == ((), 0)


def test_directory_is_walked_recursively_in_sorted_order(valid: Documents) -> None:
    assert valid.files == ("valid/payments.yaml", "valid/nested/shell.yml",
                           "valid/tests/payments-test.yaml")
    # The params files are read (and hashed) but are not document files.
    assert sorted(valid.sources) == sorted([*valid.files, "valid/payments.params.yaml",
                                            "valid/nested/limits.json"])
    assert valid.sources["valid/nested/limits.json"] == (
        DATA / "valid" / "nested" / "limits.json").read_bytes()
    assert [p.name for p in valid.policies] == ["payments", "shell", "audit-everything"]


def test_list_of_paths_keeps_order_and_reads_each_file_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(DATA / "valid", tmp_path / "valid")
    monkeypatch.chdir(tmp_path)
    docs = load_documents([Path("valid/nested/shell.yml"), "valid"])
    assert docs.files == ("valid/nested/shell.yml", "valid/payments.yaml",
                          "valid/tests/payments-test.yaml")
    assert [p.name for p in docs.policies] == ["shell", "audit-everything", "payments"]


def test_empty_documents_and_comment_only_files_are_skipped(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "# nothing here\n")
    write(tmp_path, "b.yaml", "---\n---\n" + HEADER + "  rules: []\n---\n...\n")
    docs = load_documents(str(tmp_path))
    assert [p.name for p in docs.policies] == ["p"]
    assert len(docs.files) == 2


def test_yaml_values_keep_their_types(tmp_path: Path) -> None:
    path = write(tmp_path, "p.yaml", HEADER + (
        "  params:\n"
        "    i: 12\n    f: 1.5\n    b: true\n    n: null\n    s: '12'\n"
        "    hex: 0x1f\n    big: 123456789012345678901234567890\n"
        "    date: 2024-01-02\n    on: off\n    nested: {l: [1, 2.0, x]}\n"
    ))
    params = load_documents(path).policies[0].params
    assert params == {"i": 12, "f": 1.5, "b": True, "n": None, "s": "12", "hex": 31,
                      "big": 123456789012345678901234567890, "date": "2024-01-02",
                      "on": False, "nested": {"l": [1, 2.0, "x"]}}
    assert type(params["f"]) is float and type(params["nested"]["l"][1]) is float


def test_a_plain_true_or_number_is_a_cel_expression(tmp_path: Path) -> None:
    path = write(tmp_path, "p.yaml", HEADER + "  rules:\n    - {name: a, when: true, "
                                              "action: warn}\n")
    assert load_documents(path).policies[0].rules[0].when.source == "true"


# -- document-level problems ---------------------------------------------------------------


@pytest.mark.parametrize(("text", "line", "column", "message"), [
    ("kind: ToolPolicy\nmetadata: {name: p}\nspec: {}\n", 1, 1,
     "missing required field 'apiVersion'"),
    ("apiVersion: guardrails/v1\nmetadata: {name: p}\nspec: {}\n", 1, 1,
     "missing required field 'kind'"),
    ("apiVersion: guardrails/v2\nkind: ToolPolicy\nmetadata: {name: p}\nspec: {}\n", 1, 13,
     "unsupported apiVersion 'guardrails/v2'; expected 'guardrails/v1'"),
    ("apiVersion: guardrails/v1\nkind: ToolPolicies\nmetadata: {name: p}\nspec: {}\n", 2, 7,
     "unknown kind 'ToolPolicies'; allowed: ToolPolicy, PolicyTest, Library, PolicyBinding "
     "(did you mean 'ToolPolicy'?)"),
    ("apiVersion: guardrails/v1\nkind: ToolPolicy\nspec: {}\n", 1, 1,
     "missing required field 'metadata'"),
    ("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: Payments}\nspec: {}\n",
     3, 18, "metadata.name: invalid policy name 'Payments': must be a lowercase DNS label"),
    ("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec: []\n", 4, 7,
     "spec: expected a mapping, got a list"),
    ("- a\n- b\n", 1, 1, "a guardrails document must be a mapping, got a list"),
    ("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p\nspec: {}\n", 4, 5,
     "YAML syntax error: while parsing a flow mapping: expected ',' or '}', but got ':'"),
    ("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n  mode: a: b\n",
     5, 10, "YAML syntax error: mapping values are not allowed here"),
])
def test_document_problem_is_reported_at_its_node(tmp_path: Path, text: str, line: int,
                                                  column: int, message: str) -> None:
    path = write(tmp_path, "doc.yaml", text)
    problem = only_problem(path)
    assert (problem.file, problem.line, problem.column) == (path, line, column)
    assert problem.message.startswith(message), problem.message


def test_a_misspelt_field_is_unknown_and_the_required_one_missing(tmp_path: Path) -> None:
    path = write(tmp_path, "doc.yaml", "apiVersion: guardrails/v1\nkind: ToolPolicy\n"
                                       "metadata: {nam: p}\nspecs: {}\n")
    assert problems(path) == [
        Problem(path, 1, 1, "missing required field 'spec'"),
        Problem(path, 3, 11, "missing required field 'name' in metadata"),
        Problem(path, 3, 12, "unknown field 'nam' in metadata (did you mean 'name'?)"),
        Problem(path, 4, 1, "unknown field 'specs' (did you mean 'spec'?)"),
    ]
    path = write(tmp_path, "inject.yaml", HEADER + "  secrets:\n    inject:\n"
                                                   "      key: {file: /etc/key}\n")
    assert problems(path) == [
        Problem(path, 8, 12, "missing required field 'env' in spec.secrets.inject.key"),
        Problem(path, 8, 13, "unknown field 'file' in spec.secrets.inject.key"),
    ]


def test_unknown_top_level_field_suggests_the_known_one(tmp_path: Path) -> None:
    path = write(tmp_path, "doc.yaml", HEADER + "  rules: []\nmetdata: {}\n")
    assert only_problem(path) == Problem(path, 7, 1, "unknown field 'metdata' (did you mean "
                                                     "'metadata'?)")


# -- spec problems: one per case, exact position ---------------------------------------------


@pytest.mark.parametrize(("body", "line", "column", "message"), [
    ("  rulez: []\n", 6, 3, "unknown field 'rulez' in spec (did you mean 'rules'?)"),
    ("  rules: nope\n", 6, 10, "spec.rules: expected a list, got a string"),
    ("  rules:\n    - name: r\n      action: deny\n", 7, 7,
     "missing required field 'when' in spec.rules[0]"),
    ("  mode: strict\n", 6, 9, "spec.mode: invalid value 'strict'; allowed: enforce, audit"),
    ("  failurePolicy: fail\n", 6, 18,
     "spec.failurePolicy: invalid value 'fail'; allowed: Fail, Ignore"),
    ("  defaultAction: block\n", 6, 18,
     "spec.defaultAction: invalid value 'block'; allowed: allow, deny"),
    ("  rules:\n    - {name: r, when: x, action: block}\n", 7, 34,
     "spec.rules[0].action: invalid value 'block'; allowed: allow, deny, halt, "
     "require_approval, warn"),
    ("  rules:\n    - {name: r, when: x, action: deny, mesage: m}\n", 7, 40,
     "unknown field 'mesage' in spec.rules[0] (did you mean 'message'?)"),
    ("  rules:\n    - {name: r, when: x, action: deny}\n    - {name: r, when: y, action: deny}\n",
     8, 7, "duplicate rule name 'r' (first at line 7)"),
    ("  rules:\n    - {name: Bad Name, when: x, action: deny}\n", 7, 14,
     "spec.rules[0].name: invalid rule name 'Bad Name'"),
    ("  rules:\n    - {name: r, when: '', action: deny}\n", 7, 24,
     "spec.rules[0].when: empty expression"),
    ("  rules:\n    - {name: r, when: [x], action: deny}\n", 7, 23,
     "spec.rules[0].when: expected a CEL expression (a string), got a list"),
    ("  rules:\n    - {name: r, when: x, action: deny, message: 404}\n", 7, 49,
     "spec.rules[0].message: expected a string, got an integer"),
    ("  variables:\n    - {name: v, expression: '1'}\n    - {name: v, expression: '2'}\n",
     8, 7, "duplicate variable name 'v' (first at line 7)"),
    ("  variables:\n    - {name: my-var, expression: '1'}\n", 7, 14,
     "spec.variables[0].name: invalid variable name 'my-var': must be an identifier"),
    ("  variables:\n    - {name: in, expression: '1'}\n", 7, 14,
     "spec.variables[0].name: 'in' is a reserved word in CEL"),
    ("  variables:\n    - {name: v}\n", 7, 7,
     "missing required field 'expression' in spec.variables[0]"),
    ("  repairs:\n    - {name: r, set: {a: '1'}}\n    - {name: r, unset: [b]}\n", 8, 7,
     "duplicate repair name 'r' (first at line 7)"),
    ("  repairs:\n    - {name: r, when: x}\n", 7, 7,
     "spec.repairs[0]: the repair changes nothing; give 'set' or 'unset'"),
    ("  repairs:\n    - {name: r, set: {a: '1'}, unset: [a]}\n", 7, 40,
     "spec.repairs[0].unset[0]: argument 'a' is also set"),
    ("  repairs:\n    - {name: r, set: [a]}\n", 7, 22,
     "spec.repairs[0].set: expected a mapping, got a list"),
    ("  match:\n    tools: [\"send_[ab\"]\n", 7, 13,
     "spec.match.tools[0]: invalid glob 'send_[ab': unbalanced '['"),
    ("  match:\n    tools: []\n", 7, 12, "spec.match.tools: an empty list matches no tool"),
    ("  match:\n    tools: send_*\n", 7, 12,
     "spec.match.tools: expected a list, got a string"),
    ("  match:\n    tool: [a]\n", 7, 5,
     "unknown field 'tool' in spec.match (did you mean 'tools'?)"),
    ("  secrets:\n    inject:\n      key: PAYMENTS_KEY\n", 8, 12,
     "spec.secrets.inject.key: expected {env: VARIABLE_NAME}, got a string"),
    ("  secrets:\n    inject:\n      key: {env: 'MY-KEY'}\n", 8, 18,
     "spec.secrets.inject.key.env: invalid environment variable name 'MY-KEY'"),
    ("  secrets:\n    arguments: api_key\n", 7, 16,
     "spec.secrets.arguments: expected a list, got a string"),
    ("  redact:\n    - {name: r, regex: '('}\n", 7, 24,
     "spec.redact[0].regex: invalid RE2 regular expression: missing )"),
    ("  redact:\n    - {name: r, regex: 'a|'}\n", 7, 24,
     "spec.redact[0].regex: the pattern matches the empty string"),
    ("  redact:\n    - {name: r, regex: '(a)\\1'}\n", 7, 24,
     "spec.redact[0].regex: invalid RE2 regular expression: invalid escape sequence"),
    ("  redact:\n    - {name: r, regex: x}\n    - {name: r, regex: y}\n", 8, 7,
     "duplicate redact name 'r' (first at line 7)"),
    ("  params: [1]\n", 6, 11, "spec.params: expected a mapping, got a list"),
    ("  mode: audit\n  mode: enforce\n", 7, 3, "duplicate key 'mode' (first at 6:3)"),
    ("  params:\n    a: &x 1\n    b: *x\n", 8, 8,
     "YAML aliases (*name) are not supported: write the value out"),
    ("  params: {a: !!python/object:os.system x}\n", 6, 15,
     "unsupported YAML tag 'tag:yaml.org,2002:python/object:os.system'"),
    ("  params: {a: !!binary aGVsbG8=}\n", 6, 15, "unsupported YAML tag 'tag:yaml.org,2002:binary'"),
    ("  params: {a: .inf}\n", 6, 15, "infinite and NaN numbers are not supported"),
    ("  params: {[a]: 1}\n", 6, 12, "mapping keys must be strings, got a list"),
])
def test_spec_problem_is_reported_at_its_node(tmp_path: Path, body: str, line: int,
                                              column: int, message: str) -> None:
    path = write(tmp_path, "p.yaml", HEADER + body)
    problem = only_problem(path)
    assert (problem.file, problem.line, problem.column) == (path, line, column), problem
    assert problem.message.startswith(message), problem.message


def test_every_problem_in_a_file_is_reported_at_once(tmp_path: Path) -> None:
    path = write(tmp_path, "p.yaml", (
        "apiVersion: guardrails/v1\n"
        "kind: ToolPolicy\n"
        "metadata: {name: Bad}\n"
        "spec:\n"
        "  mode: strict\n"
        "  match: {tools: ['[']}\n"
        "  rules:\n"
        "    - {name: a, when: x, action: nope}\n"
        "  redact:\n"
        "    - {name: r, regex: '*'}\n"
        "---\n"
        "apiVersion: guardrails/v1\n"
        "kind: PolicyTest\n"
        "metadata: {name: t}\n"
        "spec: {cases: []}\n"
    ))
    found = [(p.line, p.column, p.message.split(":")[0]) for p in problems(path)]
    assert found == [(3, 18, "metadata.name"), (5, 9, "spec.mode"),
                     (6, 19, "spec.match.tools[0]"), (8, 34, "spec.rules[0].action"),
                     (10, 24, "spec.redact[0].regex"), (15, 15, "spec.cases")]


def test_a_duplicate_name_is_reported_even_when_the_element_has_other_problems(
        tmp_path: Path) -> None:
    path = write(tmp_path, "p.yaml", HEADER + "  rules:\n    - {name: r, when: x, action: deny}\n"
                                              "    - {name: r, when: '', action: x}\n")
    assert [(p.line, p.column, p.message.split(" (")[0].split(";")[0]) for p in problems(path)] == [
        (8, 7, "duplicate rule name 'r'"),
        (8, 24, "spec.rules[1].when: empty expression"),
        (8, 35, "spec.rules[1].action: invalid value 'x'"),
    ]


def test_problems_in_several_files_are_all_reported_and_nothing_is_returned(
        tmp_path: Path) -> None:
    good = write(tmp_path, "a/good.yaml", HEADER + "  rules: []\n")
    bad1 = write(tmp_path, "b/bad.yaml", HEADER + "  mode: x\n")
    bad2 = write(tmp_path, "c.yaml", "key: [\n")
    found = problems([good, str(tmp_path / "b"), bad2])
    assert {p.file for p in found} == {bad1, bad2}
    # The good file still loads on its own: no state is kept between loads.
    assert [p.name for p in load_documents(good).policies] == ["p"]


def test_duplicate_policy_names_across_files_point_at_the_second(tmp_path: Path) -> None:
    first = write(tmp_path, "a.yaml", HEADER + "  rules: []\n")
    second = write(tmp_path, "b.yaml", "# leading comment\n" + HEADER + "  rules: []\n")
    assert only_problem(str(tmp_path)) == Problem(
        second, 5, 9, f"duplicate policy name 'p' (first defined at {first}:4); every file "
        "loaded together is one policy set: rename one, or load the policies of different "
        "deployments separately (one file or directory each)")


def test_duplicate_test_names_are_reported(tmp_path: Path) -> None:
    test = ("apiVersion: guardrails/v1\nkind: PolicyTest\nmetadata: {name: t}\nspec:\n"
            "  cases:\n    - {name: c, call: {tool: x}, expect: {effect: allow}}\n")
    write(tmp_path, "a.yaml", test)
    second = write(tmp_path, "b.yaml", test)
    problem = only_problem(str(tmp_path))
    assert (problem.file, problem.line, problem.column) == (second, 3, 18)
    assert problem.message.startswith("duplicate test name 't'")


# -- paths --------------------------------------------------------------------------------


def test_missing_path_is_a_problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert only_problem("nope.yaml") == Problem("nope.yaml", 0, 0, "no such file or directory")


def test_directory_without_yaml_files_is_a_problem(tmp_path: Path) -> None:
    write(tmp_path, "d/readme.txt", "not a policy")
    directory = str(tmp_path / "d")
    assert only_problem(directory) == Problem(directory, 0, 0,
                                              "no *.yaml or *.yml files in directory")


def test_empty_path_list_is_a_problem() -> None:
    assert only_problem([]).message == "no policy paths given"


def test_file_that_is_not_utf8_is_a_problem(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_bytes(HEADER.encode() + b"  mode: \xff\n")
    assert only_problem(str(path)) == Problem(str(path), 6, 9,
                                              "not valid UTF-8: invalid start byte")


# -- paramsFile ---------------------------------------------------------------------------


def test_params_file_yaml_relative_to_the_policy(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "pol/data/limits.yaml", "max: 5\nnames: [a]\n")
    write(tmp_path, "pol/p.yaml", HEADER + "  paramsFile: data/limits.yaml\n"
                                           "  params: {names: [b]}\n")
    monkeypatch.chdir(tmp_path)
    docs = load_documents("pol/p.yaml")
    assert dict(docs.policies[0].params) == {"max": 5, "names": ["b"]}
    assert docs.policies[0].params_file == os.path.join("pol", "data", "limits.yaml")
    assert docs.sources[os.path.join("pol", "data", "limits.yaml")] == b"max: 5\nnames: [a]\n"
    assert docs.files == ("pol/p.yaml",)


def test_params_file_json_keeps_json_numbers(tmp_path: Path) -> None:
    write(tmp_path, "p.json", '{"big": 1e5, "n": 3, "s": "x"}')
    path = write(tmp_path, "p.yaml", HEADER + "  paramsFile: p.json\n")
    params = load_documents(path).policies[0].params
    assert params == {"big": 100000.0, "n": 3, "s": "x"} and type(params["big"]) is float


def test_params_file_next_to_a_document_file_that_is_a_document_is_not_skipped(
        tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", HEADER.replace("name: p", "name: a") + "  rules: []\n")
    path = write(tmp_path, "b.yaml", HEADER + "  paramsFile: a.yaml\n")
    problem = only_problem(str(tmp_path))
    assert problem == Problem(path, 6, 15, "spec.paramsFile 'a.yaml' is a guardrails "
                                           "document, not a params file")


@pytest.mark.parametrize(("name", "content", "message", "own"), [
    ("nope.yaml", None, "no such file (looked for {dir}/nope.yaml)", None),
    ("list.yaml", "- 1\n- 2\n", "expected a mapping, got a list", None),
    ("two.yaml", "a: 1\n---\nb: 2\n", "expected one YAML document holding a mapping, found 2",
     None),
    ("bad.yaml", "a: 1\nb: [\n", "invalid YAML (see the problem reported for that file)",
     (3, 1, "YAML syntax error: while parsing a flow node: expected the node content, "
            "but found '<stream end>'")),
    ("dup.yaml", "a: 1\na: 2\n", "invalid content (see the problems reported for that file)",
     (2, 1, "duplicate key 'a' (first at 1:1)")),
    ("bad.json", '{"a": 1,\n "b": }', "invalid JSON (see the problem reported for that file)",
     (2, 7, "invalid JSON: Expecting value")),
    ("dup.json", '{"a": 1, "a": 2}', "invalid JSON: duplicate key 'a'", None),
    ("nan.json", '{"a": NaN}', "invalid JSON: NaN is not supported", None),
    ("list.json", "[1]", "expected a JSON object, got a list", None),
])
def test_params_file_problems(tmp_path: Path, name: str, content: str | None, message: str,
                              own: tuple[int, int, str] | None) -> None:
    if content is not None:
        write(tmp_path, name, content)
    path = write(tmp_path, "p.yaml", HEADER + f"  paramsFile: {name}\n")
    found = problems(path)
    field = Problem(path, 6, 15, f"spec.paramsFile '{name}': "
                                 + message.format(dir=str(tmp_path)))
    expected = [field]
    if own is not None:
        expected.append(Problem(str(tmp_path / name), *own))
    assert found == sorted(expected, key=lambda p: (p.file, p.line, p.column, p.message))


def test_two_policies_sharing_a_broken_params_file_report_its_problem_once(
        tmp_path: Path) -> None:
    write(tmp_path, "shared.params.yaml", "a: [\n")
    write(tmp_path, "a.yaml", HEADER.replace("name: p", "name: a")
          + "  paramsFile: shared.params.yaml\n")
    write(tmp_path, "b.yaml", HEADER.replace("name: p", "name: b")
          + "  paramsFile: shared.params.yaml\n")
    found = problems(str(tmp_path))
    assert [p.file for p in found] == [str(tmp_path / f) for f in
                                       ("a.yaml", "b.yaml", "shared.params.yaml")]
    # Not also read as a document: no "missing apiVersion" noise about a params file.
    write(tmp_path, "shared.params.yaml", "a: 1\na: 2\n")
    assert [p.message for p in problems(str(tmp_path))] == [
        "spec.paramsFile 'shared.params.yaml': invalid content (see the problems reported "
        "for that file)"] * 2 + ["duplicate key 'a' (first at 1:1)"]


# -- PolicyTest problems --------------------------------------------------------------------

TEST_HEADER = "apiVersion: guardrails/v1\nkind: PolicyTest\nmetadata: {name: t}\nspec:\n"
"""Four lines: a spec body written after it starts on line 5."""


@pytest.mark.parametrize(("body", "line", "column", "message"), [
    ("  policies: [missing.yaml]\n  cases:\n    - {name: c, call: {tool: x}, expect: "
     "{effect: allow}}\n", 5, 14, "spec.policies[0]: 'missing.yaml' does not exist"),
    ("  cases: []\n", 5, 10, "spec.cases: a test needs at least one case"),
    ("  policies: []\n", 5, 3, "missing required field 'cases' in spec"),
    ("  cases:\n    - {name: c, call: {args: {}}, expect: {effect: allow}}\n", 6, 23,
     "missing required field 'tool' in spec.cases[0].call"),
    ("  cases:\n    - {name: c, call: {tool: x}, expect: {rules: []}}\n", 6, 42,
     "missing required field 'effect' in spec.cases[0].expect"),
    ("  cases:\n    - {name: c, call: {tool: x}, expect: {effect: denied}}\n", 6, 51,
     "spec.cases[0].expect.effect: invalid value 'denied'; allowed: allow, deny, halt, "
     "require_approval"),
    ("  cases:\n    - {name: c, call: {tool: x}, expect: {effect: deny, rules: [large-amount]}}\n", 6, 65,
     "spec.cases[0].expect.rules[0]: 'large-amount' is not 'policy/rule'"),
    ("  cases:\n    - {name: c, call: {tool: x}, expect: {effect: deny, errors: -1}}\n", 6, 65,
     "spec.cases[0].expect.errors: expected a count (an integer >= 0), got an integer"),
    ("  cases:\n    - {name: c, call: {tool: x}, expect: {effect: deny, errors: [x]}}\n", 6, 65,
     "spec.cases[0].expect.errors: expected a count (an integer >= 0), got a list"),
    ("  cases:\n    - {name: c, call: {tool: x, args: [1]}, expect: {effect: allow}}\n", 6, 39,
     "spec.cases[0].call.args: expected a mapping, got a list"),
    ("  cases:\n    - {name: c, call: {tool: x, history: [{tool: y, effect: ok}]}, "
     "expect: {effect: allow}}\n", 6, 61,
     "spec.cases[0].call.history[0].effect: invalid value 'ok'"),
    ("  cases:\n    - {name: c, call: {tool: x}, expect: {effect: allow}}\n"
     "    - {name: c, call: {tool: y}, expect: {effect: allow}}\n", 7, 7,
     "duplicate test case name 'c' (first at line 6)"),
])
def test_policy_test_problem_is_reported_at_its_node(tmp_path: Path, body: str, line: int,
                                                     column: int, message: str) -> None:
    path = write(tmp_path, "t.yaml", TEST_HEADER + body)
    problem = only_problem(path)
    assert (problem.file, problem.line, problem.column) == (path, line, column), problem
    assert problem.message.startswith(message), problem.message


def test_records_are_immutable(valid: Documents) -> None:
    policy: ToolPolicy = valid.policies[0]
    with pytest.raises(AttributeError):
        policy.mode = "audit"  # type: ignore[misc]
    with pytest.raises(TypeError):
        policy.params["max_amount"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        valid.sources["x"] = b""  # type: ignore[index]


# -- hostile input ----------------------------------------------------------------------------


def test_alias_expansion_bomb_is_rejected_without_expanding(tmp_path: Path) -> None:
    lines = ['  params:', '    a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"    a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    path = write(tmp_path, "p.yaml", HEADER + "\n".join(lines) + "\n")
    found = problems(path)
    assert len(found) == 80
    assert {p.message for p in found} == {"YAML aliases (*name) are not supported: write the "
                                          "value out"}
    assert (found[0].line, found[0].column) == (8, 14)


def test_deep_nesting_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    path = write(tmp_path, "p.yaml", "a: " + "[" * 5000 + "]" * 5000 + "\n")
    assert only_problem(path) == Problem(path, 1, 67, "YAML syntax error: nesting deeper "
                                                      "than 64 levels")


def test_unprintable_character_is_a_problem(tmp_path: Path) -> None:
    path = write(tmp_path, "p.yaml", HEADER + "  mode: 'a\x07'\n")
    assert only_problem(path) == Problem(path, 6, 11, "YAML syntax error: unacceptable "
                                                      "character #x0007")


@pytest.mark.parametrize("depth", [62, 63, 64, 65])
def test_fast_and_exact_yaml_readers_agree_on_the_nesting_bound(
    tmp_path: Path, depth: int
) -> None:
    """libyaml reads ordinary files; the bound must be the same as the exact reader's."""
    from guardrails.model import _yaml

    text = "a: " + "[" * depth + "1" + "]" * depth + "\n"
    src = _yaml.SourceFile(str(tmp_path / "d.yaml"), text)
    fast = _yaml._compose_fast(text)
    exact = _yaml._compose_exact(src)
    assert (fast is not None) == (not src.problems)
    assert bool(exact) == (not src.problems)


@pytest.mark.parametrize("depth", [62, 63, 64, 65, 66])
def test_the_fast_composer_takes_exactly_what_the_exact_one_accepts(depth: int) -> None:
    """Around the nesting bound, in flow and block style, with mappings and sequences:
    libyaml's nodes are kept exactly when the exact composer finds no problem."""
    from guardrails.model import _yaml

    flow = "[" * (depth - 1) + "1" + "]" * (depth - 1)
    block = "".join("  " * i + "- " + ("\n" if i < depth - 2 else "x\n") for i in range(depth - 1))
    mixed = "".join("  " * i + "k:\n" for i in range(depth - 2)) + "  " * (depth - 2) + "k: [v]\n"
    for text in (flow, block, mixed):
        exact = _yaml.SourceFile("f.yaml", text)
        _yaml._compose_exact(exact)
        fast = _yaml._compose_fast(text)
        assert (fast is not None) == (not exact.problems), (depth, text[:80], exact.problems)


def test_the_fast_composer_tags_every_scalar_as_the_exact_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast composer remembers plain scalars' tags by text: the same texts plain,
    quoted, as keys, in flow and block style, repeated, and past the memo's bound (so it
    is cleared and refilled), are tagged as the pure-Python composer tags them."""
    from guardrails.model import _yaml

    monkeypatch.setattr(_yaml, "_PLAIN_TAGS_MAX", 8)
    words = ["1", "-1", "0x1f", "0o7", "1_000", "1.5", ".inf", "-.Inf", ".nan", "1e3", "true",
             "False", "on", "yes", "no", "off", "y", "~", "null", "Null", "2026-12-03",
             "2026-12-03T07:00:00Z", "12:30", "deny", "=", "<<", "'1'", '"true"', "x y"]
    lines = [f"k{i}: {w}\n{w if w[0] not in chr(39) + chr(34) else 'q' + str(i)}: {w}\n"
             for i, w in enumerate(words)]
    text = "".join(lines) * 2 + "l: [" + ", ".join(words) + "]\n"

    def tags(node: object) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, _yaml.MappingNode):
                out.append((n.tag, ""))
                stack.extend(x for kv in n.value for x in kv)
            elif isinstance(n, _yaml.SequenceNode):
                out.append((n.tag, ""))
                stack.extend(n.value)
            else:
                assert isinstance(n, _yaml.ScalarNode)
                out.append((n.tag, n.value))
        return out

    exact_src = _yaml.SourceFile("f.yaml", text)
    exact = _yaml._compose_exact(exact_src)
    fast = _yaml._compose_fast(text)
    assert not exact_src.problems and fast is not None
    assert [tags(n) for n in fast] == [tags(n) for n in exact]
    assert {t for t, _ in tags(fast[0])} >= {_yaml.INT, _yaml.FLOAT, _yaml.BOOL, _yaml.NULL,
                                             _yaml.TIMESTAMP, _yaml.STR, _yaml.MAP, _yaml.SEQ}
    assert len(_yaml._PLAIN_TAGS) <= 8


@pytest.mark.parametrize("regex", ["(", "(a)\\1", "a{1001}", "[z-a]"])
def test_a_rejected_redact_pattern_writes_nothing_to_stderr(
        tmp_path: Path, capfd: pytest.CaptureFixture[str], regex: str) -> None:
    """The loader checks ``redact`` patterns with the options every policy regex is
    compiled with (``expr.lib_common.RE2_OPTIONS``, quiet): RE2's C++ logging would write
    to the process's stderr, around the loader's own message."""
    path = write(tmp_path, "p.yaml", HEADER + f"  redact:\n    - {{name: r, regex: '{regex}'}}\n")
    problem = only_problem(path)
    assert "invalid RE2 regular expression" in problem.message, problem
    assert capfd.readouterr().err == ""
