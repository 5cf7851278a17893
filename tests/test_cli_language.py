"""The CLI commands and flags people expect from OPA, Cedar and Kyverno: the console script
run as a subprocess, good input and bad (bad input: exit 2 and one line on stderr)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from tests.test_cli_commands import BROKEN, FAILING, GOOD, one_line_error, run

ROOT = Path(__file__).resolve().parent.parent
POLICIES = ROOT / "policies"


# --- fmt -----------------------------------------------------------------------------

UGLY = """\
# a comment that stays
apiVersion: guardrails/v1
kind: ToolPolicy
metadata:
    name: ugly{TRAILING}
spec:
    match: {tools: [send_money]}
    rules:
    -   name: drop   # trailing comment
        # a comment above a key
        when: 'has(args.q) && args.q.matches("\\\\bdrop\\\\b")'
        action: deny
        message: "zero\\u200bwidth"
    - name: folded
      when: 'has(args.q)'
      action: warn
      message: >
          text that wraps
          # not a comment: block text


""".replace("{TRAILING}", "   ")

CANONICAL = """\
# a comment that stays
apiVersion: guardrails/v1
kind: ToolPolicy
metadata:
  name: ugly
spec:
  match: {tools: [send_money]}
  rules:
    - name: drop   # trailing comment
      # a comment above a key
      when: 'has(args.q) && args.q.matches("\\\\bdrop\\\\b")'
      action: deny
      message: "zero\\u200bwidth"
    - name: folded
      when: 'has(args.q)'
      action: warn
      message: >
          text that wraps
          # not a comment: block text
