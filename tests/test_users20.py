"""New users' mistakes, another pass: a corpus of policies written as people coming from
OPA/Rego, Cedar, Kubernetes ValidatingAdmissionPolicy, JavaScript, Python, SQL and careless
YAML would write them (tests/data/checks/users20/), each with the diagnostic it must get.

Every file says on its second line what `guardrails check --tools tools.json` prints for it
(``# expect: LINE:COL MESSAGE-START``), what `guardrails test` prints for it
(``# expect-test: TEXT``), or that it stays silent (``# expect: nothing``, a gap written
down). The whole corpus is checked in one run, as a user's folder would be: a broken file
does not hide another's finding. Then each new diagnostic's correct twin stays clean.
"""

from __future__ import annotations

import re
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.test_cli_commands import run

CORPUS = Path(__file__).parent / "data" / "checks" / "users20"
TOOLS = CORPUS / "tools.json"
FILES = sorted(p.name for p in CORPUS.glob("*.yaml"))


def _expectation(name: str) -> tuple[str, str]:
    second = (CORPUS / name).read_text().splitlines()[1]
    found = re.match(r"# (expect|expect-test): (.*)$", second)
    assert found, f"{name}: the second line says what to expect"
    return found.group(1), found.group(2)


@pytest.fixture(scope="module")
def check_run() -> tuple[list[str], int]:
    proc = run("check", CORPUS, "--tools", TOOLS)
    return [line.replace(str(CORPUS) + "/", "") for line in proc.stdout.splitlines()], \
        proc.returncode


def test_the_corpus_is_large_enough_and_every_file_says_what_to_expect() -> None:
    assert len(FILES) >= 40
    assert all(_expectation(name) for name in FILES)


@pytest.mark.parametrize("name", FILES)
def test_each_mistake_gets_its_diagnostic(check_run: tuple[list[str], int], name: str) -> None:
    lines, code = check_run
    assert code == 1
    kind, text = _expectation(name)
    mine = [line for line in lines if line.startswith(f"{name}:")]
    if kind == "expect-test":
        proc = run("test", CORPUS / name)
        assert proc.returncode == 1 and text in proc.stdout, proc.stdout + proc.stderr
        return
    if text.startswith("nothing"):
        assert mine == [], mine  # a gap written down: a finding here is news
        return
    position, _, message = text.partition(" ")
    assert any(line.startswith(f"{name}:{position}: {message}") for line in mine), \
        "\n".join(mine)


# -- the new diagnostics' correct twins stay clean -----------------------------------------


def _policy(body: str, *, tools: str = "send_email", head: str = "") -> str:
    return (f"apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {{name: p}}\nspec:\n"
            f"{head}  match: {{tools: [{tools}]}}\n"
            + textwrap.indent(textwrap.dedent(body).strip("\n"), "  ") + "\n")


