"""Load guardrails/v1 documents from files: every problem at once, or a complete result.

Validation goes on after the first problem so an author sees every mistake in one run;
a builder returns None for a part it could not read and the caller carries on. Only when
no problem was found anywhere is a ``Documents`` returned.

Decisions (the contract leaves them open):

- ``params`` and ``paramsFile`` together merge, inline ``params`` winning per top-level
  key: the file holds shared data, the policy overrides a few values.
- A ``.json`` params file is read as JSON (its numbers keep JSON's meaning); any other
  extension as one YAML document. Either must hold a mapping.
- A YAML file found while walking a directory is not a document file when some policy
  names it as its ``paramsFile`` and it has no ``apiVersion`` key, so params files can sit
  next to their policies.
- YAML aliases and non-standard tags are rejected; mapping keys are their written text.
- ``PolicyTest`` ``spec.policies`` may be omitted: the test then runs against the
  policies loaded together with it. ``expect.effect`` is required; ``expect.errors`` is a
  count.
- Nesting deeper than 64 levels is rejected (PyYAML's composer recurses).
"""

from __future__ import annotations

import datetime
import difflib
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

import re2
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from guardrails.model import _yaml
from guardrails.model._yaml import BOOL, FLOAT, INT, STR, TIMESTAMP, SourceFile, describe
from guardrails.model.documents import (
    API_VERSION,
    DEFAULT_ACTIONS,
    DEFAULT_REPLACEMENT,
    EFFECTS,
    FAILURE_POLICIES,
    HISTORY_EFFECTS,
    MODES,
    RULE_ACTIONS,
    TRUST,
    DefaultAction,
    Documents,
    Effect,
    FailurePolicy,
    HistoryEntry,
    Match,
    Metadata,
    Mode,
    PolicyTest,
    Redaction,
    Repair,
    Rule,
    RuleAction,
    SecretInjection,
    Secrets,
    TestCall,
    TestCase,
    TestExpect,
    ToolPolicy,
    Trust,
    Variable,
)
from guardrails.model.errors import PolicyError, Problem
from guardrails.model.source import Expression, Position

PathArg = str | os.PathLike[str]

KINDS = ("ToolPolicy", "PolicyTest")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_ELEMENT_NAME = re.compile(r"[a-z0-9]([-_a-z0-9]{0,61}[a-z0-9])?")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FIRED_RULE = re.compile(r"[^/\s]+/[^/\s]+")
_CEL_RESERVED = frozenset(
    ["true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function", "if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while"]
)
_T = TypeVar("_T")
_S = TypeVar("_S", bound=str)

_DOCUMENT_FIELDS = ("apiVersion", "kind", "metadata", "spec")
_METADATA_FIELDS = ("name", "description", "labels")
_POLICY_FIELDS = ("mode", "failurePolicy", "defaultAction", "match", "params", "paramsFile",
                  "variables", "repairs", "secrets", "rules", "redact", "results")
_TEST_FIELDS = ("policies", "cases")


def load_documents(paths: PathArg | Sequence[PathArg]) -> Documents:
    """Read every ``ToolPolicy`` and ``PolicyTest`` document under ``paths``.

    ``paths`` is a file, a directory (searched recursively for ``*.yaml``/``*.yml``, in
    sorted order) or a sequence of both. Raises ``PolicyError`` listing every problem.
    """
    problems: list[Problem] = []
    loader = _Loader(problems)
    for name in _discover(paths, problems):
        loader.read_document_file(name)
    return loader.finish()


@dataclass
class _FileResult:
    name: str
    real: str
    src: SourceFile
    nodes: list[Node]
    policies: list[ToolPolicy] = field(default_factory=list)
    tests: list[PolicyTest] = field(default_factory=list)


@dataclass
class _Params:
    value: dict[str, Any] | None
    problems: list[Problem]
    """Problems inside the params file itself, reported at their own positions."""
    reason: str = ""
    """Why ``value`` is None, for the problem reported at the ``paramsFile`` field."""