"""


def test_fmt_rewrites_to_the_canonical_layout_and_keeps_quoting(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(UGLY, encoding="utf-8")
    proc = run("fmt", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"formatted {f}"
    assert f.read_text(encoding="utf-8") == CANONICAL
    # The formatted policy still loads and means the same.
    check = run("check", f)
    assert check.returncode == 0, check.stdout
    again = run("fmt", "--check", f)
    assert again.returncode == 0 and again.stdout == ""


def test_fmt_check_lists_files_that_would_change_and_writes_nothing(tmp_path: Path) -> None:
    ugly, clean = tmp_path / "a.yaml", tmp_path / "b.yaml"
    ugly.write_text(UGLY, encoding="utf-8")
    clean.write_text(CANONICAL, encoding="utf-8")
    proc = run("fmt", "--check", tmp_path)
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == [str(ugly)]
    assert ugly.read_text(encoding="utf-8") == UGLY


def test_fmt_diff_prints_a_unified_diff(tmp_path: Path) -> None:
    f = tmp_path / "a.yaml"
    f.write_text(UGLY, encoding="utf-8")
    proc = run("fmt", "--diff", f)
    assert proc.returncode == 1
    assert "-    name: ugly" in proc.stdout and "+  name: ugly" in proc.stdout
    assert f.read_text(encoding="utf-8") == UGLY


def test_fmt_leaves_the_shipped_policies_as_they_are() -> None:
    proc = run("fmt", "--check", POLICIES, ROOT / "samples", GOOD, FAILING)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_fmt_broken_yaml_is_one_line_exit_2_and_writes_nothing(tmp_path: Path) -> None:
    ugly = tmp_path / "a.yaml"
    ugly.write_text(UGLY, encoding="utf-8")
    broken = tmp_path / "b.yaml"
    broken.write_text(BROKEN.read_text(encoding="utf-8"), encoding="utf-8")
    line = one_line_error(run("fmt", tmp_path))
    assert f"{broken}:" in line and "invalid YAML" in line
    assert ugly.read_text(encoding="utf-8") == UGLY  # all or nothing


def test_fmt_missing_path_is_one_line_exit_2(tmp_path: Path) -> None:
    assert "no such file" in one_line_error(run("fmt", tmp_path / "nope.yaml"))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fmt_refuses_a_fifo_in_the_tree_without_reading_it(tmp_path: Path) -> None:
    """fmt reads as the loader reads: a FIFO named like a policy would block a plain
    open() forever; it is refused, and (all or nothing) no other file is rewritten."""
    ugly = tmp_path / "a.yaml"
    ugly.write_text(UGLY, encoding="utf-8")
    os.mkfifo(tmp_path / "b.yaml")
    line = one_line_error(run("fmt", tmp_path))
    assert f"{tmp_path / 'b.yaml'}: cannot read: not a regular file" in line, line
    assert ugly.read_text(encoding="utf-8") == UGLY


def test_fmt_names_the_files_once_as_the_loader_does(tmp_path: Path) -> None:
    f = tmp_path / "d" / "p.yaml"
    f.parent.mkdir()
    f.write_text(UGLY, encoding="utf-8")
    proc = run("fmt", "--check", "./d/", "d/p.yaml", "d/../d", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines() == ["d/p.yaml"]
    assert run("fmt", "--check", "./empty", cwd=tmp_path).returncode == 2
    (tmp_path / "empty").mkdir()
    assert run("fmt", "--check", "./empty", cwd=tmp_path).returncode == 0


# --- test -k / --run, --fail-fast, --format junit ---------------------------------------


def test_test_run_pattern_selects_cases() -> None:
    proc = run("test", FAILING, "-k", "passes$", "-v")
    assert proc.returncode == 0, proc.stdout
    assert "1 passed, 0 failed (1 cases" in proc.stdout
    proc = run("test", FAILING, "--run", "wrong-expectations/expects")
    assert proc.returncode == 1
    assert "0 passed, 1 failed" in proc.stdout


@pytest.mark.parametrize("pattern, text", [("no-such-case", "no test case matches"),
                                           ("(", "invalid pattern")])
def test_test_bad_pattern_is_one_line_exit_2(pattern: str, text: str) -> None:
    assert text in one_line_error(run("test", FAILING, "-k", pattern))


def test_test_fail_fast_stops_at_the_first_failure(tmp_path: Path) -> None:
    f = tmp_path / "t.yaml"
    f.write_text(
        "apiVersion: guardrails/v1\nkind: PolicyTest\nmetadata: {name: ff}\nspec:\n"
        f"  policies: [{GOOD / 'payments.yaml'}]\n  cases:\n"
        "    - {name: one, call: {tool: send_money, args: {recipient: XX, amount: 1}},"
        " expect: {effect: allow}}\n"
        "    - {name: two, call: {tool: send_money, args: {recipient: XX, amount: 1}},"
        " expect: {effect: allow}}\n", encoding="utf-8")
    every = run("test", f, "--format", "json")
    first = run("test", f, "--format", "json", "--fail-fast")
    assert every.returncode == first.returncode == 1
    assert json.loads(every.stdout)["failed"] == 2
    assert json.loads(first.stdout)["failed"] == 1
    assert [r["case"] for r in json.loads(first.stdout)["results"]] == ["one"]


def test_test_junit_output_parses_and_names_failures() -> None:
    proc = run("test", FAILING, "--format", "junit")
    assert proc.returncode == 1
    root = ET.fromstring(proc.stdout)
    assert root.tag == "testsuites" and root.get("tests") == "2" and root.get("failures") == "1"
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "wrong-expectations"
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert cases["passes"].find("failure") is None
    failure = cases["expects the wrong effect and rules"].find("failure")
    assert failure is not None and "effect" in (failure.get("message") or "")
    assert "- allow" in (failure.text or "") and "+ deny" in (failure.text or "")


def test_test_unknown_format_is_one_line_exit_2() -> None:
    one_line_error(run("test", FAILING, "--format", "xml"))


# --- eval --input, --now, --history FILE, the no-match hint ---------------------------


def test_eval_input_file_holds_the_call_and_flags_override(tmp_path: Path) -> None:
    f = tmp_path / "call.yaml"
    f.write_text("tool: send_money\nargs: {recipient: UK12, amount: '1500'}\n"
                 "principal: {user: ann}\nrequest: pay UK12\n", encoding="utf-8")
    proc = run("eval", GOOD / "payments.yaml", "--input", f)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["effect"] == "require_approval"
    proc = run("eval", GOOD / "payments.yaml", "--input", f, "--args",
               '{"recipient": "XX", "amount": 1}')
    assert json.loads(proc.stdout)["effect"] == "deny"


@pytest.mark.parametrize("content, text", [
    ("[1, 2]", "must hold a JSON/YAML object"),
    ("tool: send_money\nargz: {}\n", "unknown key 'argz'"),
    ("tool: send_money\nargs: [1]\n", "args must be an object"),
    ("args: {}\n", "--tool"),
    ("tool: [\n", "not valid JSON/YAML"),
])
def test_eval_bad_input_file_is_one_line_exit_2(tmp_path: Path, content: str,
                                                 text: str) -> None:
    f = tmp_path / "call.yaml"
    f.write_text(content, encoding="utf-8")
    assert text in one_line_error(run("eval", GOOD / "payments.yaml", "--input", f))


def test_eval_input_missing_file_is_one_line_exit_2(tmp_path: Path) -> None:
    line = one_line_error(run("eval", GOOD / "payments.yaml", "--input", tmp_path / "x.json"))
    assert "--input" in line


@pytest.mark.parametrize("flag", ["--input", "--args", "--history", "--principal"])
@pytest.mark.parametrize("content, text", [
    ("[" * 20_000 + "]" * 20_000, "nested too deeply to read"),
    (b"args: {a: '\xff'}\n", "cannot read"),
    (None, "cannot read"),  # a FIFO: refused, not read (reading it would hang)
])
def test_eval_unreadable_data_file_is_one_line_exit_2(
        tmp_path: Path, flag: str, content: str | bytes | None, text: str) -> None:
    """Every file a flag names is read as the loader reads a policy (one reader for
    --input, --args, --principal, --history, check's --tools and --principal)."""
    f = tmp_path / "data.yaml"
    if content is None:
        if not hasattr(os, "mkfifo"):
            pytest.skip("no FIFOs here")
        os.mkfifo(f)
    elif isinstance(content, bytes):
        f.write_bytes(content)
    else:
        f.write_text(content, encoding="utf-8")
    line = one_line_error(run("eval", GOOD / "payments.yaml", "--tool", "send_money", flag, f))
    assert f"{flag} file {f}" in line and text in line, line


@pytest.mark.parametrize("flag", ["--args", "--history", "--principal"])
def test_eval_deeply_nested_inline_json_is_one_line_exit_2(flag: str) -> None:
    deep = "[" * 30_000 + "]" * 30_000
    value = deep if flag == "--history" else '{"a": ' + deep + "}"
    line = one_line_error(run("eval", GOOD / "payments.yaml", "--tool", "x", flag, value))
    assert f"{flag} is nested too deeply to read" in line, line


def test_a_flag_value_neither_json_nor_a_file_says_so() -> None:
    line = one_line_error(run("eval", GOOD / "payments.yaml", "--tool", "x", "--args", "amount"))
    assert "--args: 'amount' is neither JSON nor a readable file" in line, line


NOW_POLICY = """\
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: hours}
spec:
  match: {tools: [send_money]}
  rules:
    - name: after-hours
      when: 'now.getHours() >= 18'
      action: deny
    - name: repeated
      when: 'history.exists(h, h.tool == "send_money")'
      action: require_approval
"""


def test_eval_now_and_history_file(tmp_path: Path) -> None:
    p = tmp_path / "hours.yaml"
    p.write_text(NOW_POLICY, encoding="utf-8")
    late = run("eval", p, "--tool", "send_money", "--now", "2026-12-01T19:00:00Z")
    early = run("eval", p, "--tool", "send_money", "--now", "2026-12-01T09:00:00+00:00")
    assert json.loads(late.stdout)["effect"] == "deny"
    assert json.loads(early.stdout)["effect"] == "allow"
    h = tmp_path / "history.json"
    h.write_text('[{"tool": "send_money", "args": {}, "effect": "allow"}]', encoding="utf-8")
    proc = run("eval", p, "--tool", "send_money", "--now", "2026-12-01T09:00:00Z",
               "--history", h)
    assert json.loads(proc.stdout)["effect"] == "require_approval", proc.stderr


@pytest.mark.parametrize("value", ["yesterday", "2026-13-01T00:00:00Z", ""])
def test_eval_bad_now_is_one_line_exit_2(value: str) -> None:
    assert "--now" in one_line_error(run("eval", GOOD / "payments.yaml", "--tool", "x",
                                         "--now", value))


def test_eval_hints_when_no_policy_names_the_tool() -> None:
    proc = run("eval", GOOD / "payments.yaml", "--tool", "send_mony")
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["effect"] == "allow"
    assert proc.stderr.startswith("hint: no policy names tool 'send_mony'")
    assert "did you mean 'send_money'?" in proc.stderr
    named = run("eval", GOOD / "payments.yaml", "--tool", "send_money", "--args",
                '{"recipient": "UK12", "amount": 1}')
    assert named.stderr == ""


# --- expr ----------------------------------------------------------------------------


def test_expr_prints_the_value_as_json() -> None:
    proc = run("expr", 'args.amount * 2 + params.k', "--args", '{"amount": 3}',
               "--params", '{"k": 1}')
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == 7
    proc = run("expr", 'principal.user + ":" + request.text + ":" + tool.name',
               "--principal", '{"user": "ann"}', "--request", "hi", "--tool", "send_money")
    assert json.loads(proc.stdout) == "ann:hi:send_money"
    proc = run("expr", '[1, 2, 3].filter(x, x > 1).map(x, {"v": x})')
    assert json.loads(proc.stdout) == [{"v": 2}, {"v": 3}]


def test_expr_reads_time_and_history() -> None:
    proc = run("expr", "now.getFullYear()", "--now", "2030-06-01T00:00:00Z")
    assert json.loads(proc.stdout) == 2030
    proc = run("expr", "size(history)", "--history", '[{"tool": "a", "args": {}}]')
    assert json.loads(proc.stdout) == 1, proc.stderr


def test_expr_compile_error_is_one_line_exit_2_with_position() -> None:
    line = one_line_error(run("expr", "args.x +"))
    assert line.startswith("guardrails expr: error: expr:1:")
    line = one_line_error(run("expr", "[1,\n 2].map(x, x * y)"))
    assert "expr:2:" in line and "'y'" in line
    assert "argz" in one_line_error(run("expr", "argz.x"))


def test_expr_evaluation_error_exits_1() -> None:
    proc = run("expr", "1 / 0")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.strip() == "guardrails expr: evaluation error: division by zero"
    proc = run("expr", "args.missing")
    assert proc.returncode == 1 and "no such key" in proc.stderr


@pytest.mark.parametrize("flags", [["--args", "[1]"], ["--params", "{bad"], ["--now", "x"]])
def test_expr_bad_flags_are_one_line_exit_2(flags: list[str]) -> None:
    one_line_error(run("expr", "1", *flags))


def test_expr_quotes_in_the_expression_do_not_break_out(tmp_path: Path) -> None:
    proc = run("expr", "'a' + \"'\" + '\\n'")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == "a'\n"


# --- python -m guardrails ------------------------------------------------------------


def test_python_dash_m_runs_the_command() -> None:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    proc = subprocess.run([sys.executable, "-m", "guardrails", "check", GOOD / "payments.yaml"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok: 1 policy")
    bad = subprocess.run([sys.executable, "-m", "guardrails", "frob"], capture_output=True,
                         text=True, timeout=120, env=env)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
