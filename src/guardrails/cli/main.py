"""Argument parsing and the subcommands (see the package docstring for exit codes)."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn, TextIO

from guardrails.cli.usage import BAD_INPUT, OK, PROBLEMS, UsageError


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
                   "tool definitions: OpenAI, MCP tools/list, Anthropic): also check "
                   "argument names and types against "
                   "them")
    p.add_argument("--principal", metavar="FILE",
                   help="JSON/YAML: an example principal, or its JSON Schema: also check "
                   "the principal.* keys policies read against it")
    p.add_argument("--agents", metavar="NAMES", action="append",
                   help="the deployment's agent names (or ids), comma-separated or the "
                   "option repeated: also check match.agents of policies and bindings")
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
    p.add_argument("-k", "--run", metavar="PATTERN", dest="pattern",
                   help="run only the cases whose 'suite/case' name this regex is found in")
    p.add_argument("--fail-fast", action="store_true", help="stop at the first failing case")
    _format_option(p, ("text", "json", "junit"))
    p.set_defaults(run=_test)

    p = sub.add_parser("eval", help="decide one tool call and print the decision as JSON",
                       description="Evaluate one call and print Decision.to_dict() as JSON.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="policy file or directory")
    p.add_argument("--input", metavar="FILE",
                   help="JSON/YAML file with the call: {tool, args, principal, history, "
                   "request, description, now} (flags given too take precedence)")
    p.add_argument("--tool", help="tool name")
    _call_options(p)
    p.add_argument("--description", metavar="TEXT", help="tool description")
    p.add_argument("--agent", metavar="NAME", help="the calling agent's name or id "
                   "(match.agents, bindings)")
    p.add_argument("--explain", action="store_true",
                   help="add the value every expression produced (secrets redacted)")
    p.set_defaults(run=_eval)

    p = sub.add_parser("expr", help="evaluate one CEL expression and print its value as JSON",
                       description="Evaluate one expression with the policy engine, as a "
                       "policy variable would be, and print its value as JSON. Exit 0 a "
                       "value, 1 an evaluation error, 2 bad input (a compile error).")
    p.add_argument("expression", metavar="EXPR", help="the CEL expression")
    p.add_argument("--tool", default="tool", help="tool name (tool.name)")
    _call_options(p)
    p.add_argument("--params", metavar="JSON|FILE", help="params (a JSON object)")
    p.set_defaults(run=_expr)

    p = sub.add_parser("fmt", help="format policy files in one canonical layout",
                       description="Re-indent policy files (two spaces, list items under "
                       "their key), trim trailing whitespace; quoting, comments and flow "
                       "lists are kept as written. Exit 0 done, 1 (with --check) files "
                       "would change, 2 bad input.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="YAML file or directory")
    p.add_argument("--check", action="store_true",
                   help="change nothing; list the files that would change and exit 1 if any")
    p.add_argument("--diff", action="store_true", help="change nothing; print a unified diff")
    p.set_defaults(run=_fmt)

    p = sub.add_parser("schema", help="print the JSON Schema of guardrails/v1 documents",
                       description="Print the JSON Schema (draft 2020-12) of guardrails/v1 "
                       "documents, for editors and the YAML language server.")
    p.set_defaults(run=_schema)

    from guardrails.cli import bundle

    bundle.add_parser(sub)

    p = sub.add_parser("demo", help="run the offline guarded-agent demo", add_help=False)
    p.set_defaults(run=_demo, demo_args=[])
    return parser


def _format_option(p: argparse.ArgumentParser,
                   choices: tuple[str, ...] = ("text", "json")) -> None:
    p.add_argument("--format", choices=choices, default="text",
                   help="text for people (default), " + ", ".join(choices[1:]) + " for machines")


def _call_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--args", metavar="JSON|FILE", help="arguments (a JSON object)")
    p.add_argument("--principal", metavar="JSON|FILE", help="principal (a JSON object)")
    p.add_argument("--history", metavar="JSON|FILE",
                   help='earlier calls, oldest first (a JSON list of {"tool", "args", "effect"})')
    p.add_argument("--request", metavar="TEXT", help="text of the user's request")
    p.add_argument("--now", metavar="TIMESTAMP",
                   help="the time the call is decided at (RFC 3339, e.g. 2026-12-01T09:00:00Z)")


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
        command = " ".join(filter(None, (args.command, getattr(args, "action", None))))
        print(f"guardrails {command}: error: {e}", file=sys.stderr)  # bundle: its action too
        return BAD_INPUT
    except BrokenPipeError:  # e.g. `guardrails schema | head`
        return OK
    return code


# --- check ---------------------------------------------------------------------------


def _check(args: argparse.Namespace, out: TextIO) -> int:
    from guardrails import PolicyError
    from guardrails.engine.compile import load_with_warnings
    from guardrails.engine.lint import Finding, lint, lint_policies

    tools = _read_tools(args.tools) if args.tools else None
    principal = _read_principal(args.principal) if args.principal else None

    def findings_of(policies: Any, warnings: Sequence[Any]) -> list[Finding]:
        found = [Finding("warning", w.file, w.line, w.column, w.message) for w in warnings]
        found.extend(lint_policies(policies, principal=principal))
        if tools is not None:
            typed = lint(policies, tools, principal=principal)
            # What the schemas make certain replaces what was only likely without them
            # (`args.n > "3"`: an error for an int n, a warning when n is unknown).
            certain = {(f.file, f.line, f.column) for f in typed if f.severity == "error"}
            found = [f for f in found if f.severity != "warning"
                     or (f.file, f.line, f.column) not in certain]
            found.extend(typed)
        # The schema checks type the expressions again: a finding both make is shown once.
        found = list({(f.severity, f.file, f.line, f.column, f.message): f
                      for f in found}.values())
        found.sort(key=lambda f: (f.file == "", f.file, f.line, f.column))
        return found

    try:
        policies, warnings = load_with_warnings(args.paths)
    except PolicyError as e:
        # Every problem at once: the files that load without the broken ones are checked
        # too, so fixing the load errors does not uncover a second round of findings.
        rest = _loadable_rest(args.paths, {p.file for p in e.errors})
        found = findings_of(*rest) if rest is not None else []
        if args.format == "json":
            _dump({"ok": False, "problems": [p.to_dict() for p in e.errors],
                   "findings": [f.to_dict() for f in found], "policies": [],
                   "revision": None}, out)
        else:
            for p in e.errors:
                print(p, file=out)
            for f in found:
                print(f, file=out)
            n = len(e.errors)
            more = (f"; and {len(found)} finding{'s' if len(found) != 1 else ''} in the "
                    f"files that load without them") if found else ""
            print(f"{n} problem{'s' if n != 1 else ''}{more}", file=out)
        return PROBLEMS

    findings = findings_of(policies, warnings)
    if args.agents:
        findings = sorted([*findings, *_agent_findings(args.paths, args.agents)],
                          key=lambda f: (f.file == "", f.file, f.line, f.column))
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


def _agent_findings(paths: Sequence[str], given: Sequence[str]) -> list[Any]:
    """``--agents``: the selectors naming none of them (the set loaded, so it reads)."""
    from guardrails.engine.lint import lint_agents
    from guardrails.model.loader import read_documents

    agents = [a.strip() for names in given for a in names.split(",") if a.strip()]
    if not agents:
        raise UsageError("--agents: no agent name given")
    documents, _ = read_documents(list(paths))
    return lint_agents(documents, agents)


def _loadable_rest(paths: Sequence[str], broken: set[str]) -> tuple[Any, Any] | None:
    """The policy set of every file the loader reads under ``paths`` but the ``broken``
    ones, when it loads on its own (it may not: a file can need a Library the broken one
    defines)."""
    from guardrails import PolicyError
    from guardrails.engine.compile import load_with_warnings
    from guardrails.model.loader import document_files

    files = document_files(paths, [])
    rest = [f for f in files if f not in broken]
    if not rest or len(rest) == len(files):
        return None
    try:
        return load_with_warnings(rest)
    except PolicyError:
        return None


def _read_data_file(path: str, what: str) -> Any:
    """A JSON or YAML file named on the command line (``what``: the flag or the kind of
    file, for the messages): read as the loader reads a policy, so a FIFO, a device, a
    huge file, broken UTF-8 or deep nesting is one line of error, never a hang or a
    traceback."""
    import yaml

    from guardrails.model.loader import MAX_FILE_BYTES, UnreadableFile, read_regular_file

    try:
        # A FIFO or a device given as the file is refused, not read (it would hang).
        text = read_regular_file(path, MAX_FILE_BYTES).decode("utf-8")
        return yaml.safe_load(text)  # YAML is a superset of JSON
    except OSError as e:
        raise UsageError(f"cannot read {what} file {path}: {e.strerror}") from None
    except (UnreadableFile, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read {what} file {path}: {e}") from None
    except yaml.YAMLError as e:
        raise UsageError(f"{what} file {path} is not valid JSON/YAML: "
                         f"{_one_line(str(e))}") from None
    except RecursionError:  # PyYAML's parser recurses once per nesting level
        raise UsageError(f"{what} file {path} is nested too deeply to read") from None


def _read_principal(path: str) -> Any:
    from guardrails.engine.typecheck import principal_type

    data = _read_data_file(path, "principal")
    try:
        return principal_type(data)
    except (ValueError, RecursionError) as e:
        raise UsageError(f"principal file {path}: {e}") from None


def _read_tools(path: str) -> dict[str, Any]:
    from guardrails.engine.lint import parse_tools

    data = _read_data_file(path, "tools")
    try:
        return parse_tools(data)
    except ValueError as e:
        raise UsageError(f"tools file {path}: {e}") from None
    except RecursionError:
        raise UsageError(f"tools file {path}: a schema is nested too deeply") from None


# --- test ----------------------------------------------------------------------------


def _test(args: argparse.Namespace, out: TextIO) -> int:
    from guardrails import PolicyError
    from guardrails.testing import (
        Runner,
        TestInputError,
        render_json,
        render_junit,
        render_text,
    )

    try:
        report = Runner().run(args.paths, pattern=args.pattern, fail_fast=args.fail_fast)
    except PolicyError as e:
        raise UsageError(_problems_line(e)) from None
    except TestInputError as e:
        raise UsageError(str(e)) from None
    if args.format == "json":
        out.write(render_json(report))
    elif args.format == "junit":
        out.write(render_junit(report))
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


_CALL_KEYS = ("tool", "args", "principal", "history", "request", "description", "now")


def _eval(args: argparse.Namespace, out: TextIO) -> int:
    import guardrails

    call: dict[str, Any] = _read_input(args.input) if args.input else {}
    if args.tool is not None:
        call["tool"] = args.tool
    if args.description is not None:
        call["description"] = args.description
    call.update(_call_flags(args))
    if not isinstance(call.get("tool"), str) or not call["tool"]:
        raise UsageError("the tool to decide is required: --tool T (or \"tool\" in --input)")
    kwargs = _call_kwargs(call)
    if args.agent is not None:
        kwargs["agent"] = args.agent
    try:
        policies = guardrails.load(args.paths)
    except guardrails.PolicyError as e:
        raise UsageError(_problems_line(e)) from None
    tool = call["tool"]
    if args.explain:
        explanation = policies.explain(tool, call.get("args") or {}, **kwargs)
        result = explanation.decision.to_dict()
        result["explain"] = explanation.to_dict()["policies"]
    else:
        result = policies.evaluate(tool, call.get("args") or {}, **kwargs).to_dict()
    _dump(result, out)
    if not any(g != "*" for p in policies.for_tool(tool) for g in p.tools or ("*",)):
        print(f"hint: {_no_match_hint(policies, tool)}", file=sys.stderr)
    return OK


def _read_input(path: str) -> dict[str, Any]:
    """The ``--input`` file: one call, keys as in a PolicyTest case's ``call``."""
    data = _read_data_file(path, "--input")
    if not isinstance(data, dict):
        raise UsageError(f"--input {path} must hold a JSON/YAML object, got "
                         f"{type(data).__name__}")
    unknown = sorted(set(map(str, data)) - set(_CALL_KEYS))
    if unknown:
        raise UsageError(f"--input {path}: unknown key {unknown[0]!r} (expected "
                         f"{', '.join(_CALL_KEYS)})")
    for key, kind in (("args", dict), ("principal", dict), ("history", list)):
        if data.get(key) is not None and not isinstance(data[key], kind):
            want = "an object" if kind is dict else "a list"
            raise UsageError(f"--input {path}: {key} must be {want}, got "
                             f"{type(data[key]).__name__}")
    for key in ("tool", "request", "description"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise UsageError(f"--input {path}: {key} must be text")
    if data.get("now") is not None:
        data["now"] = str(data["now"]) if not isinstance(data["now"], str) else data["now"]
    return dict(data)


def _call_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The call's parts given as flags (absent flags are left out)."""
    found: dict[str, Any] = {}
    if args.args is not None:
        found["args"] = _json_arg("--args", args.args, dict)
    if args.principal is not None:
        found["principal"] = _json_arg("--principal", args.principal, dict)
    if args.history is not None:
        found["history"] = _json_arg("--history", args.history, list)
    if args.request is not None:
        found["request"] = args.request
    if args.now is not None:
        found["now"] = args.now
    return found


def _call_kwargs(call: Mapping[str, Any]) -> dict[str, Any]:
    now = call.get("now")
    return {"principal": call.get("principal"), "history": call.get("history"),
            "request": call.get("request"), "description": call.get("description") or "",
            "now": _timestamp(now) if now is not None else None}


def _timestamp(text: Any) -> datetime.datetime:
    """RFC 3339 (``Z`` or an offset); a time without a zone is UTC."""
    try:
        value = datetime.datetime.fromisoformat(str(text).replace("z", "Z"))
    except ValueError:
        raise UsageError(f"--now {text!r} is not an RFC 3339 timestamp "
                         "(e.g. 2026-12-01T09:00:00Z)") from None
    return value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)


