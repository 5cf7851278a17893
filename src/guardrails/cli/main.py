"""Argument parsing and the five subcommands (see the package docstring for exit codes)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any, NoReturn, TextIO

OK, PROBLEMS, BAD_INPUT = 0, 1, 2


class UsageError(Exception):
    """Bad input: reported as one line on stderr, exit 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (not the usage block and then the error)."""

    def error(self, message: str) -> NoReturn:
        self.exit(BAD_INPUT, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    from guardrails import __version__

    parser = _Parser(
        prog="guardrails",
        description="Policy-as-code guardrails (YAML + CEL) for tool-using AI agents.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("check", help="load, validate and compile policies",
                       description="Load, validate and compile policies; print every problem "
                       "as file:line:col: message. Exit 0 ok, 1 problems, 2 bad usage.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="policy file or directory")
    p.add_argument("--tools", metavar="FILE",
                   help="JSON/YAML tool schemas (name -> parameters schema, or a list of "
                   "function definitions): also check argument names and types against "
                   "them")
    p.add_argument("--strict", action="store_true",
                   help="treat warnings as errors (exit 1 when there is any)")
    _format_option(p)
    p.set_defaults(run=_check)

    p = sub.add_parser("test", help="run PolicyTest documents with the production engine",
                       description="Run PolicyTest documents. Exit 0 pass, 1 fail, 2 bad input.")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="test/policy file or directory")
    p.add_argument("--coverage", action="store_true",
                   help="list rules and repairs that no case fired, per policy")
    p.add_argument("--require-coverage", action="store_true",
                   help="also fail (exit 1) when a rule or repair was never exercised")
    p.add_argument("-v", "--verbose", action="store_true", help="list passing cases too")
    _format_option(p)
    p.set_defaults(run=_test)

    p = sub.add_parser("eval", help="decide one tool call and print the decision as JSON",
                       description="Evaluate one call and print Decision.to_dict() as JSON.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="policy file or directory")
    p.add_argument("--tool", required=True, help="tool name")
    p.add_argument("--args", default="{}", metavar="JSON", help="arguments (a JSON object)")
    p.add_argument("--principal", metavar="JSON", help="principal (a JSON object)")
    p.add_argument("--history", metavar="JSON",
                   help='earlier calls (a JSON list of {"tool", "args", "effect"})')
    p.add_argument("--request", metavar="TEXT", help="text of the user's request")
    p.add_argument("--description", default="", metavar="TEXT", help="tool description")
    p.add_argument("--agent", metavar="NAME", help="the calling agent's name or id "
                   "(match.agents, bindings)")
    p.add_argument("--explain", action="store_true",
                   help="add the value every expression produced (secrets redacted)")
    p.set_defaults(run=_eval)

    p = sub.add_parser("schema", help="print the JSON Schema of guardrails/v1 documents",
                       description="Print the JSON Schema (draft 2020-12) of guardrails/v1 "
                       "documents, for editors and the YAML language server.")
    p.set_defaults(run=_schema)

    from guardrails.cli import bundle

    bundle.add_parser(sub)

    p = sub.add_parser("demo", help="run the offline guarded-agent demo", add_help=False)
    p.set_defaults(run=_demo, demo_args=[])
    return parser


def _format_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text for people (default), json for machines")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``guardrails`` console script; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if argv[:1] == ["demo"]:
        # The demo parses its own options (argparse's REMAINDER drops leading flags).
        args = argparse.Namespace(command="demo", demo_args=argv[1:], run=_demo)
    else:
        args = parser.parse_args(argv)
    try:
        code: int = args.run(args, sys.stdout)
    except UsageError as e:
        print(f"guardrails {args.command}: error: {e}", file=sys.stderr)
        return BAD_INPUT
    except BrokenPipeError:  # e.g. `guardrails schema | head`
        return OK
    return code


# --- check ---------------------------------------------------------------------------


def _check(args: argparse.Namespace, out: TextIO) -> int:
    from guardrails import PolicyError
    from guardrails.engine.compile import load_with_warnings
    from guardrails.engine.lint import Finding, lint

    tools = _read_tools(args.tools) if args.tools else None
    try:
        policies, warnings = load_with_warnings(args.paths)
    except PolicyError as e:
        if args.format == "json":
            _dump({"ok": False, "problems": [p.to_dict() for p in e.errors],
                   "findings": [], "policies": [], "revision": None}, out)
        else:
            for p in e.errors:
                print(p, file=out)
            n = len(e.errors)
            print(f"{n} problem{'s' if n != 1 else ''}", file=out)
        return PROBLEMS

    findings = [Finding("warning", w.file, w.line, w.column, w.message) for w in warnings]
    if tools is not None:
        findings.extend(lint(policies, tools))
    findings.sort(key=lambda f: (f.file == "", f.file, f.line, f.column))
    failing = ("error", "warning") if args.strict else ("error",)
    errors = [f for f in findings if f.severity in failing]
    names = [p.name for p in policies.policies]
    if args.format == "json":
        _dump({"ok": not errors, "problems": [], "findings": [f.to_dict() for f in findings],
               "policies": names, "revision": policies.revision}, out)
    else:
        for f in findings:
            print(f, file=out)
        if errors:
            n = len(errors)
            what = "error" if not args.strict else "error or warning (--strict)"
            print(f"{n} {what}{'s' if n != 1 and not args.strict else ''}", file=out)
        else:
            n = len(names)
            print(f"ok: {n} polic{'ies' if n != 1 else 'y'}, revision {policies.revision[:12]}",
                  file=out)
    return PROBLEMS if errors else OK


def _read_tools(path: str) -> dict[str, Any]:
    import yaml

    from guardrails.engine.lint import parse_tools
    from guardrails.model.loader import MAX_FILE_BYTES, UnreadableFile, read_regular_file

    try:
        # A FIFO or a device given as the tools file is refused, not read (it would hang).
        text = read_regular_file(path, MAX_FILE_BYTES).decode("utf-8")
        data = yaml.safe_load(text)  # YAML is a superset of JSON
    except OSError as e:
        raise UsageError(f"cannot read tools file {path}: {e.strerror}") from None
    except (UnreadableFile, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read tools file {path}: {e}") from None
    except yaml.YAMLError as e:
        raise UsageError(f"tools file {path} is not valid JSON/YAML: "
                         f"{_one_line(str(e))}") from None
    except RecursionError:  # PyYAML's parser recurses once per nesting level
        raise UsageError(f"tools file {path} is nested too deeply to read") from None
    try:
        return parse_tools(data)
    except ValueError as e:
        raise UsageError(f"tools file {path}: {e}") from None
    except RecursionError:
        raise UsageError(f"tools file {path}: a schema is nested too deeply") from None


# --- test ----------------------------------------------------------------------------


def _test(args: argparse.Namespace, out: TextIO) -> int:
    from guardrails import PolicyError
    from guardrails.testing import Runner, TestInputError, render_json, render_text

    try:
        report = Runner().run(args.paths)
    except PolicyError as e:
        raise UsageError(_problems_line(e)) from None
    except TestInputError as e:
        raise UsageError(str(e)) from None
    if args.format == "json":
        out.write(render_json(report))
    else:
        out.write(render_text(report, coverage=args.coverage or args.require_coverage,
                              verbose=args.verbose))
    if not report.passed:
        return PROBLEMS
    if args.require_coverage and report.uncovered:
        return PROBLEMS
    return OK


def _problems_line(error: Any) -> str:
    """Every problem on one line: bad input is reported as a single stderr line."""
    problems = list(error.errors)
    first = str(problems[0]) if problems else str(error)
    more = len(problems) - 1
    return first + (f" (and {more} more problem{'s' if more != 1 else ''}; "
                    f"run 'guardrails check' for all)" if more > 0 else "")


# --- eval ----------------------------------------------------------------------------


def _eval(args: argparse.Namespace, out: TextIO) -> int:
    import guardrails

    call_args = _json_arg("--args", args.args, dict)
    principal = _json_arg("--principal", args.principal, dict) if args.principal else None
    history = _json_arg("--history", args.history, list) if args.history else None
    try:
        policies = guardrails.load(args.paths)
    except guardrails.PolicyError as e:
        raise UsageError(_problems_line(e)) from None
    kwargs: dict[str, Any] = {"principal": principal, "history": history,
                              "request": args.request, "description": args.description,
                              "agent": args.agent}
    if args.explain:
        explanation = policies.explain(args.tool, call_args, **kwargs)
        result = explanation.decision.to_dict()
        result["explain"] = explanation.to_dict()["policies"]
    else:
        result = policies.evaluate(args.tool, call_args, **kwargs).to_dict()
    _dump(result, out)
    return OK


def _json_arg(flag: str, text: str, kind: type) -> Any:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{flag} is not valid JSON: {e}") from None
    if not isinstance(value, kind):
        want = "object" if kind is dict else "list"
        raise UsageError(f"{flag} must be a JSON {want}, got {type(value).__name__}")
    return value


# --- schema and demo -----------------------------------------------------------------


def _schema(args: argparse.Namespace, out: TextIO) -> int:
    from guardrails.model.schema import json_schema

    _dump(json_schema(), out)
    return OK


def _demo(args: argparse.Namespace, out: TextIO) -> int:
    import importlib

    try:
        demo = importlib.import_module("guardrails.demo")
    except ModuleNotFoundError as e:
        if e.name != "guardrails.demo":
            raise
        raise UsageError("the demo is not part of this installation") from None
    return int(demo.main(list(args.demo_args)) or 0)


def _dump(value: Any, out: TextIO) -> None:
    out.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def _one_line(text: str) -> str:
    return " ".join(text.split())
