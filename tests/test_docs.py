"""The documentation stays true: its policies load, its PolicyTest examples pass against the
library, its CLI examples run, and the names it cites exist.

Conventions the docs follow so that this file can check them:

* every fenced block containing ``apiVersion: guardrails/v1`` is a document that must load;
  a block meant as a fragment is preceded by ``<!-- docs-test: fragment -->``;
* a ``paramsFile`` a snippet names is created (an empty mapping) beside it, and the
  ``spec.policies`` a PolicyTest snippet names are taken from the repository's ``policies/``,
  whose library versions the examples are written against.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

import guardrails
from guardrails import telemetry
from guardrails.cli.main import main as cli_main
from guardrails.expr.library import FUNCTIONS, METHODS
from guardrails.expr.limits import Limits
from guardrails.testing import render_text, run_tests

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
FRAGMENT = "<!-- docs-test: fragment -->"


@dataclass(frozen=True)
class Block:
    file: Path
    line: int
    lang: str
    body: str
    fragment: bool

    @property
    def id(self) -> str:
        return f"{self.file.name}:{self.line}"


def _blocks() -> list[Block]:
    out = []
    for f in DOCS:
        text = f.read_text()
        for m in FENCE.finditer(text):
            before = text[: m.start()].rstrip()
            out.append(Block(f, text[: m.start()].count("\n") + 1, m.group(1), m.group(2),
                             before.endswith(FRAGMENT)))
    return out


BLOCKS = _blocks()
POLICY_BLOCKS = [b for b in BLOCKS if "apiVersion: guardrails/v1" in b.body]


def test_docs_have_policy_examples() -> None:
    # The extraction itself can break (a fence style change): make that visible.
    assert len(POLICY_BLOCKS) >= 4
    assert any(b.fragment for b in POLICY_BLOCKS)


def _materialise(block: Block, folder: Path) -> Path:
    folder.mkdir()
    target = folder / "example.yaml"
    target.write_text(block.body)
    for doc in yaml.safe_load_all(block.body):
        spec = (doc or {}).get("spec") or {}
        if isinstance(spec.get("paramsFile"), str):
            (folder / spec["paramsFile"]).write_text("{}\n")
        for name in spec.get("policies") or ():
            shutil.copy(ROOT / "policies" / name, folder / name)
    return folder


@pytest.mark.parametrize("block", [b for b in POLICY_BLOCKS if not b.fragment],
                         ids=lambda b: b.id)
def test_policy_example_loads(block: Block, tmp_path: Path) -> None:
    folder = _materialise(block, tmp_path / "ex")
    policies = guardrails.load(folder)
    kinds = {d.get("kind") for d in yaml.safe_load_all(block.body) if d}
    if "ToolPolicy" in kinds:
        assert policies.policies
    if "PolicyTest" in kinds:
        report = run_tests(folder)
        assert report.results and report.passed, render_text(report)


@pytest.mark.parametrize("block", [b for b in POLICY_BLOCKS if b.fragment], ids=lambda b: b.id)
def test_fragments_really_are_fragments(block: Block, tmp_path: Path) -> None:
    (tmp_path / "f.yaml").write_text(block.body)
    with pytest.raises(guardrails.PolicyError):
        guardrails.load(tmp_path)


RULE_SNIPPET = re.compile(r"^- name: ", re.M)


@pytest.mark.parametrize(
    "block", [b for b in BLOCKS if b.lang == "yaml" and "apiVersion" not in b.body
              and RULE_SNIPPET.match(b.body)], ids=lambda b: b.id)
def test_rule_snippets_compile(block: Block, tmp_path: Path) -> None:
    """Rule snippets (a list of rules) compile inside a policy with the library's params
    and the shipped library ``origin``."""
    rules = yaml.safe_load(block.body)
    doc = {"apiVersion": "guardrails/v1", "kind": "ToolPolicy", "metadata": {"name": "snippet"},
           "spec": {"params": {"known_payees": ["GB82WEST12345698765432"]}, "uses": ["origin"],
                    "rules": rules}}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(doc))
    guardrails.load(tmp_path)


def test_complete_policy_example_behaves_as_documented(tmp_path: Path) -> None:
    [block] = [b for b in POLICY_BLOCKS if b.file.name == "policy-language.md"
               and "kind: ToolPolicy" in b.body and "name: payments" in b.body]
    policies = guardrails.load(_materialise(block, tmp_path / "ex"))
    d = policies.evaluate("pay_invoice", {"recipient": "XX", "amount": "1,500.00"},
                          principal={"tenant": "acme"})
    assert d.effect == "deny" and d.arguments["amount"] == 1500.0
    assert [r.rule for r in d.rules] == ["unknown-payee"]
    assert d.message == "unknown payee XX"
    assert policies.redact("card 4111 1111 1111 1111") == "card [REDACTED:card]"
    other = policies.evaluate("pay_invoice", {"recipient": "XX"}, principal={"tenant": "x"})
    assert other.effect == "allow" and other.policies == ()


# --- CLI examples ------------------------------------------------------------------------

CLI_LINE = re.compile(r"^\$ (guardrails .*?)$", re.M)


def _cli_examples() -> list[tuple[str, str]]:
    out = []
    for b in BLOCKS:
        body = b.body.replace("\\\n", " ")
        out += [(b.id, m.group(1)) for m in CLI_LINE.finditer(body)]
    return out


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli_main(argv)
    return code, capsys.readouterr().out


@pytest.mark.parametrize(("where", "command"), _cli_examples(), ids=lambda x: x)
def test_cli_examples_run(where: str, command: str, capsys: pytest.CaptureFixture[str],
                          monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    argv = shlex.split(command)[1:]
    monkeypatch.chdir(ROOT)
    if "--tools" in argv:
        # The docs' tools.json: the schema the example shows, written out.
        tools = tmp_path / "tools.json"
        tools.write_text('{"send_money": {"type": "object", "properties": '
                         '{"recipient": {"type": "string"}, "amount": {"type": "number"}}}}')
        argv[argv.index("--tools") + 1] = str(tools)
    if "--principal" in argv:
        # The docs' principal.json, as the example writes it.
        principal = tmp_path / "principal.json"
        principal.write_text('{"user": "ann", "roles": ["payments"], "tenant": "acme"}')
        argv[argv.index("--principal") + 1] = str(principal)
    code, out = _run(argv, capsys)
    assert code in (0, 1), (where, command)
    if argv[0] == "eval":
        assert '"effect": "require_approval"' in out
    elif argv[0] == "check" and "--tools" not in argv and "--principal" not in argv:
        assert code == 0 and out.startswith("ok: 7 policies")


def test_cli_usage_line_matches_parsers(capsys: pytest.CaptureFixture[str]) -> None:
    """Every flag the synopsis in docs/cli.md lists is accepted by that command."""
    text = (ROOT / "docs" / "cli.md").read_text()
    synopsis = FENCE.search(text)
    assert synopsis is not None
    for line in synopsis.group(2).replace("\n                          ", " ").splitlines():
        words = line.split()
        command = words[1]
        with pytest.raises(SystemExit):
            cli_main([command, "--help"]) if command != "demo" else cli_main(["demo", "-h"])
        helptext = capsys.readouterr().out
        for flag in re.findall(r"--[a-z-]+|-v\b", line):
            assert flag in helptext, (command, flag)


def test_schema_command_prints_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(["schema"], capsys)
    assert code == 0 and '"ToolPolicy"' in out


def test_library_suites_pass_as_docs_claim(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(["test", str(ROOT / "policies"), "--require-coverage"], capsys)
    assert code == 0, out


# --- names the docs cite --------------------------------------------------------------------


def _all_text() -> str:
    return "\n".join(f.read_text() for f in DOCS)


def test_every_library_function_is_documented() -> None:
    text = (ROOT / "docs" / "functions.md").read_text()
    for name in [*FUNCTIONS, *METHODS]:
        if "@" in name:  # the runtime of optional syntax: not callable by name
            continue
        assert re.search(rf"\b{re.escape(name)}\(", text), name


def test_telemetry_names_are_documented() -> None:
    text = (ROOT / "docs" / "telemetry.md").read_text()
    names = [v for k, v in vars(telemetry).items()
             if k.isupper() and isinstance(v, str) and (v.startswith(("guardrails.", "gen_ai.",
                                                                      "error.")))]
    assert len(names) > 20
    for name in names:
        assert f"`{name}`" in text, name
    for metric in ("guardrails.decisions", "guardrails.rules.fired",
                   "guardrails.evaluation.duration", "guardrails.evaluation.errors",
                   "guardrails.decision_log.errors"):
        assert f"`{metric}`" in text
    documented = set(re.findall(r"`(guardrails\.[a-z_.]+)`", text))
    known = set(names) | {"guardrails.decisions", "guardrails.rules.fired",
                          "guardrails.evaluation.duration", "guardrails.evaluation.errors",
                          "guardrails.decision_log.errors", "guardrails.signal.errors",
                          "guardrails.guard",
                          "guardrails.telemetry", "guardrails.agent_framework.ScriptedChatClient",
                          "guardrails.telemetry.DecisionSink",
                          "guardrails.telemetry.decision_record", "guardrails.PolicyViolation"}
    assert documented <= known, documented - known


def test_limits_table_matches_defaults() -> None:
    text = (ROOT / "docs" / "policy-language.md").read_text()
    d = Limits()
    for value in (d.max_expression_length, d.max_nesting_depth, d.max_comprehension_nesting,
                  d.max_cost, d.max_input_bytes, d.max_input_depth, d.max_history,
                  d.max_result_chars, d.max_history_result_chars):
        assert re.search(rf"\| {value:,}( bytes)? \|", text), value


def test_guard_signature_is_documented() -> None:
    import inspect

    from guardrails.agent_framework import guard

    text = (ROOT / "docs" / "integration.md").read_text()
    for name in inspect.signature(guard).parameters:
        assert f"{name}=" in text or name == "policies", name


def test_no_stale_module_names() -> None:
    text = _all_text()
    assert "guardrails._scripted" not in text
    for dotted in set(re.findall(r"`(guardrails(?:\.[A-Za-z_]+)+)", text)):
        module, _, attr = dotted.rpartition(".")
        try:
            __import__(dotted)
            continue
        except ImportError:
            pass
        if dotted.startswith(("guardrails.decision", "guardrails.rule", "guardrails.polic",
                              "guardrails.repair", "guardrails.error", "guardrails.evaluation",
                              "guardrails.audit", "guardrails.approval", "guardrails.halt",
                              "guardrails.guard", "guardrails.decisions", "guardrails.signal",
                              "guardrails.reload", "guardrails.source")):
            continue  # telemetry names and logger names, checked above
        mod = __import__(module, fromlist=[attr])
        assert hasattr(mod, attr), dotted


async def test_offline_testing_snippet_runs() -> None:
    """docs/integration.md's ScriptedChatClient example runs against the library policies."""
    from agent_framework import tool

    [block] = [b for b in BLOCKS if b.file.name == "integration.md"
               and "ScriptedChatClient([" in b.body]

    @tool
    def send_money(recipient: str, amount: float) -> str:
        """Pay an amount to an IBAN."""
        return f"paid {amount}"

    namespace: dict[str, object] = {"policies": guardrails.load(ROOT / "policies"),
                                    "send_money": send_money}
    source = "async def _snippet():\n" + textwrap.indent(block.body, "    ") + \
        "    return result_text(result)\n"
    exec(compile(source, block.id, "exec"), namespace)
    assert await namespace["_snippet"]() == "paid 120.5"  # type: ignore[operator]


def test_demo_command_runs_offline() -> None:
    """`guardrails demo` (README's `make demo`) contains the attack: exit 0."""
    done = subprocess.run([sys.executable, "-m", "guardrails.demo"], capture_output=True,
                          text=True, timeout=60, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