def _no_match_hint(policies: Any, tool: str) -> str:
    """Why a call was allowed without any rule: no policy's ``match.tools`` names it."""
    from guardrails.expr.spelling import closest

    globs = sorted({g for p in policies.policies for g in p.tools or ()})
    close = closest(tool, globs)
    text = (f"no policy names tool {tool!r} (only catch-all policies, if any, decided "
            "this call)")
    if close:
        return text + f"; did you mean {close!r}?"
    shown = ", ".join(globs[:8]) + (", ..." if len(globs) > 8 else "")
    return text + (f" (policies match: {shown})" if globs else " (no policies loaded)")


def _json_arg(flag: str, text: str, kind: type) -> Any:
    """A flag's JSON value, given inline or, when it does not start like JSON, as a file."""
    if text.lstrip()[:1] not in ("{", "[", '"') and not _is_json_scalar(text):
        if not os.path.exists(text):
            raise UsageError(f"{flag}: {text!r} is neither JSON nor a readable file")
        value = _read_data_file(text, flag)
    else:
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            raise UsageError(f"{flag} is not valid JSON: {e}") from None
        except RecursionError:
            raise UsageError(f"{flag} is nested too deeply to read") from None
    if not isinstance(value, kind):
        want = "object" if kind is dict else "list"
        raise UsageError(f"{flag} must be a JSON {want}, got {type(value).__name__}")
    return value