def _check(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return run("check", path, "--tools", TOOLS, "--strict")


@pytest.mark.parametrize("glob", ["'send_*'", "'send_[em]*'", "'mcp:bank/*'", "send_email",
                                  "'get.weather'", "'mcp:*/send_money'"])
def test_a_glob_is_not_taken_for_a_regex(tmp_path: Path, glob: str) -> None:
    proc = _check(tmp_path, _policy("rules:\n  - {name: r, when: 'true', action: warn}",
                                    tools=glob))
    assert "regular expression" not in proc.stdout, proc.stdout


@pytest.mark.parametrize("glob, fix", [("'send_.+'", "write 'send_*'"),
                                       ("'(send_email)'", "match.tools '(send_email)'"),
                                       ("'send_\\w+'", "shell-style globs")])
def test_other_regex_globs_are_found(tmp_path: Path, glob: str, fix: str) -> None:
    proc = _check(tmp_path, _policy("rules:\n  - {name: r, when: 'true', action: warn}",
                                    tools=glob))
    assert "is a regular expression" in proc.stdout and fix in proc.stdout, proc.stdout


@pytest.mark.parametrize("when, action", [
    ('args.to.matches("^ceo@example\\\\.com$")', "allow"),   # anchored
    ('args.to.matches("@example\\\\.com$")', "allow"),       # a suffix
    ('args.to == "ceo@example.com"', "allow"),
    ('args.body.matches("(?i)\\\\binvoice\\\\b")', "allow"),  # words in free text
    ('args.to.matches("evil")', "deny"),                     # a search that restricts
    ('!args.to.matches("^[a-z]+@example\\\\.com$")', "deny"),
    ('args.to.matches(".*@example\\\\.com.*")', "allow"),    # the search written out
])
def test_an_anchored_or_restricting_match_is_clean(tmp_path: Path, when: str,
                                                   action: str) -> None:
    head = "  defaultAction: deny\n" if action == "allow" else ""
    rules = f"rules:\n  - {{name: r, when: '{when}', action: {action}}}\n"
    if action == "allow":
        rules += "  - {name: big, when: 'size(args.body) > 10000', action: require_approval}\n"
    proc = _check(tmp_path, _policy(rules, head=head))
    assert "anywhere in the text" not in proc.stdout, proc.stdout


@pytest.mark.parametrize("when, action, what", [
    ('!args.to.matches("@example\\\\.com")', "deny", "deny rule (negated) lets through"),
    ('!args.to.matches("@example\\\\.com")', "require_approval", "(negated) lets through"),
    ('args.?to.orValue("").matches("(?i)ceo@example\\\\.com")', "allow", "allow rule"),
    ('args.cc.exists(c, c.matches("partner\\\\.example"))', "allow", "allow rule"),
])
def test_an_unanchored_permit_is_found_in_every_shape(tmp_path: Path, when: str, action: str,
                                                      what: str) -> None:
    head = "  defaultAction: deny\n" if action == "allow" else ""
    proc = _check(tmp_path, _policy(f"rules:\n  - {{name: r, when: '{when}', "
                                    f"action: {action}}}\n", head=head))
    assert "anywhere in the text" in proc.stdout and what in proc.stdout, proc.stdout


def test_an_unanchored_permit_through_a_variable_points_at_the_variable(tmp_path: Path
                                                                       ) -> None:
    proc = _check(tmp_path, _policy("""
        variables:
          - {name: internal, expression: 'args.to.matches("example\\\\.com")'}
        rules:
          - {name: r, when: '!variables.internal', action: deny}
        """))
    found = [line for line in proc.stdout.splitlines() if "anywhere in the text" in line]
    assert len(found) == 1 and "p.yaml:7:53:" in found[0], proc.stdout


@pytest.mark.parametrize("when", ["args.cc == null", "args.urgent == true",
                                  'args.cc.exists(c, c.endsWith("@evil.example"))',
                                  'args.to in ["a@example.com", "b@example.com"]'])
def test_the_cel_spellings_load(tmp_path: Path, when: str) -> None:
    proc = run("check", _write(tmp_path, _policy(
        f"rules:\n  - {{name: r, when: 'has(args.cc) && has(args.urgent) && {when}', "
        f"action: deny}}\n")))
    assert proc.returncode == 0, proc.stdout


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return path


def test_a_quoted_yes_param_compared_with_text_is_clean(tmp_path: Path) -> None:
    proc = run("check", _write(tmp_path, _policy(
        "params: {strict: \"yes\"}\nrules:\n  - {name: r, when: 'params.strict == \"yes\"', "
        "action: warn}\n")))
    assert proc.returncode == 0 and "YAML 1.1" not in proc.stdout, proc.stdout


def test_a_params_key_a_policy_has_is_typed_as_written(tmp_path: Path) -> None:
    proc = run("check", _write(tmp_path, _policy(
        "params: {caps: {amount: 10}, limit: 3}\nrules:\n"
        "  - {name: r, when: 'params.caps.amount > params.limit', action: warn}\n")))
    assert proc.returncode == 0, proc.stdout


def test_an_enforced_policy_has_no_audit_note_and_a_number_case_no_text_note(
        tmp_path: Path) -> None:
    path = _write(tmp_path, _policy(
        "rules:\n  - {name: r, when: 'size(args.to) > 5', action: deny}\n") + textwrap.dedent("""
        ---
        apiVersion: guardrails/v1
        kind: PolicyTest
        metadata: {name: t}
        spec:
          cases:
            - name: wrong expectation
              call: {tool: send_email, args: {to: ann@example.com, subject: "5000", body: b}}
              expect: {effect: allow}
        """))
    proc = run("test", path)
    assert proc.returncode == 1 and "effect:" in proc.stdout, proc.stdout
    assert "mode: audit" not in proc.stdout and "is the text" not in proc.stdout