class _Loader:
    """One load: the files read so far, their sources and params files (read once each)."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        self.files: list[_FileResult] = []
        self.sources: dict[str, bytes] = {}
        self.params: dict[str, _Params] = {}
        self.read_real: set[str] = set()

    def read_document_file(self, name: str) -> None:
        src = self._read(name)
        if src is None:
            return
        nodes = _yaml.compose(src)
        result = _FileResult(name, os.path.realpath(name), src, nodes)
        self.files.append(result)
        for node in nodes:
            doc = _DocumentReader(src, self).document(node)
            if isinstance(doc, ToolPolicy):
                result.policies.append(doc)
            elif isinstance(doc, PolicyTest):
                result.tests.append(doc)

    def _read(self, name: str) -> SourceFile | None:
        try:
            with open(name, "rb") as f:
                data = f.read()
        except OSError as e:
            self.problems.append(Problem(name, 0, 0, f"cannot read file: {e.strerror}"))
            return None
        real = os.path.realpath(name)
        if real not in self.read_real:  # one copy per file, under the first name it had
            self.read_real.add(real)
            self.sources[name] = data
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            line = data.count(b"\n", 0, e.start) + 1
            column = e.start - data.rfind(b"\n", 0, e.start)
            self.problems.append(Problem(name, line, column, f"not valid UTF-8: {e.reason}"))
            return None
        return SourceFile(name, text)

    def load_params(self, name: str) -> _Params:
        real = os.path.realpath(name)
        cached = self.params.get(real)
        if cached is None:
            cached = self.params[real] = self._load_params(name)
        return cached

    def _load_params(self, name: str) -> _Params:
        if not os.path.isfile(name):
            return _Params(None, [], f"no such file (looked for {name})")
        src = self._read(name)
        if src is None:
            return _Params(None, [], "cannot be read (see the problem reported for that file)")
        if name.lower().endswith(".json"):
            return _params_from_json(src)
        nodes = _yaml.compose(src)
        if src.problems:
            return _Params(None, src.problems, "invalid YAML (see the problem reported for "
                                               "that file)")
        if len(nodes) != 1:
            return _Params(None, [], f"expected one YAML document holding a mapping, found "
                                     f"{len(nodes)}")
        node = nodes[0]
        if not isinstance(node, MappingNode):
            return _Params(None, [], f"expected a mapping, got {describe(node)}")
        value = _yaml.to_value(src, node)
        if src.problems:
            return _Params(None, src.problems, "invalid content (see the problems reported "
                                               "for that file)")
        return _Params(value, [])

    def finish(self) -> Documents:
        referenced = set(self.params)  # every params file named, loaded or not
        kept = [r for r in self.files if not (r.real in referenced and not _has_api_version(r))]
        for r in kept:
            self.problems.extend(r.src.problems)
        for p in self.params.values():
            self.problems.extend(p.problems)
        policies = [p for r in kept for p in r.policies]
        tests = [t for r in kept for t in r.tests]
        _check_unique(self.problems, "policy", [(p.name, p.metadata.name_position)
                                                for p in policies])
        _check_unique(self.problems, "test", [(t.name, t.metadata.name_position) for t in tests])
        if self.problems:
            raise PolicyError(dict.fromkeys(self.problems))
        return Documents(policies=tuple(policies), tests=tuple(tests),
                         files=tuple(r.name for r in kept),
                         sources=MappingProxyType(dict(self.sources)))


def _has_api_version(result: _FileResult) -> bool:
    return any(isinstance(n, MappingNode)
               and any(isinstance(k, ScalarNode) and k.value == "apiVersion" for k, _ in n.value)
               for n in result.nodes)


def _params_from_json(src: SourceFile) -> _Params:
    def pairs_hook(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in items:
            if k in out:
                raise ValueError(f"duplicate key '{k}'")
            out[k] = v
        return out

    def reject_constant(name: str) -> Any:
        raise ValueError(f"{name} is not supported")

    try:
        value = json.loads(src.text, object_pairs_hook=pairs_hook, parse_constant=reject_constant)
    except json.JSONDecodeError as e:
        return _Params(None, [Problem(src.name, e.lineno, e.colno, f"invalid JSON: {e.msg}")],
                       "invalid JSON (see the problem reported for that file)")
    except ValueError as e:
        return _Params(None, [], f"invalid JSON: {e}")
    if not isinstance(value, dict):
        kind = "a list" if isinstance(value, list) else "a " + type(value).__name__
        return _Params(None, [], f"expected a JSON object, got {kind}")
    return _Params(value, [])


def _check_unique(problems: list[Problem], what: str,
                  names: Sequence[tuple[str, Position]]) -> None:
    first: dict[str, Position] = {}
    for name, pos in names:
        if name in first:
            problems.append(Problem(pos.file, pos.line, pos.column,
                                    f"duplicate {what} name '{name}' (first defined at "
                                    f"{first[name].file}:{first[name].line})"))
        else:
            first[name] = pos


def _discover(paths: PathArg | Sequence[PathArg], problems: list[Problem]) -> list[str]:
    items = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    if not items:
        problems.append(Problem("<arguments>", 0, 0, "no policy paths given"))
    out: list[str] = []
    seen: set[str] = set()
    for item in items:
        name = os.fspath(item)
        if os.path.isdir(name):
            found = list(_walk(name, problems))
            if not found:
                problems.append(Problem(name, 0, 0, "no *.yaml or *.yml files in directory"))
        elif os.path.exists(name):
            found = [name]
        else:
            problems.append(Problem(name, 0, 0, "no such file or directory"))
            found = []
        for f in found:
            real = os.path.realpath(f)
            if real not in seen:
                seen.add(real)
                out.append(f)
    return out


def _walk(directory: str, problems: list[Problem]) -> Iterator[str]:
    def on_error(e: OSError) -> None:
        problems.append(Problem(e.filename or directory, 0, 0,
                                f"cannot read directory: {e.strerror}"))

    for root, dirs, files in os.walk(directory, onerror=on_error):
        dirs.sort()
        for f in sorted(files):
            if f.endswith((".yaml", ".yml")):
                yield os.path.normpath(os.path.join(root, f))


def _raw_name(src: SourceFile, node: Node) -> tuple[str, Position] | None:
    """The ``name`` written in a list item that failed to build, if it has one."""
    if isinstance(node, MappingNode):
        for key, value in node.value:
            if (isinstance(key, ScalarNode) and key.value == "name"
                    and isinstance(value, ScalarNode) and value.tag == STR):
                return str(value.value), src.pos(node)
    return None


def _suggest(key: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if not close:
        lowered = {k.lower(): k for k in known}
        close = [lowered[key.lower()]] if key.lower() in lowered else []
    return f" (did you mean '{close[0]}'?)" if close else ""


class _DocumentReader:
    """Builds one document's records from its nodes, reporting problems to ``src``."""

    def __init__(self, src: SourceFile, loader: _Loader) -> None:
        self.src = src
        self.loader = loader

    # -- generic node readers ------------------------------------------------------------

    def error(self, where: Node | Position, message: str) -> None:
        self.src.error(where, message)

    def fields(self, node: Node, path: str, known: Sequence[str],
               required: Sequence[str] = ()) -> dict[str, Node] | None:
        """The known fields of mapping ``node``; reports unknown and missing ones."""
        if not isinstance(node, MappingNode):
            self.error(node, f"{path}: expected a mapping, got {describe(node)}")
            return None
        out: dict[str, Node] = {}
        for key, key_node, value in _yaml.pairs(self.src, node):
            if key in known:
                out[key] = value
            else:
                where = f" in {path}" if path else ""
                self.error(key_node, f"unknown field '{key}'{where}{_suggest(key, known)}")
        for name in required:
            if name not in out:
                where = f" in {path}" if path else ""
                self.error(node, f"missing required field '{name}'{where}")
        return out

    def string(self, node: Node, path: str, *, empty: bool = False) -> str | None:
        if not isinstance(node, ScalarNode) or node.tag != STR:
            self.error(node, f"{path}: expected a string, got {describe(node)}")
            return None
        if not empty and not node.value.strip():
            self.error(node, f"{path}: must not be empty")
            return None
        return str(node.value)

    def enum(self, node: Node | None, path: str, allowed: tuple[_S, ...], default: _S) -> _S:
        if node is None:
            return default
        value = self.string(node, path)
        if value is None:
            return default
        if value not in allowed:
            self.error(node, f"{path}: invalid value '{value}'; allowed: {', '.join(allowed)}")
            return default
        return value

    def items(self, node: Node, path: str) -> list[Node] | None:
        if not isinstance(node, SequenceNode):
            self.error(node, f"{path}: expected a list, got {describe(node)}")
            return None
        if node.tag != _yaml.SEQ:
            self.error(node, f"unsupported YAML tag '{node.tag}'")
        return list(node.value)

    def strings(self, node: Node, path: str) -> list[tuple[str, Node]] | None:
        items = self.items(node, path)
        if items is None:
            return None
        out: list[tuple[str, Node]] = []
        for i, item in enumerate(items):
            value = self.string(item, f"{path}[{i}]")
            if value is not None:
                out.append((value, item))
        return out

    def mapping_value(self, node: Node, path: str) -> dict[str, Any] | None:
        if not isinstance(node, MappingNode):
            self.error(node, f"{path}: expected a mapping, got {describe(node)}")
            return None
        value = _yaml.to_value(self.src, node)
        assert isinstance(value, dict)
        return value

    def expression(self, node: Node, path: str) -> Expression | None:
        if not isinstance(node, ScalarNode) or node.tag not in (STR, INT, FLOAT, BOOL):
            self.error(node, f"{path}: expected a CEL expression (a string), got "
                             f"{describe(node)}")
            return None
        expr = _yaml.expression(self.src, node)
        if not expr.source.strip():
            self.error(expr.position, f"{path}: empty expression")
            return None
        return expr

    def name(self, node: Node | None, path: str, what: str, pattern: re.Pattern[str],
             rule: str) -> str | None:
        if node is None:
            return None
        value = self.string(node, path)
        if value is not None and not pattern.fullmatch(value):
            self.error(node, f"{path}: invalid {what} '{value}': {rule}")
            return None
        return value

    def named_list(self, node: Node | None, path: str, what: str,
                   build: Callable[[Node, str], _T | None],
                   name_of: Callable[[_T], tuple[str, Position]]) -> tuple[_T, ...]:
        """A list of records with names unique within it."""
        if node is None:
            return ()
        items = self.items(node, path)
        if items is None:
            return ()
        out: list[_T] = []
        first: dict[str, Position] = {}
        for i, item in enumerate(items):
            record = build(item, f"{path}[{i}]")
            # A record with other problems still takes part in the duplicate check.
            named = name_of(record) if record is not None else _raw_name(self.src, item)
            if named is not None:
                name, pos = named
                if name in first:
                    self.error(pos, f"duplicate {what} name '{name}' (first at line "
                                    f"{first[name].line})")
                    continue
                first[name] = pos
            if record is not None:
                out.append(record)
        return tuple(out)

    # -- documents -----------------------------------------------------------------------

    def document(self, node: Node) -> ToolPolicy | PolicyTest | None:
        if not isinstance(node, MappingNode):
            self.error(node, f"a guardrails document must be a mapping, got {describe(node)}")
            return None
        f = self.fields(node, "", _DOCUMENT_FIELDS, ("apiVersion", "kind"))
        if f is None or "apiVersion" not in f or "kind" not in f:
            return None
        api = self.string(f["apiVersion"], "apiVersion")
        if api is not None and api != API_VERSION:
            self.error(f["apiVersion"], f"unsupported apiVersion '{api}'; expected "
                                        f"'{API_VERSION}'")
            return None
        kind = self.string(f["kind"], "kind")
        if kind is not None and kind not in KINDS:
            self.error(f["kind"], f"unknown kind '{kind}'; allowed: {', '.join(KINDS)}"
                                  f"{_suggest(kind, KINDS)}")
        if api is None or kind not in KINDS:
            return None
        for required in ("metadata", "spec"):
            if required not in f:
                self.error(node, f"missing required field '{required}'")
        metadata = self.metadata(f["metadata"], kind) if "metadata" in f else None
        if "spec" not in f:
            return None
        if kind == "ToolPolicy":
            policy = self.policy(f["spec"], node)
            return None if metadata is None or policy is None else policy(metadata)
        test = self.test(f["spec"], node)
        return None if metadata is None or test is None else test(metadata)

    def metadata(self, node: Node, kind: str) -> Metadata | None:
        f = self.fields(node, "metadata", _METADATA_FIELDS, ("name",))
        if f is None:
            return None
        what = "policy name" if kind == "ToolPolicy" else "test name"
        name = self.name(f.get("name"), "metadata.name", what, _DNS_LABEL,
                         "must be a lowercase DNS label (a-z, 0-9 and '-', at most 63 "
                         "characters, starting and ending with a letter or digit)")
        description = ""
        if "description" in f:
            description = self.string(f["description"], "metadata.description",
                                      empty=True) or ""
        labels: dict[str, str] = {}
        if "labels" in f:
            lf = f["labels"]
            if isinstance(lf, MappingNode):
                for key, _, value in _yaml.pairs(self.src, lf):
                    text = self.string(value, f"metadata.labels.{key}", empty=True)
                    if text is not None:
                        labels[key] = text
            else:
                self.error(lf, f"metadata.labels: expected a mapping, got {describe(lf)}")
        if name is None:
            return None
        return Metadata(name, description, MappingProxyType(labels), self.src.pos(node),
                        self.src.pos(f["name"]))

    # -- ToolPolicy ----------------------------------------------------------------------

    def policy(self, node: Node, doc: Node) -> Callable[[Metadata], ToolPolicy] | None:
        f = self.fields(node, "spec", _POLICY_FIELDS)
        if f is None:
            return None
        n = len(self.src.problems)
        mode: Mode = self.enum(f.get("mode"), "spec.mode", MODES, "enforce")
        failure: FailurePolicy = self.enum(f.get("failurePolicy"), "spec.failurePolicy",
                                           FAILURE_POLICIES, "Fail")
        default: DefaultAction = self.enum(f.get("defaultAction"), "spec.defaultAction",
                                           DEFAULT_ACTIONS, "allow")
        match = self.match(f.get("match"), node)
        params, params_file = self.policy_params(f.get("params"), f.get("paramsFile"))
        variables = self.named_list(f.get("variables"), "spec.variables", "variable",
                                    self.variable, lambda v: (v.name, v.position))
        repairs = self.named_list(f.get("repairs"), "spec.repairs", "repair", self.repair,
                                  lambda r: (r.name, r.position))
        secrets = self.secrets(f.get("secrets"))
        rules = self.named_list(f.get("rules"), "spec.rules", "rule", self.rule,
                                lambda r: (r.name, r.position))
        redact = self.named_list(f.get("redact"), "spec.redact", "redact", self.redaction,
                                 lambda r: (r.name, r.position))
        results: Trust | None = (self.enum(f["results"], "spec.results", TRUST, "untrusted")
                                 if "results" in f else None)
        if len(self.src.problems) != n or match is None or params is None:
            return None
        position = self.src.pos(doc)
        frozen_params = MappingProxyType(params)

        def build(metadata: Metadata) -> ToolPolicy:
            return ToolPolicy(metadata=metadata, mode=mode, failure_policy=failure,
                              default_action=default, match=match, params=frozen_params,
                              params_file=params_file, variables=variables, repairs=repairs,
                              secrets=secrets, rules=rules, redact=redact, position=position,
                              results=results)
        return build

    def match(self, node: Node | None, spec: Node) -> Match | None:
        if node is None:
            return Match(None, None, self.src.pos(spec))
        f = self.fields(node, "spec.match", ("tools", "when"))
        if f is None:
            return None
        tools: tuple[str, ...] | None = None
        if "tools" in f:
            globs = self.strings(f["tools"], "spec.match.tools")
            if globs is not None:
                if not globs and isinstance(f["tools"], SequenceNode):
                    self.error(f["tools"], "spec.match.tools: an empty list matches no tool; "
                                           "omit 'tools' to match every tool")
                for glob, glob_node in globs:
                    problem = _glob_problem(glob)
                    if problem:
                        self.error(glob_node, f"spec.match.tools: invalid glob '{glob}': "
                                              f"{problem}")
                tools = tuple(g for g, _ in globs)
        when = self.expression(f["when"], "spec.match.when") if "when" in f else None
        return Match(tools, when, self.src.pos(node))

    def policy_params(self, inline: Node | None,
                      file_node: Node | None) -> tuple[dict[str, Any] | None, str | None]:
        params: dict[str, Any] = {}
        params_file: str | None = None
        if file_node is not None:
            rel = self.string(file_node, "spec.paramsFile")
            if rel is None:
                return None, None
            params_file = os.path.normpath(os.path.join(os.path.dirname(self.src.name), rel))
            loaded = self.loader.load_params(params_file)
            if loaded.value is None:
                self.error(file_node, f"spec.paramsFile '{rel}': {loaded.reason}")
                return None, params_file
            if "apiVersion" in loaded.value and "kind" in loaded.value:
                self.error(file_node, f"spec.paramsFile '{rel}' is a guardrails document, "
                                      "not a params file")
                return None, params_file
            params.update(loaded.value)
        if inline is not None:
            value = self.mapping_value(inline, "spec.params")
            if value is None:
                return None, params_file
            params.update(value)
        return params, params_file

    def variable(self, node: Node, path: str) -> Variable | None:
        f = self.fields(node, path, ("name", "expression"), ("name", "expression"))
        if f is None:
            return None
        name = self.name(f.get("name"), f"{path}.name", "variable name", _IDENTIFIER,
                         "must be an identifier (letters, digits and '_', not starting "
                         "with a digit) so that variables.<name> can use it")
        if name is not None and name in _CEL_RESERVED:
            self.error(f["name"], f"{path}.name: '{name}' is a reserved word in CEL")
            name = None
        expr = self.expression(f["expression"], f"{path}.expression") if "expression" in f \
            else None
        if name is None or expr is None:
            return None
        return Variable(name, expr, self.src.pos(node))

    def element_name(self, f: dict[str, Node], path: str, what: str) -> str | None:
        return self.name(f.get("name"), f"{path}.name", f"{what} name", _ELEMENT_NAME,
                         "use lowercase letters, digits, '-' and '_', starting and ending "
                         "with a letter or digit, at most 63 characters")

    def repair(self, node: Node, path: str) -> Repair | None:
        f = self.fields(node, path, ("name", "when", "set", "unset"), ("name",))
        if f is None:
            return None
        n = len(self.src.problems)
        name = self.element_name(f, path, "repair")
        when = self.expression(f["when"], f"{path}.when") if "when" in f else None
        sets: list[tuple[str, Expression]] = []
        if "set" in f:
            if isinstance(f["set"], MappingNode):
                for arg, _, value in _yaml.pairs(self.src, f["set"]):
                    expr = self.expression(value, f"{path}.set.{arg}")
                    if expr is not None:
                        sets.append((arg, expr))
            else:
                self.error(f["set"], f"{path}.set: expected a mapping, got {describe(f['set'])}")
        unset: list[str] = []
        if "unset" in f:
            for arg, arg_node in self.strings(f["unset"], f"{path}.unset") or ():
                if any(arg == s for s, _ in sets):
                    self.error(arg_node, f"{path}.unset: argument '{arg}' is also set")
                unset.append(arg)
        if len(self.src.problems) == n and not sets and not unset:
            self.error(node, f"{path}: the repair changes nothing; give 'set' or 'unset'")
        if name is None or len(self.src.problems) != n:
            return None
        return Repair(name, when, tuple(sets), tuple(unset), self.src.pos(node))

    def secrets(self, node: Node | None) -> Secrets:
        if node is None:
            return Secrets((), (), None)
        f = self.fields(node, "spec.secrets", ("arguments", "inject"))
        if f is None:
            return Secrets((), (), None)
        arguments: list[str] = []
        if "arguments" in f:
            arguments = [a for a, _ in self.strings(f["arguments"], "spec.secrets.arguments")
                         or ()]
        inject: list[SecretInjection] = []
        if "inject" in f:
            if isinstance(f["inject"], MappingNode):
                for arg, _, value in _yaml.pairs(self.src, f["inject"]):
                    injection = self.injection(arg, value)
                    if injection is not None:
                        inject.append(injection)
            else:
                self.error(f["inject"], "spec.secrets.inject: expected a mapping, got "
                                        f"{describe(f['inject'])}")
        return Secrets(tuple(arguments), tuple(inject), self.src.pos(node))

    def injection(self, arg: str, node: Node) -> SecretInjection | None:
        path = f"spec.secrets.inject.{arg}"
        if not isinstance(node, MappingNode):
            self.error(node, f"{path}: expected {{env: VARIABLE_NAME}}, got {describe(node)}")
            return None
        f = self.fields(node, path, ("env",), ("env",))
        if f is None or "env" not in f:
            return None
        env = self.name(f["env"], f"{path}.env", "environment variable name", _ENV_NAME,
                        "use letters, digits and '_', not starting with a digit")
        if env is None:
            return None
        return SecretInjection(arg, env, self.src.pos(node))

    def rule(self, node: Node, path: str) -> Rule | None:
        f = self.fields(node, path, ("name", "when", "action", "message", "messageExpression"),
                        ("name", "when", "action"))
        if f is None:
            return None
        n = len(self.src.problems)
        name = self.element_name(f, path, "rule")
        when = self.expression(f["when"], f"{path}.when") if "when" in f else None
        action: RuleAction = self.enum(f.get("action"), f"{path}.action", RULE_ACTIONS, "deny")
        message = self.string(f["message"], f"{path}.message") if "message" in f else None
        message_expr = (self.expression(f["messageExpression"], f"{path}.messageExpression")
                        if "messageExpression" in f else None)
        if name is None or when is None or len(self.src.problems) != n:
            return None
        return Rule(name, when, action, message, message_expr, self.src.pos(node))

    def redaction(self, node: Node, path: str) -> Redaction | None:
        f = self.fields(node, path, ("name", "regex", "replacement"), ("name", "regex"))
        if f is None:
            return None
        n = len(self.src.problems)
        name = self.element_name(f, path, "redact")
        regex = self.string(f["regex"], f"{path}.regex") if "regex" in f else None
        if regex is not None:
            problem = _regex_problem(regex)
            if problem:
                self.error(f["regex"], f"{path}.regex: {problem}")
        replacement = DEFAULT_REPLACEMENT
        if "replacement" in f:
            replacement = self.string(f["replacement"], f"{path}.replacement",
                                      empty=True) or ""
            if regex is not None and len(self.src.problems) == n:
                problem = _replacement_problem(regex, replacement)
                if problem:
                    self.error(f["replacement"], f"{path}.replacement: {problem}")
        if name is None or regex is None or len(self.src.problems) != n:
            return None
        return Redaction(name, regex, replacement, self.src.pos(node), self.src.pos(f["regex"]))

    # -- PolicyTest ----------------------------------------------------------------------

    def test(self, node: Node, doc: Node) -> Callable[[Metadata], PolicyTest] | None:
        f = self.fields(node, "spec", _TEST_FIELDS, ("cases",))
        if f is None:
            return None
        n = len(self.src.problems)
        policies: list[str] = []
        base = os.path.dirname(self.src.name)
        for rel, rel_node in (self.strings(f["policies"], "spec.policies") or ()
                              if "policies" in f else ()):
            path = os.path.normpath(os.path.join(base, rel))
            if not os.path.exists(path):
                self.error(rel_node, f"spec.policies: '{rel}' does not exist (looked for "
                                     f"{path})")
            policies.append(path)
        cases = self.named_list(f.get("cases"), "spec.cases", "test case", self.case,
                                lambda c: (c.name, c.position))
        if "cases" in f and isinstance(f["cases"], SequenceNode) and not f["cases"].value:
            self.error(f["cases"], "spec.cases: a test needs at least one case")
        if len(self.src.problems) != n:
            return None
        position = self.src.pos(doc)

        def build(metadata: Metadata) -> PolicyTest:
            return PolicyTest(metadata, tuple(policies), cases, position)
        return build

    def case(self, node: Node, path: str) -> TestCase | None:
        f = self.fields(node, path, ("name", "call", "expect"), ("name", "call", "expect"))
        if f is None:
            return None
        name = self.string(f["name"], f"{path}.name") if "name" in f else None
        call = self.call(f["call"], f"{path}.call") if "call" in f else None
        expect = self.expect(f["expect"], f"{path}.expect") if "expect" in f else None
        if name is None or call is None or expect is None:
            return None
        return TestCase(name, call, expect, self.src.pos(node))

    def call(self, node: Node, path: str) -> TestCall | None:
        f = self.fields(node, path, ("tool", "args", "principal", "history", "request",
                                     "description", "now"), ("tool",))
        if f is None:
            return None
        n = len(self.src.problems)
        tool = self.string(f["tool"], f"{path}.tool") if "tool" in f else None
        args = self.mapping_value(f["args"], f"{path}.args") if "args" in f else {}
        principal = (self.mapping_value(f["principal"], f"{path}.principal")
                     if "principal" in f else {})
        history: list[HistoryEntry] = []
        for i, item in enumerate(self.items(f["history"], f"{path}.history") or ()
                                 if "history" in f else ()):
            entry = self.history_entry(item, f"{path}.history[{i}]")
            if entry is not None:
                history.append(entry)
        request = (self.string(f["request"], f"{path}.request", empty=True)
                   if "request" in f else None)
        description = (self.string(f["description"], f"{path}.description", empty=True)
                       if "description" in f else None)
        now = self.timestamp(f["now"], f"{path}.now") if "now" in f else None
        if tool is None or args is None or principal is None or len(self.src.problems) != n:
            return None
        return TestCall(tool, MappingProxyType(args), MappingProxyType(principal),
                        tuple(history), request, description, self.src.pos(node), now)

    def timestamp(self, node: Node, path: str) -> datetime.datetime | None:
        """An RFC 3339 timestamp (``2026-03-01T09:30:00Z``); naive means UTC."""
        if not isinstance(node, ScalarNode) or node.tag not in (STR, TIMESTAMP):
            self.error(node, f"{path}: expected an RFC 3339 timestamp, got {describe(node)}")
            return None
        try:
            value = datetime.datetime.fromisoformat(str(node.value).strip())
        except ValueError:
            self.error(node, f"{path}: '{node.value}' is not an RFC 3339 timestamp "
                             "(e.g. 2026-03-01T09:30:00Z)")
            return None
        return value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)

    def history_entry(self, node: Node, path: str) -> HistoryEntry | None:
        f = self.fields(node, path, ("tool", "args", "effect", "result", "trusted", "at"),
                        ("tool",))
        if f is None:
            return None
        n = len(self.src.problems)
        tool = self.string(f["tool"], f"{path}.tool") if "tool" in f else None
        args = self.mapping_value(f["args"], f"{path}.args") if "args" in f else {}
        effect = self.enum(f.get("effect"), f"{path}.effect", HISTORY_EFFECTS, "allow")
        result = self.string(f["result"], f"{path}.result", empty=True) if "result" in f else ""
        trusted = False
        if "trusted" in f:
            t = f["trusted"]
            if not isinstance(t, ScalarNode) or t.tag != BOOL:
                self.error(t, f"{path}.trusted: expected true or false, got {describe(t)}")
            else:
                trusted = t.value.lower() == "true"
        at = self.timestamp(f["at"], f"{path}.at") if "at" in f else None
        if tool is None or args is None or result is None or len(self.src.problems) != n:
            return None
        return HistoryEntry(tool, MappingProxyType(args), effect, self.src.pos(node),
                            result, trusted, at)

    def expect(self, node: Node, path: str) -> TestExpect | None:
        keys = ("effect", "arguments", "rules", "message", "errors")
        f = self.fields(node, path, keys, ("effect",))
        if f is None:
            return None
        n = len(self.src.problems)
        effect: Effect = self.enum(f.get("effect"), f"{path}.effect", EFFECTS, "allow")
        arguments = (self.mapping_value(f["arguments"], f"{path}.arguments")
                     if "arguments" in f else None)
        rules: tuple[str, ...] | None = None
        if "rules" in f:
            entries = self.strings(f["rules"], f"{path}.rules") or []
            for value, item in entries:
                if not _FIRED_RULE.fullmatch(value):
                    self.error(item, f"{path}.rules: '{value}' is not 'policy/rule'")
            rules = tuple(v for v, _ in entries)
        message = self.string(f["message"], f"{path}.message") if "message" in f else None
        errors: int | None = None
        if "errors" in f:
            en = f["errors"]
            if isinstance(en, ScalarNode) and en.tag == INT and _yaml.to_value(self.src, en) >= 0:
                errors = int(_yaml.to_value(self.src, en))
            else:
                self.error(en, f"{path}.errors: expected a count (an integer >= 0), got "
                               f"{describe(en)}")
        if len(self.src.problems) != n:
            return None
        return TestExpect(effect, MappingProxyType(arguments) if arguments is not None else None,
                          rules, message, errors, self.src.pos(node))