def _is_json_scalar(text: str) -> bool:
    try:
        json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return False
    return True


# --- expr ----------------------------------------------------------------------------


def _missing_key_hint(error: str, data: Mapping[str, Any]) -> str:
    """`` (--args has 'amount')`` for ``no such key: Amount``."""
    import re

    from guardrails.expr.spelling import closest

    found = re.search(r"no such key: (\S+)", error)
    if found is None:
        return ""
    key = found[1]
    for flag, value in data.items():
        if isinstance(value, Mapping):
            close = closest(key, [str(k) for k in value])
            if close and close != key:
                return f" (--{flag} has '{close}': did you mean it?)"
    return ""


def _expr(args: argparse.Namespace, out: TextIO) -> int:
    """One expression, evaluated by the production engine as a policy variable.

    The expression is placed in a one-policy document (with ``params``) and loaded with
    ``guardrails.load``; its value is read from ``explain``: the same compiler, bounds,
    input normalisation and error messages as in a real policy, and nothing to keep in
    step with the engine.
    """
    import tempfile

    import guardrails

    call = _call_flags(args)
    params = _json_arg("--params", args.params, dict) if args.params is not None else {}
    kwargs = _call_kwargs(call)
    source = args.expression
    if not source.strip():
        raise UsageError("the expression is empty")
    body = "\n".join("        " + line for line in source.split("\n"))
    document = (
        "apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: expr}\nspec:\n"
        f"  match: {{tools: ['*']}}\n  params: {json.dumps(params)}\n"
        "  variables:\n    - name: value\n      expression: |-\n" + body + "\n"
        "  rules:\n    - name: read\n      when: 'variables.value == variables.value'\n"
        "      action: warn\n"
    )
    first_line = 10  # the line of the expression's first line in the document
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "expr.yaml")
        with open(path, "w", encoding="utf-8") as f:
            f.write(document)
        try:
            policies = guardrails.load(path)
        except guardrails.PolicyError as e:
            problem = e.errors[0]
            where = "expr"
            if problem.line >= first_line:
                where = f"expr:{problem.line - first_line + 1}:{max(1, problem.column - 8)}"
            raise UsageError(f"{where}: {problem.message}") from None
    explanation = policies.explain(args.tool, call.get("args") or {}, **kwargs)
    for step in explanation.to_dict()["policies"][0]["steps"]:
        if step["element"] == "variables.value":
            if "error" in step:
                error = str(step["error"]).removeprefix("variable value: ")
                error += _missing_key_hint(error, {"args": call.get("args"),
                                                   "principal": call.get("principal"),
                                                   "params": params})
                print(f"guardrails expr: evaluation error: {error}", file=sys.stderr)
                return PROBLEMS
            _dump(step["value"], out)
            return OK
    errors = explanation.decision.errors
    message = errors[0].message if errors else "the expression was not evaluated"
    print(f"guardrails expr: evaluation error: {message}", file=sys.stderr)
    return PROBLEMS


