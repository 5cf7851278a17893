"""Load guardrails/v1 documents from files: every problem at once, or a complete result.

How: each YAML document becomes plain data plus a side table of node positions keyed
by location (``_Tree``); the pydantic models of ``guardrails.model.shape`` (the one
description of the documents' shape) validate the data, and every validation error is
mapped back through the side table onto ``file:line:column``, with "did you mean" for
unknown fields. Checks that span elements or touch the file system (unique names,
``paramsFile``, ``spec.policies``) run on the plain data, whether or not the model
validated, so every problem comes in one run. A document is built into its records
(``guardrails.model.documents``, which carry the positions) only when it has no problem;
``load_documents`` returns only when no document anywhere had one, and
``read_documents`` returns the good documents together with all problems (for
``guardrails.load``, which goes on to compile them so a CEL error in one file is not
hidden by a structural problem in another).

Why pydantic and a side table rather than a hand-written node walker: one declaration
gives the loader's validation, its defaults and the JSON Schema (``guardrails schema``);
validating plain data runs in pydantic-core (measured: loading 1,000 policies / 10,000
rules costs about the same as the hand-written walker did, see docs/performance.md).

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

import dataclasses
import datetime
import json
import os
import re
import stat
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from types import MappingProxyType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import TypeAdapter, ValidationError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from guardrails.expr.lib_common import RE2_OPTIONS
from guardrails.expr.spelling import closest
from guardrails.model import _yaml
from guardrails.model._yaml import SourceFile, describe
from guardrails.model.documents import (
    API_VERSION,
    Counter,
    Documents,
    FunctionParam,
    HistoryEntry,
    Library,
    LibraryFunction,
    Match,
    Metadata,
    PolicyBinding,
    PolicyTest,
    Redaction,
    Repair,
    Rule,
    SecretInjection,
    Secrets,
    TestCall,
    TestCase,
    TestExpect,
    ToolPolicy,
    Variable,
)
from guardrails.model.errors import PolicyError, Problem
from guardrails.model.overrides import library_reads, override_warnings
from guardrails.model.shape import (
    DOCUMENT_MODELS,
    KINDS,
    LibraryDocument,
    PolicyBindingDocument,
    PolicyTestDocument,
    Shape,
    ToolPolicyDocument,
    message_warning,
    replacement_warning,
)
from guardrails.model.source import Expression, Position

PathArg = str | os.PathLike[str]
Loc = tuple[str | int, ...]

__all__ = ["KINDS", "RE2_OPTIONS", "SHIPPED_LIBRARIES", "load_documents", "read_documents",
           "shipped_library"]

MAX_FILE_BYTES = 16 * 1024 * 1024
"""Largest policy, test or params file read (a 10,000-rule set is about 2 MB of YAML):
a bigger file is refused without reading it, so a mistaken path cannot exhaust memory."""

_DOCUMENT_FIELDS = tuple(f.alias or n for n, f in ToolPolicyDocument.model_fields.items())
_ADAPTERS = {kind: TypeAdapter(model) for kind, model in DOCUMENT_MODELS.items()}
_DATA_FIELDS = frozenset({"params", "args", "principal", "arguments"})
"""Fields holding plain data, where YAML 1.1's ``no``/``on``/``~`` among strings is
likely a mistake (``spec.params``, a case's ``call.args`` and the like)."""
_NAMED_LISTS = {"ToolPolicy": (("variables", "variable"), ("repairs", "repair"),
                               ("rules", "rule"), ("redact", "redact"),
                               ("counters", "counter")),
                "PolicyTest": (("cases", "test case"),),
                "PolicyBinding": (),
                "Library": (("functions", "function"),)}
"""``spec`` lists whose elements' names must be unique within the list."""


def load_documents(paths: PathArg | Sequence[PathArg]) -> Documents:
    """Read every ``ToolPolicy`` and ``PolicyTest`` document under ``paths``.

    ``paths`` is a file, a directory (searched recursively for ``*.yaml``/``*.yml``, in
    sorted order) or a sequence of both. Raises ``PolicyError`` listing every problem.
    """
    documents, problems = read_documents(paths)
    if problems:
        raise PolicyError(problems)
    return documents


def read_documents(paths: PathArg | Sequence[PathArg]) -> tuple[Documents, list[Problem]]:
    """Every document that read without a problem, and every problem found.

    For callers that go on checking what did load (compiling its CEL) so that a
    structural problem in one file does not hide a CEL error in another; the documents
    are incomplete whenever the problem list is not empty, and must not be used as a
    policy set then.
    """
    problems: list[Problem] = []
    loader = _Loader(problems)
    for name in document_files(paths, problems):
        loader.read_document_file(name)
    documents = loader.finish()
    return documents, list(dict.fromkeys(problems))


@dataclass
class _FileResult:
    name: str
    real: str
    src: SourceFile
    nodes: list[Node]
    policies: list[ToolPolicy] = field(default_factory=list)
    tests: list[PolicyTest] = field(default_factory=list)
    libraries: list[Library] = field(default_factory=list)
    bindings: list[PolicyBinding] = field(default_factory=list)


@dataclass
class _Params:
    value: dict[str, Any] | None
    problems: list[Problem]
    """Problems inside the params file itself, reported at their own positions."""
    reason: str = ""
    """Why ``value`` is None, for the problem reported at the ``paramsFile`` field."""
    warnings: list[Problem] = field(default_factory=list)


class _Loader:
    """One load: the files read so far, their sources and params files (read once each)."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        self.files: list[_FileResult] = []
        self.sources: dict[str, bytes] = {}
        self.params: dict[str, _Params] = {}
        self.read_real: set[str] = set()
        self.policy_names: set[str] = set()
        """Names of every ToolPolicy document read, whether or not it had problems."""

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
            elif isinstance(doc, Library):
                result.libraries.append(doc)
            elif isinstance(doc, PolicyBinding):
                result.bindings.append(doc)

    def _read(self, name: str) -> SourceFile | None:
        try:
            data = read_regular_file(name, MAX_FILE_BYTES)
        except OSError as e:
            self.problems.append(Problem(name, 0, 0, f"cannot read file: {e.strerror}"))
            return None
        except UnreadableFile as e:
            self.problems.append(Problem(name, 0, 0, str(e)))
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
        if not os.path.lexists(name):
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
        _yaml.yaml11_warnings(src, node, "params")
        return _Params(value, [], warnings=src.warnings)

    def finish(self) -> Documents:
        referenced = set(self.params)  # every params file named, loaded or not
        kept = [r for r in self.files if not (r.real in referenced and not _has_api_version(r))]
        for r in kept:
            self.problems.extend(r.src.problems)
        for p in self.params.values():
            self.problems.extend(p.problems)
        libraries = [lib for r in kept for lib in r.libraries]
        libraries += self._shipped(kept, {lib.name for lib in libraries})
        _check_unique(self.problems, "library", [(lib.name, lib.metadata.name_position)
                                                 for lib in libraries])
        policies = [_with_library_params(p, r.libraries, libraries, self.problems)
                    for r in kept for p in r.policies]
        tests = [t for r in kept for t in r.tests]
        _check_unique(self.problems, "policy", [(p.name, p.metadata.name_position)
                                                for p in policies])
        _check_unique(self.problems, "test", [(t.name, t.metadata.name_position) for t in tests])
        bindings = [b for r in kept for b in r.bindings]
        _check_unique(self.problems, "binding", [(b.name, b.metadata.name_position)
                                                 for b in bindings])
        known = sorted(self.policy_names)  # a policy with problems is not "unknown" too
        for b in bindings:
            if b.policy not in self.policy_names:
                pos = b.policy_position
                self.problems.append(Problem(
                    pos.file, pos.line, pos.column,
                    f"spec.policy: no policy named '{b.policy}' in this policy set"
                    f"{_suggest(b.policy, known)}"))
        warnings = [w for r in kept for w in r.src.warnings]
        warnings += [w for p in self.params.values() for w in p.warnings]
        by_name = {lib.name: lib for lib in libraries}
        functions_read = library_reads(libraries)
        bound: dict[str, list[PolicyBinding]] = {}
        for b in bindings:
            bound.setdefault(b.policy, []).append(b)
        for r in kept:
            for doc in r.policies:
                defaults = [*r.libraries, *(by_name[n] for n, _ in doc.uses if n in by_name)]
                warnings += override_warnings(doc, defaults, functions_read,
                                              bound.get(doc.name, []))
        return Documents(policies=tuple(policies), tests=tuple(tests),
                         files=tuple(r.name for r in kept),
                         sources=MappingProxyType(dict(self.sources)),
                         warnings=tuple(dict.fromkeys(warnings)),
                         libraries=tuple(libraries),
                         bindings=tuple(bindings),
                         empty=tuple(r.name for r in kept if not r.nodes))


    def _shipped(self, kept: Sequence[_FileResult], defined: set[str]) -> list[Library]:
        """The shipped libraries (``SHIPPED_LIBRARIES``) that a policy names in
        ``spec.uses`` and no loaded file defines: read once however many policies name
        them, and not part of the policy set's files (like built-in functions, they come
        with the package: no bundle or ``fmt`` holds them)."""
        wanted = {name for r in kept for p in r.policies for name, _ in p.uses} - defined
        out: list[Library] = []
        for name in sorted(wanted & set(SHIPPED_LIBRARIES)):
            shipped = _Loader(self.problems)
            shipped.read_document_file(shipped_library(name))
            for r in shipped.files:
                self.problems.extend(r.src.problems)
                out.extend(lib for lib in r.libraries if lib.name == name)
        return out


SHIPPED_LIBRARIES: Mapping[str, str] = MappingProxyType({"origin": "origin.yaml"})
"""Libraries that come with the package (``guardrails/libraries/``), by name: a policy
loads one by naming it in ``spec.uses``."""


def shipped_library(name: str) -> str:
    """The path of shipped library ``name``'s file (package data, a file of the installed
    package: it is read as a policy file is)."""
    return str(resources.files("guardrails").joinpath("libraries", SHIPPED_LIBRARIES[name]))


def _with_library_params(policy: ToolPolicy, same_file: Sequence[Library],
                         every: Sequence[Library], problems: list[Problem]) -> ToolPolicy:
    """The policy with shared params merged under its own: first the Library documents of
    its own file, then those it names in ``spec.uses`` (in that order; later wins, and the
    policy's own ``params`` and ``paramsFile`` win over all of them)."""
    by_name = {lib.name: lib for lib in every}
    shared: dict[str, Any] = {}
    for lib in same_file:
        shared.update(lib.params)
    for name, pos in policy.uses:
        used = by_name.get(name)
        if used is None:
            known = sorted(by_name)
            problems.append(Problem(pos.file, pos.line, pos.column,
                                    f"spec.uses: no Library named '{name}' is loaded"
                                    f"{_suggest(name, known)}" + (
                                        f" (libraries: {', '.join(known)})" if known and
                                        not _suggest(name, known) else "")))
            continue
        shared.update(used.params)
    if not shared:
        return policy
    return dataclasses.replace(policy, params=MappingProxyType({**shared, **policy.params}))


class UnreadableFile(Exception):
    """A path that is refused without reading it: not a regular file, or over the bound."""


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def read_regular_file(name: str, limit: int) -> bytes:
    """The bytes of ``name``, which must be a regular file (or a symlink to one) of at most
    ``limit`` bytes.

    A ``*.yaml`` symlink to ``/dev/zero`` would exhaust memory and a FIFO would hang the
    load, so the file is checked with ``stat`` before it is opened, opened non-blocking
    (opening a FIFO for reading would otherwise wait for a writer) and checked again with
    ``fstat`` on the open descriptor, so a swap between the two checks is caught too.
    Reading stops one byte past ``limit``: a file that grew meanwhile is still refused.
    """
    st = os.stat(name)
    if not stat.S_ISREG(st.st_mode):
        raise UnreadableFile(f"not a regular file ({_kind(st.st_mode)}); refused without reading it")
    if st.st_size > limit:
        raise UnreadableFile(f"file is {st.st_size} bytes, over the {limit}-byte bound")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(name, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnreadableFile(f"not a regular file ({_kind(st.st_mode)}); refused without "
                               "reading it")
        data = read_at_most(lambda n: os.read(fd, n), limit, 1 << 20)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise UnreadableFile(f"file is over the {limit}-byte bound")
    return data


def read_at_most(read: Callable[[int], bytes], limit: int, chunk: int) -> bytes:
    """What ``read`` gives, in pieces of at most ``chunk`` bytes, until it ends or one byte
    past ``limit``: the caller tells "exactly at the bound" from "over it" without ever
    holding more than ``limit + 1`` bytes of a source that does not end (a file that grows,
    a server that keeps sending)."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        piece = read(min(chunk, limit + 1 - size))
        if not piece:
            break
        chunks.append(piece)
        size += len(piece)
    return b"".join(chunks)


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
            elsewhere = first[name].file != pos.file
            problems.append(Problem(pos.file, pos.line, pos.column,
                                    f"duplicate {what} name '{name}' (first defined at "
                                    f"{first[name].file}:{first[name].line})"
                                    + ("; every file loaded together is one policy set: "
                                       "rename one, or load the policies of different "
                                       "deployments separately (one file or directory "
                                       "each)" if elsewhere else "")))
        else:
            first[name] = pos


def document_files(paths: PathArg | Sequence[PathArg], problems: list[Problem]) -> list[str]:
    """The files ``read_documents`` reads for ``paths``, in its order and named as its
    problems name them (``guardrails check`` loads again all but the broken ones;
    ``guardrails fmt`` formats them); a missing path or an empty directory is a problem."""
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


def _suggest(key: str, known: Sequence[str]) -> str:
    close = closest(key, known)
    return f" (did you mean '{close}'?)" if close else ""


_FOREIGN_FIELDS: Mapping[str, str] = {
    "matchConstraints": "Kubernetes' matchConstraints is match: {tools: [...]} here",
    "matchConditions": "Kubernetes' matchConditions is match.when here, one CEL bool",
    "matchResources": "the tools a policy applies to are match: {tools: [...]}",
    "on": "the tools a policy applies to are match: {tools: [...]}",
    "validations": "Kubernetes' validations are rules here: {name, when, action, message}; "
                   "a validation's expression says what must hold, a rule's when says "
                   "what to act on, so negate it",
    "validationActions": "what a rule does is its action (deny, halt, require_approval, "
                         "warn, allow); a whole policy in shadow is mode: audit",
    "expression": "a rule's condition is when; a Kubernetes expression says what must "
                  "hold, a rule's when what to act on, so negate it",
    "condition": "a rule's condition is when", "if": "a rule's condition is when",
    "effect": "what a rule does is its action", "decision": "what a rule does is its action",
    "reason": "a rule's text is message (or messageExpression)",
    "msg": "a rule's text is message (or messageExpression)",
    "paramKind": "params are written in the policy: params: {...}, or paramsFile",
    "paramRef": "params are written in the policy: params: {...}, or paramsFile",
    "deny": "Rego's deny rules are rules with action: deny",
    "violation": "Gatekeeper's violations are rules with action: deny",
    "failureAction": "what an expression error does is failurePolicy: Fail | Ignore",
    "onError": "what an expression error does is failurePolicy: Fail | Ignore",
    "default": "the result when no rule fires is defaultAction: allow | deny",
    "unless": "Cedar's unless: write its condition negated in when, when: "
              "'a && !(b)'",
    "permit": "Cedar's permit is a rule with action: allow, in a policy with "
              "defaultAction: deny",
    "forbid": "Cedar's forbid is a rule with action: deny; a deny of any policy wins over "
              "every allow, as in Cedar",
    "PolicyTestSpec.tests": "a PolicyTest's cases are spec.cases",
    "TestCaseShape.input": "what a case decides is call: {tool, args, principal, ...}",
    "TestCaseShape.request": "the call is call: {tool, args, ...}, and the user's words "
                             "are call.request",
    "TestCaseShape.expected": "what a case expects is expect: {effect, rules, ...}",
    "TestCaseShape.want": "what a case expects is expect: {effect, rules, ...}",
    "TestCallShape.arguments": "a call's arguments are args",
    "TestCallShape.input": "a call's arguments are args",
    "TestExpectShape.decision": "the expected outcome is effect: allow | deny | halt | "
                                "require_approval",
    "TestExpectShape.result": "the expected outcome is effect: allow | deny | halt | "
                              "require_approval",
    "TestExpectShape.allow": "the expected outcome is effect: allow",
}
"""Fields people bring from Kubernetes admission policies, Rego and other engines."""


def _field_hint(key: str, owner: type[Shape] | None, above: type[Shape] | None,
                where: str) -> str:
    """For an unknown field: "did you mean", then what another engine's field is called
    here, then whether it is a field one level in or out (YAML indentation moved it)."""
    known = field_names(owner) if owner else ()
    foreign = _FOREIGN_FIELDS.get(f"{owner.__name__}.{key}" if owner else key) \
        or _FOREIGN_FIELDS.get(key)
    if foreign and key not in known:
        return f" ({foreign})"
    if owner is None:
        return _suggest(key, known)
    for name, f in owner.model_fields.items():
        child = _unwrap(f.annotation)
        many = get_origin(child) is list
        item = _unwrap(get_args(child)[0] if many else child)
        if isinstance(item, type) and issubclass(item, Shape) and key in field_names(item):
            field = f"{where}.{f.alias or name}" if where else (f.alias or name)
            inside = (f"a field of each item of {field}: indent it to line up with the "
                      f"item's other fields") if many else \
                f"a field of {field}: indent it under {f.alias or name}"
            return f" ('{key}' is {inside})"
    if above is not None and key in field_names(above):
        return f" ('{key}' belongs one level up: indent it less)"
    return _suggest(key, known)


def _path(loc: Loc) -> str:
    """``spec.rules[0].when`` for ``("spec", "rules", 0, "when")``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _unwrap(tp: Any) -> Any:
    """The type inside ``Annotated[...]`` and ``X | None``."""
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            tp = get_args(tp)[0]
        elif origin in (Union, types.UnionType):
            rest = [a for a in get_args(tp) if a is not type(None)]
            if len(rest) != 1:
                return tp
            tp = rest[0]
        else:
            return tp


def field_names(model: type[Shape]) -> tuple[str, ...]:
    """The YAML field names of ``model``, in declaration order."""
    return tuple(f.alias or n for n, f in model.model_fields.items())


def _shape_at(root: type[Shape], loc: Loc) -> type[Shape] | None:
    """The model that validates the value at ``loc`` under ``root``, if that is a model."""
    tp: Any = root
    for part in loc:
        tp = _unwrap(tp)
        if isinstance(tp, type) and issubclass(tp, Shape) and isinstance(part, str):
            found = [f for n, f in tp.model_fields.items() if (f.alias or n) == part]
            if not found:
                return None
            tp = found[0].annotation
        elif get_origin(tp) is list and isinstance(part, int):
            tp = get_args(tp)[0]
        elif get_origin(tp) is dict and isinstance(part, str):
            tp = get_args(tp)[1]
        else:
            return None
    tp = _unwrap(tp)
    return tp if isinstance(tp, type) and issubclass(tp, Shape) else None


_EXPECTED = {"string_type": "a string", "list_type": "a list", "dict_type": "a mapping",
             "int_type": "an integer", "bool_type": "a boolean", "float_type": "a number"}


_FOREIGN_KINDS: Mapping[str, str] = {
    kind: f" (Kubernetes' {kind} is a ToolPolicy here: match: {{tools: [...]}}, rules with "
          f"when and action, apiVersion: guardrails/v1)"
    for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
                 "MutatingAdmissionPolicy")
} | {"ValidatingAdmissionPolicyBinding": " (Kubernetes' binding is a PolicyBinding here: "
                                         "spec: {policy, match, params})"}
"""Kinds of other admission engines, and what writes them here."""

_VALUE_HINTS: Mapping[tuple[str, str], str] = {
    ("effect", "warn"): " (a warn rule never changes the effect: expect the effect the call "
                        "gets, and the warn rule in rules: [policy/rule])",
    ("effect", "block"): " (a blocked call's effect is deny)",
    ("effect", "reject"): " (a refused call's effect is deny)",
    ("action", "permit"): " (Cedar's permit is allow; it lets a call through only in a "
                          "policy with defaultAction: deny)",
    ("action", "forbid"): " (Cedar's forbid is deny: a fired deny wins over every allow, "
                          "as in Cedar)",
    ("action", "block"): " (a rule that blocks the call is deny; halt also stops the run)",
    ("action", "reject"): " (a rule that refuses the call is deny)",
    ("action", "approve"): " (a rule that asks a human is require_approval)",
    ("action", "ask"): " (a rule that asks a human is require_approval)",
    ("action", "audit"): " (a rule that only records is warn; a whole policy in shadow is "
                         "mode: audit)",
    ("defaultAction", "permit"): " (Cedar's permit is allow)",
    ("defaultAction", "forbid"): " (Cedar's default is deny: defaultAction: deny)",
}
"""What an expected value from another tool is called here, by field and value."""


class _Tree:
    """One document as plain data, with the YAML node of every value and key by location.

    The side table is what lets pydantic, which sees only plain data, report problems at
    ``file:line:column``: an error's ``loc`` is looked up here.
    """

    def __init__(self, src: SourceFile, node: MappingNode) -> None:
        self.src = src
        self.values: dict[Loc, Node] = {}
        self.keys: dict[Loc, Node] = {}
        self.broken: set[Loc] = set()
        """Where a scalar could not be read (already reported by ``_yaml``)."""
        self.data = self._build(node, ())

    def _build(self, node: Node, loc: Loc) -> Any:
        self.values[loc] = node
        if loc and loc[-1] in _DATA_FIELDS and loc[0] == "spec" and len(loc) in (2, 5, 7):
            _yaml.yaml11_warnings(self.src, node, _path(loc))
        if isinstance(node, MappingNode):
            out: dict[str, Any] = {}
            for key, key_node, value in _yaml.pairs(self.src, node):
                self.keys[(*loc, key)] = key_node
                out[key] = self._build(value, (*loc, key))
            return out
        if isinstance(node, SequenceNode):
            if node.tag != _yaml.SEQ:
                self.src.error(node, _yaml.tag_problem(node))
            return [self._build(item, (*loc, i)) for i, item in enumerate(node.value)]
        assert isinstance(node, ScalarNode)
        n = len(self.src.problems)
        value = _yaml.to_value(self.src, node)
        if len(self.src.problems) != n:
            self.broken.add(loc)
        return value

    def node(self, loc: Loc) -> Node:
        """The node at ``loc``, or of its nearest ancestor present in the file."""
        while loc not in self.values:
            loc = loc[:-1]
        return self.values[loc]

    def pos(self, loc: Loc) -> Position:
        return self.src.pos(self.node(loc))

    def expression(self, loc: Loc) -> Expression:
        node = self.values[loc]
        assert isinstance(node, ScalarNode)
        _yaml.escape_warning(self.src, node)  # CEL text: a "\b" there is a mistake
        return _yaml.expression(self.src, node)

    def optional_expression(self, loc: Loc) -> Expression | None:
        return self.expression(loc) if loc in self.values else None


class _DocumentReader:
    """Validates one document with its pydantic model and builds its records."""

    def __init__(self, src: SourceFile, loader: _Loader) -> None:
        self.src = src
        self.loader = loader

    def error(self, where: Node | Position, message: str) -> None:
        self.src.error(where, message)

    def document(self, node: Node) -> ToolPolicy | PolicyTest | PolicyBinding | Library | None:
        if not isinstance(node, MappingNode):
            hint = (" (one document per '---', not a list of them)"
                    if isinstance(node, SequenceNode) else "")
            self.error(node, f"a guardrails document must be a mapping, got "
                             f"{describe(node)}{hint}")
            return None
        tree = _Tree(self.src, node)
        kind = self.header(tree)
        if kind is None:
            return None
        n = len(self.src.problems)
        model = DOCUMENT_MODELS[kind]
        metadata = tree.data.get("metadata")
        if kind == "ToolPolicy" and isinstance(metadata, dict) and isinstance(
                metadata.get("name"), str):
            self.loader.policy_names.add(metadata["name"])
        try:
            doc: Shape | None = _ADAPTERS[kind].validate_python(tree.data)
        except ValidationError as e:
            doc = None
            self.report(tree, model, e)
        params = self.cross_checks(tree, kind)
        if doc is None or len(self.src.problems) != n:
            return None
        if isinstance(doc, ToolPolicyDocument):
            return _policy_record(tree, doc, params or {}, self.params_file(tree))
        if isinstance(doc, LibraryDocument):
            return _library_record(tree, doc)
        if isinstance(doc, PolicyBindingDocument):
            return _binding_record(tree, doc)
        assert isinstance(doc, PolicyTestDocument)
        return _test_record(tree, doc, self.test_policies(tree))

    def header(self, tree: _Tree) -> str | None:
        """The document's kind, when ``apiVersion`` and ``kind`` say it is one we read."""
        data = tree.data
        problems = len(self.src.problems)
        if "apiVersion" not in data and "kind" not in data and not any(
                key in _DOCUMENT_FIELDS for key in data):
            # Another tool's YAML under the loaded paths (a CI workflow, a compose file):
            # one problem that says so, not one per key.
            keys = ", ".join(list(map(str, data))[:3])
            self.error(tree.values[()], f"not a guardrails document (no apiVersion or kind; "
                                        f"it has {keys}): another tool's file, or a params file "
                                        f"no policy names as its paramsFile? Move it out of the "
                                        f"policy folder, or name the policy files")
            return None
        for name in ("apiVersion", "kind"):
            if name not in data:
                self.error(tree.values[()], f"missing required field '{name}'")
            elif not isinstance(data[name], str):
                self.error(tree.values[(name,)], f"{name}: expected a string, got "
                                                 f"{describe(tree.values[(name,)])}")
        api, kind = data.get("apiVersion"), data.get("kind")
        if isinstance(api, str) and api != API_VERSION:
            self.error(tree.values[("apiVersion",)], f"unsupported apiVersion '{api}'; "
                                                     f"expected '{API_VERSION}'")
        if isinstance(kind, str) and kind not in KINDS:
            self.error(tree.values[("kind",)], f"unknown kind '{kind}'; allowed: "
                                               f"{', '.join(KINDS)}"
                                               f"{_FOREIGN_KINDS.get(kind) or _suggest(kind, KINDS)}")
        if len(self.src.problems) == problems:
            assert isinstance(kind, str)
            return kind
        for key in data:
            if key not in _DOCUMENT_FIELDS:
                self.error(tree.keys[(key,)], f"unknown field '{key}'"
                                              f"{_suggest(key, _DOCUMENT_FIELDS)}")
        return None

    def report(self, tree: _Tree, model: type[Shape], error: ValidationError) -> None:
        """Every validation error as a problem at the YAML node it is about."""
        for e in error.errors(include_url=False, include_input=True):
            loc: Loc = tuple(e["loc"])
            ctx = e.get("ctx") or {}
            loc = (*loc, *ctx.get("at", ()))
            if loc in tree.broken:
                continue  # the value itself could not be read; that is reported already
            kind, path = e["type"], _path(loc)
            if kind == "missing":
                parent = loc[:-1]
                where = f" in {_path(parent)}" if parent else ""
                self.error(tree.node(parent), f"missing required field '{loc[-1]}'{where}")
            elif kind == "extra_forbidden":
                parent = loc[:-1]
                where = f" in {_path(parent)}" if parent else ""
                owner = _shape_at(model, parent)
                hint = _field_hint(str(loc[-1]), owner, _shape_at(model, parent[:-1])
                                   if parent else None, _path(parent))
                self.error(tree.keys.get(loc) or tree.node(loc),
                           f"unknown field '{loc[-1]}'{where}{hint}")
            elif kind == "empty_expression":
                self.error(tree.expression(loc).position, f"{path}: empty expression")
            elif kind == "literal_error" and isinstance(e["input"], str):
                allowed = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
                hint = _VALUE_HINTS.get((str(loc[-1]), e["input"]), "")
                cased = [a for a in allowed if a.lower() == e["input"].lower()]
                close = closest(e["input"], allowed)
                if not hint and cased:
                    hint = f" (did you mean '{cased[0]}'? values are case-sensitive)"
                elif not hint and close:
                    hint = f" (did you mean '{close}'?)"
                self.error(tree.node(loc), f"{path}: invalid value '{e['input']}'; "
                                           f"allowed: {', '.join(allowed)}{hint}")
            elif kind in ("literal_error", *_EXPECTED):
                what = _EXPECTED.get(kind, "a string")
                node = tree.node(loc)
                hint = ""
                if what == "a list" and isinstance(node, ScalarNode) and node.tag == _yaml.STR:
                    hint = f" (a list of one: [{node.value}])"
                self.error(node, f"{path}: expected {what}, got {describe(node)}{hint}")
            elif kind in ("model_type", "model_attributes_type"):
                owner = _shape_at(model, loc)
                what = owner.expected if owner else "a mapping"
                self.error(tree.node(loc), f"{path}: expected {what}, got "
                                           f"{describe(tree.node(loc))}")
            elif kind == "expected":
                self.error(tree.node(loc), f"{path}: {e['msg']}, got "
                                           f"{describe(tree.node(loc))}")
            else:
                self.error(tree.node(loc), f"{path}: {e['msg']}")

    # -- checks that need more than one element, or the file system ----------------------

    def cross_checks(self, tree: _Tree, kind: str) -> dict[str, Any] | None:
        """Unique names within lists; the params file. Run whether or not the model
        validated, so that every problem comes at once. Returns the merged params."""
        spec = tree.data.get("spec")
        if not isinstance(spec, dict):
            return None
        for field_name, what in _NAMED_LISTS[kind]:
            items = spec.get(field_name)
            if isinstance(items, list):
                self.unique_names(tree, ("spec", field_name), items, what)
        if kind == "ToolPolicy":
            return self.policy_params(tree, spec)
        if kind == "Library":
            for i, f in enumerate(spec.get("functions") or ()):
                if isinstance(f, dict) and isinstance(f.get("params"), list):
                    self.unique_names(tree, ("spec", "functions", i, "params"), f["params"],
                                      "parameter")
            return None
        if kind == "PolicyTest":
            self._test_policies(tree, report=True)
        return None

    def unique_names(self, tree: _Tree, loc: Loc, items: list[Any], what: str) -> None:
        first: dict[str, Position] = {}
        for i, item in enumerate(items):
            name = item.get("name") if isinstance(item, dict) else None
            if not isinstance(name, str):
                continue
            pos = tree.pos((*loc, i))
            if name in first:
                self.error(pos, f"duplicate {what} name '{name}' (first at line "
                                f"{first[name].line})")
            else:
                first[name] = pos

    def params_file(self, tree: _Tree) -> str | None:
        rel = tree.data["spec"].get("paramsFile")
        if not isinstance(rel, str) or not rel.strip():
            return None
        return os.path.normpath(os.path.join(os.path.dirname(self.src.name), rel))

    def policy_params(self, tree: _Tree, spec: dict[str, Any]) -> dict[str, Any] | None:
        """``paramsFile`` content with inline ``params`` merged over it (per key)."""
        params: dict[str, Any] = {}
        params_file = self.params_file(tree)
        if params_file is not None:
            rel = spec["paramsFile"]
            node = tree.values[("spec", "paramsFile")]
            loaded = self.loader.load_params(params_file)
            if loaded.value is None:
                self.error(node, f"spec.paramsFile '{rel}': {loaded.reason}")
                return None
            if "apiVersion" in loaded.value and "kind" in loaded.value:
                self.error(node, f"spec.paramsFile '{rel}' is a guardrails document, "
                                 "not a params file")
                return None
            params.update(loaded.value)
        inline = spec.get("params")
        if isinstance(inline, dict):
            params.update(inline)
        return params

    def test_policies(self, tree: _Tree) -> tuple[str, ...]:
        return tuple(self._test_policies(tree, report=False))

    def _test_policies(self, tree: _Tree, *, report: bool) -> list[str]:
        spec = tree.data.get("spec")
        rels = spec.get("policies") if isinstance(spec, dict) else None
        out: list[str] = []
        base = os.path.dirname(self.src.name)
        for i, rel in enumerate(rels if isinstance(rels, list) else ()):
            if not isinstance(rel, str) or not rel.strip():
                continue
            path = os.path.normpath(os.path.join(base, rel))
            if report and not os.path.exists(path):
                folder = os.path.dirname(path) or "."
                try:
                    near = sorted(f for f in os.listdir(folder) if f.endswith((".yaml", ".yml")))
                except OSError:
                    near = []
                self.error(tree.pos(("spec", "policies", i)),
                           f"spec.policies[{i}]: '{rel}' does not exist (looked for {path})"
                           f"{_suggest(os.path.basename(path), near)}")
            out.append(path)
        return out


# -- records: validated data plus positions ---------------------------------------------------


def _metadata(tree: _Tree, name: str, description: str, labels: dict[str, str]) -> Metadata:
    return Metadata(name, description, MappingProxyType(dict(labels)),
                    tree.pos(("metadata",)), tree.pos(("metadata", "name")))


def _policy_record(tree: _Tree, doc: ToolPolicyDocument, params: dict[str, Any],
                   params_file: str | None) -> ToolPolicy:
    spec, at = doc.spec, ("spec",)
    m = doc.metadata
    match_loc = (*at, "match")
    match = Match(tuple(spec.match.tools) if spec.match.tools is not None else None,
                  tree.optional_expression((*match_loc, "when")),
                  tree.pos(match_loc if match_loc in tree.values else at),
                  tuple(spec.match.agents) if spec.match.agents is not None else None,
                  tuple(tree.pos((*match_loc, "tools", i))
                        for i in range(len(spec.match.tools or ()))),
                  tuple(tree.pos((*match_loc, "agents", i))
                        for i in range(len(spec.match.agents or ()))))
    counters = tuple(
        Counter(c.name, tree.expression((*at, "counters", i, "key")), c.window, c.limit,
                tree.optional_expression((*at, "counters", i, "when")),
                tree.optional_expression((*at, "counters", i, "cost")), c.failure_policy,
                tree.pos((*at, "counters", i)))
        for i, c in enumerate(spec.counters))
    variables = tuple(Variable(v.name, tree.expression((*at, "variables", i, "expression")),
                               tree.pos((*at, "variables", i)))
                      for i, v in enumerate(spec.variables))
    repairs = tuple(
        Repair(r.name, tree.optional_expression((*at, "repairs", i, "when")),
               tuple((arg, tree.expression((*at, "repairs", i, "set", arg))) for arg in r.set_),
               tuple(r.unset), tree.pos((*at, "repairs", i)))
        for i, r in enumerate(spec.repairs))
    secrets_loc = (*at, "secrets")
    secrets = Secrets(
        tuple(spec.secrets.arguments),
        tuple(SecretInjection(arg, inj.env, tree.pos((*secrets_loc, "inject", arg)))
              for arg, inj in spec.secrets.inject.items()),
        tree.pos(secrets_loc) if secrets_loc in tree.values else None)
    rules = tuple(
        Rule(r.name, tree.expression((*at, "rules", i, "when")), r.action, r.message,
             tree.optional_expression((*at, "rules", i, "messageExpression")),
             tree.pos((*at, "rules", i)))
        for i, r in enumerate(spec.rules))
    _text_warnings(tree, spec)
    redact = tuple(Redaction(r.name, r.regex, r.replacement, tree.pos((*at, "redact", i)),
                             tree.pos((*at, "redact", i, "regex")))
                   for i, r in enumerate(spec.redact))
    return ToolPolicy(metadata=_metadata(tree, m.name, m.description, m.labels),
                      mode=spec.mode, failure_policy=spec.failure_policy,
                      default_action=spec.default_action, match=match,
                      params=MappingProxyType(params), params_file=params_file,
                      variables=variables, repairs=repairs, secrets=secrets, rules=rules,
                      redact=redact, position=tree.pos(()), results=spec.results,
                      counters=counters,
                      uses=tuple((name, tree.pos((*at, "uses", i)))
                                 for i, name in enumerate(spec.uses)),
                      params_positions=_key_positions(tree, (*at, "params")))


def _text_warnings(tree: _Tree, spec: Any) -> None:
    """Texts written in another tool's template syntax, which are used as written: a
    redact ``replacement`` with JavaScript's ``$1`` or sed's ``\\0``, a rule ``message``
    with ``{{ args.to }}`` or a CEL concatenation (``messageExpression`` evaluates)."""
    for i, r in enumerate(spec.redact):
        problem = replacement_warning(r.replacement)
        if problem:
            tree.src.warn(tree.pos(("spec", "redact", i, "replacement")),
                          f"spec.redact[{i}].replacement: {problem}")
    for i, rule in enumerate(spec.rules):
        problem = message_warning(rule.message) if rule.message else None
        if problem:
            tree.src.warn(tree.pos(("spec", "rules", i, "message")),
                          f"spec.rules[{i}].{problem}")


def _key_positions(tree: _Tree, at: Loc) -> Mapping[str, Position]:
    """Where each key of the mapping at ``at`` is written (empty when there is none)."""
    return MappingProxyType({str(loc[-1]): tree.src.pos(node)
                             for loc, node in tree.keys.items()
                             if len(loc) == len(at) + 1 and loc[:-1] == at})


def _library_record(tree: _Tree, doc: LibraryDocument) -> Library:
    m, at = doc.metadata, ("spec",)
    functions = tuple(
        LibraryFunction(m.name, f.name, f.description,
                        tuple(FunctionParam(p.name, p.type) for p in f.params),
                        tree.expression((*at, "functions", i, "expression")),
                        tree.pos((*at, "functions", i)))
        for i, f in enumerate(doc.spec.functions))
    return Library(_metadata(tree, m.name, m.description, m.labels),
                   MappingProxyType(dict(doc.spec.params)), functions, tree.pos(()))


def _when(value: str | None) -> datetime.datetime | None:
    """A timestamp the shape has checked (RFC 3339 with a time zone)."""
    return datetime.datetime.fromisoformat(value.strip()) if value is not None else None


def _binding_record(tree: _Tree, doc: PolicyBindingDocument) -> PolicyBinding:
    spec, m = doc.spec, doc.metadata
    return PolicyBinding(
        _metadata(tree, m.name, m.description, m.labels), spec.policy,
        tree.pos(("spec", "policy")),
        tuple(spec.match.agents) if spec.match.agents is not None else None,
        tree.optional_expression(("spec", "match", "when")),
        MappingProxyType(dict(spec.params)), spec.mode, tree.pos(()),
        _key_positions(tree, ("spec", "params")),
        tuple(tree.pos(("spec", "match", "agents", i))
              for i in range(len(spec.match.agents or ()))))


def _test_record(tree: _Tree, doc: PolicyTestDocument, policies: tuple[str, ...]) -> PolicyTest:
    cases: list[TestCase] = []
    for i, c in enumerate(doc.spec.cases):
        at: Loc = ("spec", "cases", i)
        call = c.call
        history = tuple(HistoryEntry(h.tool, MappingProxyType(h.args), h.effect,
                                     tree.pos((*at, "call", "history", j)), h.result,
                                     h.trusted, _when(h.at))
                        for j, h in enumerate(call.history))
        now = (datetime.datetime.fromisoformat(call.now.strip())
               if call.now is not None else None)
        test_call = TestCall(call.tool, MappingProxyType(call.args),
                             MappingProxyType(call.principal), history, call.request,
                             call.description, tree.pos((*at, "call")), now, call.agent,
                             MappingProxyType(dict(call.counters))
                             if call.counters is not None else None)
        e = c.expect
        expect = TestExpect(e.effect,
                            MappingProxyType(e.arguments) if e.arguments is not None else None,
                            tuple(e.rules) if e.rules is not None else None, e.message,
                            e.errors, tree.pos((*at, "expect")))
        cases.append(TestCase(c.name, test_call, expect, tree.pos(at)))
    m = doc.metadata
    return PolicyTest(_metadata(tree, m.name, m.description, m.labels), policies,
                      tuple(cases), tree.pos(()))