def _glob_problem(glob: str) -> str | None:
    """Why ``glob`` is not a sensible shell-style pattern (fnmatch would read a stray '['
    as a literal character, hiding the author's mistake)."""
    i = 0
    while i < len(glob):
        if glob[i] == "[":
            j = i + 1
            if j < len(glob) and glob[j] == "!":
                j += 1
            if j < len(glob) and glob[j] == "]":
                j += 1
            j = glob.find("]", j)
            if j < 0:
                return "unbalanced '['"
            i = j
        i += 1
    return None


RE2_OPTIONS = re2.Options()
"""The options every policy regex is compiled with (the engine compiles the same way)."""
RE2_OPTIONS.log_errors = False


def _regex_problem(regex: str) -> str | None:
    try:
        compiled = re2.compile(regex, RE2_OPTIONS)
    except re2.error as e:
        detail = e.args[0] if e.args else e
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        return f"invalid RE2 regular expression: {detail}"
    if compiled.search("") is not None:
        return "the pattern matches the empty string, so it would redact between every character"
    return None


def _replacement_problem(regex: str, replacement: str) -> str | None:
    """Why ``replacement`` cannot be expanded for matches of ``regex``, or None.

    A replacement is a template (``\\1``, ``\\g<name>``, backslash escapes): a bad one
    would raise only when the pattern first matches, inside ``evaluate``, which must never
    raise. Expanding it once against a match with the same groups finds it at load time.
    """
    try:
        probe = re2.compile(f"(?:{regex})|", RE2_OPTIONS).match("")  # always matches ""
        if probe is not None:
            probe.expand(replacement)
    except Exception as e:
        return f"invalid replacement template: {e or type(e).__name__}"
    return None