# --- fmt -----------------------------------------------------------------------------


def _fmt(args: argparse.Namespace, out: TextIO) -> int:
    import difflib

    from guardrails.cli.fmt import FormatError, format_text
    from guardrails.model.loader import MAX_FILE_BYTES, UnreadableFile, read_regular_file

    files = _yaml_files(args.paths)
    changed: list[tuple[str, str, str]] = []
    problems: list[str] = []
    for name in files:
        try:
            # As the loader reads it: a FIFO or a device is refused, not read (it would hang).
            before = read_regular_file(name, MAX_FILE_BYTES).decode("utf-8")
        except (OSError, UnreadableFile, UnicodeDecodeError) as e:
            problems.append(f"{name}: cannot read: {getattr(e, 'strerror', None) or e}")
            continue
        try:
            after = format_text(before, name)
        except FormatError as e:
            problems.append(str(e))
            continue
        if after != before:
            changed.append((name, before, after))
    if problems:  # all or nothing: no file is rewritten while another one is broken
        more = len(problems) - 1
        raise UsageError(problems[0] + (f" (and {more} more)" if more else ""))
    if args.diff:
        for name, before, after in changed:
            out.writelines(difflib.unified_diff(before.splitlines(True), after.splitlines(True),
                                                f"{name} (original)", f"{name} (formatted)"))
    elif args.check:
        for name, _, _ in changed:
            print(name, file=out)
    else:
        for name, _, after in changed:
            with open(name, "w", encoding="utf-8", newline="") as f:
                f.write(after)
            print(f"formatted {name}", file=out)
    if (args.check or args.diff) and changed:
        return PROBLEMS
    return OK


def _yaml_files(paths: Sequence[str]) -> list[str]:
    """The files the loader reads for ``paths`` (a folder without YAML files is no error
    here: ``fmt --check`` runs over whole trees)."""
    from guardrails.model.loader import document_files

    for path in paths:
        if not os.path.isdir(path) and not os.path.isfile(path):
            raise UsageError(f"{path}: no such file or directory")
    return document_files(paths, [])


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
