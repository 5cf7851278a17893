"""Compile loaded policy documents into a ``PolicySet``: the load-time half of the engine.

The loader (``guardrails.model``) has checked the documents' shape; this step compiles
every CEL expression once, checks the names it uses, and reports every problem with the
file, line and column of the offending character. As with the loader, it is all or
nothing: one problem and nothing is returned.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import hashlib
import os
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, Literal

import re2

from guardrails.engine.decision import Action, Effect
from guardrails.engine.policy import (
    CompiledCounter,
    CompiledExpression,
    CompiledPolicy,
    CompiledRepair,
    CompiledRule,
    CompiledVariable,
    RedactPattern,
    SecretRef,
)
from guardrails.engine.policyset import PolicySet
from guardrails.engine.typecheck import typecheck
from guardrails.expr import (
    CelError,
    ExpressionError,
    Program,
    compile_expression,
    generate_pending,
)
from guardrails.expr import ast as cel
from guardrails.expr.compiler import compile_ast, fused_rules
from guardrails.expr.inline import Function, inline, uses_functions
from guardrails.expr.lib_common import prepare_patterns
from guardrails.expr.library import FUNCTIONS
from guardrails.expr.limits import DEFAULT_LIMITS, Limits
from guardrails.expr.parser import CelSyntaxError, parse
from guardrails.expr.spelling import closest
from guardrails.expr.stdlib import pattern_tester
from guardrails.expr.typechecker import suggest
from guardrails.model import Documents
from guardrails.model.documents import PolicyBinding, ToolPolicy
from guardrails.model.errors import PolicyError, Problem
from guardrails.model.loader import RE2_OPTIONS, SHIPPED_LIBRARIES, read_documents
from guardrails.model.source import Expression

Backend = Literal["compiled", "closures", "interpreter"]

CALL_NAMES = frozenset({"tool", "args", "principal", "history", "request", "params", "now"})
"""Names every expression can use; ``variables`` is added where variables exist."""

PROVENANCE_FUNCTIONS = frozenset({"provenance", "untrusted"})
"""Functions that read ``history`` and ``request`` without naming them."""
SCANNING_METHODS = frozenset({"mentions"})
"""Methods that scan on the call's provenance budget (``lib_provenance.SCAN_BUDGET``)."""
PROVENANCE_MARKER = "@provenance"
"""In ``CompiledExpression.names`` of an expression calling them or ``SCANNING_METHODS``
(never a CEL name)."""

PathLike = str | os.PathLike[str]


def load(
    paths: PathLike | Sequence[PathLike],
    *,
    limits: Limits | None = None,
    backend: Backend = "compiled",
    allow_empty: bool = False,
) -> PolicySet:
    """Load, validate and compile policies from files and directories.

    Raises ``PolicyError`` listing every problem found, with ``file:line:column``.
    A load that finds no ``ToolPolicy`` at all is an error too: an empty set allows every
    call, which is what a wrong path would silently give. Pass ``allow_empty=True`` when
    an empty set is meant (a baseline, the first step of a rollout): then no paths, or
    directories without policy files, give an empty set. A missing path or a broken file
    is an error either way.
    """
    return load_with_warnings(paths, limits=limits, backend=backend, allow_empty=allow_empty)[0]


def load_with_warnings(
    paths: PathLike | Sequence[PathLike],
    *,
    limits: Limits | None = None,
    backend: Backend = "compiled",
    allow_empty: bool = False,
) -> tuple[PolicySet, tuple[Problem, ...]]:
    """``load``, and the likely mistakes that do not stop it (YAML pitfalls), for
    ``guardrails check``."""
    items = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    if allow_empty:
        items = [p for p in items if not _without_yaml(p)]
    with _collector_paused():
        documents, problems = read_documents(items) if items or not allow_empty else (_EMPTY, [])
        try:
            policy_set = compile_documents(documents, limits=limits or DEFAULT_LIMITS,
                                           backend=backend)
        except PolicyError as e:  # all problems at once: the other files' CEL too
            problems.extend(e.errors)
        if problems:
            raise PolicyError(problems)
        if not documents.policies and not allow_empty:
            where = ", ".join(os.fspath(p) for p in items)
            raise PolicyError([Problem(where, 0, 0, "no ToolPolicy documents found (pass "
                                       "allow_empty=True for an empty policy set)")])
        return policy_set, documents.warnings


_EMPTY = Documents(policies=(), tests=(), files=(), sources=MappingProxyType({}))


def _without_yaml(path: PathLike) -> bool:
    """A directory holding no ``*.yaml``/``*.yml`` file at any depth."""
    name = os.fspath(path)
    if not os.path.isdir(name):
        return False
    return not any(f.endswith((".yaml", ".yml")) for _, _, files in os.walk(name) for f in files)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Loading builds millions of small objects (YAML nodes, AST nodes, closures) that all
    live on; the cyclic collector would traverse them again and again, which measured 7x
    the whole load time of 10,000 rules. Nothing made here is garbage until the load ends.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if gc.get_freeze_count() == 0:
                # What the load made lives on: file it with the long-lived objects at
                # once (freeze then unfreeze moves the young generations into the oldest
                # without a walk). Re-enabled as is, the collector would walk all of it,
                # some 40 objects a rule, right away, and again when it is promoted: 10% of
                # a 10,000-rule load. Skipped if the application froze objects itself
                # (unfreeze would release them too).
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def compile_documents(
    documents: Documents, *, limits: Limits = DEFAULT_LIMITS, backend: Backend = "compiled"
) -> PolicySet:
    problems: list[Problem] = []
    functions = library_functions(documents, limits, problems)
    compiled = [
        _Compiler(policy, limits, backend, problems, functions).policy()
        for policy in documents.policies
    ]
    instances: list[CompiledPolicy] = []
    for policy in compiled:
        if policy is None:
            continue
        bindings = [b for b in documents.bindings if b.policy == policy.name]
        if not bindings:
            instances.append(policy)
        for b in bindings:
            bound = _bind(policy, b, limits, backend, problems)
            if bound is not None:
                instances.append(bound)
    if problems:
        raise PolicyError(problems)
    generate_pending()  # all generated code in one compile(), at load, not on first use
    _prepare_patterns(instances)
    return PolicySet(instances, revision=revision(documents), limits=limits)


_PREPARED_PATTERNS = 256
"""``params`` patterns a load compiles ahead at most (half ``stdlib``'s cache of them)."""
_PREPARE_SECONDS = 0.25
"""How long a load spends compiling ``params`` patterns ahead at most: one RE2 text can
take a second to compile (``'.{0,1000}'`` repeated), and 256 of them would make a load take
minutes. Past it the rest are compiled on first use, as before; decisions are the same."""


def _prepare_patterns(policies: Sequence[CompiledPolicy]) -> None:
    """Compile, at load, the ``params`` texts the policies use as regular expressions.

    A pattern known only at run time (``x.matches(params.p)``, or each of a list,
    ``params.ps.exists(p, x.matches(p))``) is compiled on its first use and cached
    (``stdlib.pattern_tester``): the first call of a policy with a list of them compiled
    all of them (31 for the library's ``shell`` policy, most of that call). A policy's
    params are known at load, so those texts are compiled here, into the same cache,
    which a call then finds them in; the call's decision is the same (its charge for a
    pattern does not depend on the cache: ``limits.pattern_charge``). An invalid text
    stays what it was, an error of the call that uses it. The same for the patterns of
    their own that library functions the policies call compile (``fixed_patterns``:
    ``credentials.found``, ``url``...).
    """
    left = _PREPARED_PATTERNS
    until = time.perf_counter() + _PREPARE_SECONDS
    library: set[Any] = set()
    for policy in policies:
        names: set[str] = set()
        for _, _, program in policy.expressions():
            params, functions = _patterns_used(program)
            names |= params
            library |= functions
        for name in sorted(names):
            value = policy.params.get(name)
            for text in [value] if type(value) is str else (
                    value if type(value) is list else []):
                if type(text) is not str or left <= 0 or time.perf_counter() >= until:
                    continue
                left -= 1
                with contextlib.suppress(CelError):
                    pattern_tester(text)
    for fn in library:  # the library functions' own patterns (``fixed_patterns``)
        prepare_patterns(fn)


_USED: dict[Any, tuple[frozenset[str], frozenset[Any]]] = {}
"""``_patterns_used`` by tree shape (``Program.shape``): a policy set repeats shapes, and
walking every tree again was a tenth of a 10,000-rule load."""
_USED_MAX = 20_000


def _patterns_used(program: Program) -> tuple[frozenset[str], frozenset[Any]]:
    """The ``params`` fields an expression uses as patterns, and the library functions it
    calls."""
    if program.ast is None:
        return frozenset(), frozenset()
    key = None if program.shape is None else program.shape[0]
    found = None if key is None else _USED.get(key)
    if found is None:
        params, by_index = _pattern_params(program.ast)
        found = frozenset(params), frozenset(_library_calls(program.ast))
        if key is not None and not by_index:  # ``params["x"]``: "x" is not in the shape
            if len(_USED) >= _USED_MAX:
                _USED.clear()
            _USED[key] = found
    return found


def _pattern_params(root: cel.Node) -> tuple[set[str], bool]:
    """The ``params`` fields whose values an expression uses as a ``matches`` pattern: the
    pattern is ``params.x`` (or ``params["x"]``), or a macro's variable over ``params.x``;
    and whether one was named by an index. One walk with a stack (a tree may be as deep as
    the parser allows)."""
    found: set[str] = set()
    by_index = False
    stack: list[tuple[cel.Node, Mapping[str, str]]] = [(root, {})]
    while stack:
        node, scope = stack.pop()  # scope: the macro variables over a params field
        if isinstance(node, cel.Call) and node.function == "matches":
            pattern = (node.args[0] if node.target is not None and len(node.args) == 1 else
                       node.args[1] if node.target is None and len(node.args) == 2 else None)
            if isinstance(pattern, cel.Ident) and pattern.name in scope:
                found.add(scope[pattern.name])
            elif pattern is not None:
                name = _reference(pattern, "params")
                if name is not None:
                    found.add(name)
                    by_index = by_index or isinstance(pattern, cel.Call)
        if isinstance(node, cel.Comprehension):
            inner = {k: v for k, v in scope.items()
                     if k not in (node.iter_var, node.iter_var2, node.accu_var)}
            over = _reference(node.iter_range, "params")
            if over is not None and not node.iter_var2:
                inner[node.iter_var] = over
                by_index = by_index or isinstance(node.iter_range, cel.Call)
            stack.append((node.iter_range, scope))
            stack.extend((part, inner) for part in (node.accu_init, node.loop_condition,
                                                     node.loop_step, node.result))
        else:
            stack.extend((child, scope) for child in cel.children(node))
    return found, by_index


def _library_calls(root: cel.Node) -> set[Any]:
    """The library functions (``library.FUNCTIONS``) an expression calls."""
    found = set()
    for node in cel.walk(root):
        if isinstance(node, cel.Call):
            name = node.function if node.target is None else (
                f"{node.target.name}.{node.function}" if isinstance(node.target, cel.Ident)
                else "")
            fn = FUNCTIONS.get(name)
            if fn is not None:
                found.add(fn)
    return found


def _bind(policy: CompiledPolicy, binding: PolicyBinding, limits: Limits, backend: Backend,
          problems: list[Problem]) -> CompiledPolicy | None:
    """The policy as one binding applies it: ``policy@binding``, with the binding's params
    over the policy's, its mode, and its selector added to the policy's own match.

    Compiled once: the programs do not depend on params, only the instance's data does.
    """
    selector = None
    if binding.when is not None:
        before = len(problems)
        selector = _compile(binding.when, CALL_NAMES, limits, backend, problems,
                            condition=True)
        if len(problems) > before:
            return None
    agents = policy.agents
    if binding.agents is not None:
        agents = (*agents, frozenset(binding.agents))
    return dataclasses.replace(
        policy,
        name=f"{policy.name}@{binding.name}",
        params={**policy.params, **_plain_data(binding.params)},
        mode=binding.mode or policy.mode,
        agents=agents,
        selector=selector,
        binding=binding.name,
    )


_REGO_ITERATION: Final = re.compile(r"\s*(some|every)\s+([A-Za-z_]\w*)(?:\s*,\s*\w+)?\s+in\s+"
                                   r"([^;{\n]+)")
"""Rego's ``some x in xs; cond`` and ``every x in xs { cond }``: a load error's hint."""


def _plain_text(source: str) -> bool:
    """A messageExpression written as text (``Blocked mail to args.to``): it does not
    parse, or it is one bare word."""
    try:
        parse(source)
    except CelSyntaxError:
        return True
    return re.fullmatch(r"\s*[A-Za-z_]\w*\s*", source) is not None


def variable_hint(message: str, variables: Sequence[Any]) -> str:
    """For ``undeclared reference to 'x'`` where ``x`` is a variable of the policy:
    variables are read as ``variables.x``."""
    found = re.match(r"undeclared reference to '([^']+)'", message)
    if found is None or found[1] not in {v.name for v in variables}:
        return ""
    return f" (a variable is read as variables.{found[1]})"


def _compile(expression: Expression, names: frozenset[str], limits: Limits, backend: Backend,
             problems: list[Problem], *, condition: bool = False) -> CompiledExpression | None:
    try:
        program = compile_expression(expression.source, declared=names, limits=limits,
                                     backend=backend)
    except ExpressionError as e:
        pos = expression.position_of(e.offset)
        problems.append(Problem(pos.file, pos.line, pos.column, e.message))
        return None
    if condition and isinstance(program.ast, cel.Literal) and type(program.ast.value) is not bool:
        pos = expression.position_of(0)
        problems.append(Problem(pos.file, pos.line, pos.column,
                                "condition must be a bool expression"))
        return None
    used = {node.name for node in cel.walk(program.ast) if isinstance(node, cel.Ident)}
    return CompiledExpression(expression, program, frozenset(used))


def revision(documents: Documents) -> str:
    """Hash of the files' contents only, so the same policies loaded from another path
    or working directory have the same revision."""
    digests = sorted(hashlib.sha256(b).hexdigest() for b in documents.sources.values())
    return hashlib.sha256("\n".join(digests).encode()).hexdigest()


class _Compiler:
    """Compiles one policy, appending problems instead of stopping at the first."""

    def __init__(
        self, policy: ToolPolicy, limits: Limits, backend: Backend, problems: list[Problem],
        functions: Mapping[str, Function] | None = None,
    ) -> None:
        self.src = policy
        self.limits = limits
        self.backend = backend
        self.problems = problems
        self.functions: Mapping[str, Function] = functions or {}
        self.namespaces = frozenset(q.split(".")[0] + "." for q in self.functions)

    def policy(self) -> CompiledPolicy | None:
        p = self.src
        before = len(self.problems)
        when = self.expr(p.match.when, CALL_NAMES, condition=True) if p.match.when else None
        counters = self.counters()
        # Rules and variables read the counters; counters themselves read only the call.
        names = CALL_NAMES | {"variables"} | ({"counters"} if p.counters else set())
        variables: list[CompiledVariable] = []
        for i, v in enumerate(p.variables):
            earlier = frozenset(x.name for x in p.variables[:i])
            e = self.expr(v.expression, names, variables=earlier)
            if e is not None:
                variables.append(CompiledVariable(v.name, e))
        all_vars = frozenset(v.name for v in p.variables)
        repairs = []
        for r in p.repairs:
            rwhen = self.expr(r.when, CALL_NAMES, condition=True) if r.when else None
            sets = [(arg, self.expr(e, CALL_NAMES)) for arg, e in r.set]
            repairs.append(CompiledRepair(
                r.name, rwhen, tuple((a, e) for a, e in sets if e is not None), r.unset))
        rules = []
        for rule in p.rules:
            rwhen = self.expr(rule.when, names, variables=all_vars, condition=True)
            mexpr = (self.expr(rule.message_expression, names, variables=all_vars,
                               text=True)
                     if rule.message_expression else None)
            if rwhen is not None:
                rules.append(CompiledRule(rule.name, rwhen, Action(rule.action),
                                          rule.message or "", mexpr, rule.position))
        redact = []
        for red in p.redact:
            try:
                redact.append(RedactPattern(red.name, re2.compile(red.regex, RE2_OPTIONS),
                                            red.replacement))
            except Exception as e:  # the loader checked it; keep the guard anyway
                self.problem(red.regex_position.line, red.regex_position.column,
                             f"redact {red.name}: invalid RE2 pattern: {e}")
        if len(self.problems) > before:
            return None
        compiled = CompiledPolicy(
            name=p.name,
            position=p.position,
            mode=p.mode,
            failure_policy=p.failure_policy,
            default_action=Effect(p.default_action),
            tools=p.match.tools,
            when=when,
            params=_plain_data(p.params),
            variables=tuple(variables),
            repairs=tuple(repairs),
            rules=tuple(rules),
            secret_arguments=p.secrets.secret_arguments,
            inject={i.argument: SecretRef(env=i.env) for i in p.secrets.inject},
            redact=tuple(redact),
            results=p.results,
            agents=(frozenset(p.match.agents),) if p.match.agents is not None else (),
            counters=counters,
            tool_positions=p.match.tool_positions,
            fused=fused_rules([r.when.program for r in rules],
                              [r.message_expression is not None for r in rules]),
        )
        # Type errors knowable without tool schemas (literals, params, the engine's own
        # names) stop the load; warnings need schemas and are `guardrails check`'s job.
        for finding in typecheck(compiled):
            if finding.severity == "error":
                pos = finding.position
                self.problem(pos.line, pos.column, f"{finding.element}: {finding.message}")
        return compiled if len(self.problems) == before else None

    def library_hint(self, message: str) -> str:
        """For ``unknown function 'ns.f'``: which library that would be, and whether it is
        loaded at all (a policy file loaded without the Library file it calls)."""
        found = re.match(r"unknown function '([A-Za-z_][A-Za-z0-9_]*)\.([^']+)'", message)
        if found is None:
            return qualified_hint(message, self.functions)
        namespace, name = found.groups()
        if namespace + "." in self.namespaces:
            known = sorted(q.split(".", 1)[1] for q in self.functions
                           if q.startswith(namespace + "."))
            close = closest(name, known)
            return (f" (did you mean '{namespace}.{close}'?)" if close
                    else f" (library '{namespace}' has: {', '.join(known)})")
        if any(q.startswith(namespace + ".") for q in FUNCTIONS):
            return ""  # a built-in namespace (sets, paths, ...): a misspelt function
        if namespace in SHIPPED_LIBRARIES:
            return (f" ('{namespace}' is a library shipped with the package: name it in "
                    f"this policy's spec.uses: [{namespace}])")
        if namespace == "authorizer":
            return (" (Kubernetes' authorizer: there is no authorizer here; the caller is "
                    "principal, as the host passes it: \"payments\" in principal.groups)")
        return (f" (if '{namespace}' is a Library, load the file that defines it with this "
                "policy)")

    def counters(self) -> tuple[CompiledCounter, ...]:
        out = []
        for c in self.src.counters:
            key = self.expr(c.key, CALL_NAMES)
            when = self.expr(c.when, CALL_NAMES, condition=True) if c.when else None
            cost = self.expr(c.cost, CALL_NAMES) if c.cost else None
            if key is not None and (c.when is None or when) and (c.cost is None or cost):
                out.append(CompiledCounter(
                    c.name, f"{self.src.name}/{c.name}", key, c.window, c.limit, when, cost,
                    c.failure_policy or self.src.failure_policy))
        return tuple(out)

    def problem(self, line: int, column: int, message: str) -> None:
        self.problems.append(Problem(self.src.file, line, column, message))

    def expr(
        self,
        expression: Expression,
        names: frozenset[str],
        *,
        variables: frozenset[str] = frozenset(),
        condition: bool = False,
        text: bool = False,
    ) -> CompiledExpression | None:
        try:
            if any(ns in expression.source for ns in self.namespaces):
                program = _compile_with_functions(expression.source, names, self.limits,
                                                  self.backend, self.functions)
            else:
                program = compile_expression(
                    expression.source, declared=names, limits=self.limits,
                    backend=self.backend)
        except ExpressionError as e:
            pos = expression.position_of(e.offset)
            message = e.message
            if text and _plain_text(expression.source):
                message += (" (messageExpression is a CEL expression: for fixed text write "
                            "message: instead, or build a string: '\"Blocked: \" + args.to')")
            rego = _REGO_ITERATION.match(expression.source)
            if rego:
                word, var, rng = rego.group(1), rego.group(2), rego.group(3).strip()
                macro = "exists" if word == "some" else "all"
                message += (f" (Rego's '{word} {var} in ...' is a macro in CEL: "
                            f"{rng}.{macro}({var}, <condition>))")
            if message.startswith("invalid escape sequence"):
                message += (" (in a CEL string a backslash starts an escape: write \\\\d "
                            "for a regex's \\d, or use a raw string, r\"\\d+\")")
            self.problems.append(Problem(pos.file, pos.line, pos.column,
                                         message + self.library_hint(message)
                                         + variable_hint(message, self.src.variables)))
            return None
        counter_names = frozenset(c.name for c in self.src.counters)
        key = _names_key(program, names, variables, counter_names, condition)
        found = _NAMES.get(key) if key is not None else None
        if found is not None:
            return CompiledExpression(expression, program, found)
        ok = True
        used: set[str] = set()
        for node in cel.walk(program.ast):
            kind = type(node)
            if kind is cel.Ident:
                assert isinstance(node, cel.Ident)
                used.add(node.name)
                continue
            if kind is cel.Call:
                assert isinstance(node, cel.Call)
                if node.target is None and node.function in PROVENANCE_FUNCTIONS:
                    # They read both, unnamed; the marker tells the engine to set their
                    # context.
                    used.update(("history", "request", PROVENANCE_MARKER))
                elif node.target is not None and node.function in SCANNING_METHODS:
                    # They read no context, but scan on the call's one budget (red team
                    # 21: without it each ``s.mentions(v)`` had a budget of its own).
                    used.add(PROVENANCE_MARKER)
            elif kind is not cel.Select:
                continue  # only a select or an index names a counter or a variable
            counter = _reference(node, "counters")
            if counter is not None and "counters" in names and counter not in counter_names:
                pos = expression.position_of(node.offset)
                known = ", ".join(c.name for c in self.src.counters)
                self.problems.append(Problem(pos.file, pos.line, pos.column,
                                             f"unknown counter '{counter}' (defined counters: "
                                             f"{known})"))
                ok = False
            name = _reference(node, "variables")
            if name is not None and name not in variables:
                pos = expression.position_of(node.offset)
                known = ", ".join(sorted(variables)) or "none"
                hint = ("variables can only use variables defined before them"
                        if "variables" in names and name in {v.name for v in self.src.variables}
                        else f"defined variables: {known}{suggest(name, sorted(variables))}")
                self.problems.append(Problem(pos.file, pos.line, pos.column,
                                             f"unknown variable '{name}' ({hint})"))
                ok = False
        if condition and isinstance(program.ast, cel.Literal) and type(program.ast.value) is not bool:
            pos = expression.position_of(0)
            self.problems.append(Problem(pos.file, pos.line, pos.column,
                                         "condition must be a bool expression"))
            ok = False
        if not ok:
            return None
        if key is not None:
            if len(_NAMES) >= _NAMES_MAX:
                _NAMES.clear()
            _NAMES[key] = frozenset(used)
        return CompiledExpression(expression, program, frozenset(used))


_NAMES: dict[tuple[Any, ...], frozenset[str]] = {}
"""The names an expression uses (``CompiledExpression.names``), for expressions whose
checks above found nothing, by what those checks read: the tree's shape
(``Program.shape``), the names, variables and counters in scope, and the names in
``variables["x"]``/``counters["x"]`` (the only literals they read). A policy set
repeats shapes; walking every tree again was a tenth of a 10,000-rule load."""
_NAMES_MAX = 20_000
_INDEX_NAMES: dict[tuple[object, ...], tuple[int, ...]] = {}
"""For each tree shape, which of its literals name a variable or counter by index."""


def _names_key(program: Program, names: frozenset[str], variables: frozenset[str],
               counters: frozenset[str], condition: bool) -> tuple[Any, ...] | None:
    if program.shape is None:
        return None
    key, literals = program.shape
    positions = _INDEX_NAMES.get(key)
    if positions is None:
        index = {id(n): i for i, n in enumerate(literals)}
        found = set()
        for node in cel.walk(program.ast):
            if isinstance(node, cel.Call) and _reference(node, "variables") is None and (
                    _reference(node, "counters") is None):
                continue
            if isinstance(node, cel.Call):  # the index form: its literal is the name
                found.add(index.get(id(node.args[1]), -1))
        if -1 in found:
            return None  # not among the shape's literals: no key
        positions = tuple(sorted(found))
        if len(_INDEX_NAMES) >= _NAMES_MAX:
            _INDEX_NAMES.clear()
        _INDEX_NAMES[key] = positions
    return (key, names, variables, counters, condition,
            tuple(literals[i].value for i in positions))


def _compile_with_functions(source: str, names: frozenset[str], limits: Limits,
                            backend: Backend, functions: Mapping[str, Function]) -> Program:
    """Parse, inline the library functions called, then check and compile the tree.

    The cel-python reference backend cannot run inlined trees: such expressions run on
    the closure backend there (docs/policy-language.md, "Libraries")."""
    try:
        node = parse(source, limits)
    except CelSyntaxError as e:
        raise ExpressionError(e.message, e.offset) from None
    if uses_functions(node, functions):
        node = inline(node, functions)
        if backend == "interpreter":
            # cel-python compiles the source text, where the call is not inlined: the
            # reference backend runs expressions that call library functions on closures
            # (everything else in the policy set stays on cel-python).
            backend = "closures"
    return compile_ast(node, source=source, declared=names, limits=limits, backend=backend)


def qualified_hint(message: str, functions: Mapping[str, Function]) -> str:
    """For ``unknown function 'f'`` where a library defines ``lib.f``: library functions
    are called by their qualified name everywhere, in a body of the same library too."""
    found = re.match(r"unknown function '([A-Za-z_][A-Za-z0-9_]*)'", message)
    if found is None:
        return ""
    names = sorted(q for q in functions if q.split(".", 1)[-1] == found[1])
    if not names:
        return ""
    return (f" (library functions are called by their qualified name, also from a function "
            f"of the same library: write '{names[0]}')")


def library_functions(documents: Documents, limits: Limits,
                      problems: list[Problem]) -> dict[str, Function]:
    """Every library function by ``library.name``, its body parsed and checked once.

    A body may use its parameters, the names every expression can use (``params`` is the
    calling policy's) and other library functions. Problems are reported at the body's
    own position; a function with a problem is left out (its calls are then reported as
    unknown functions, after the problem in the body).
    """
    parsed: dict[str, tuple[Function, Expression]] = {}
    for lib in documents.libraries:
        seen: set[str] = set()
        for f in lib.functions:
            if f.name in seen:
                continue  # the loader reported the duplicate
            seen.add(f.name)
            try:
                body = parse(f.expression.source, limits)
            except CelSyntaxError as e:
                pos = f.expression.position_of(e.offset)
                problems.append(Problem(pos.file, pos.line, pos.column, e.message))
                continue
            fn = Function(f.qualified, tuple((p.name, p.type) for p in f.params), body)
            parsed[f.qualified] = (fn, f.expression)
    functions = {q: fn for q, (fn, _) in parsed.items()}
    good: dict[str, Function] = {}
    for qualified, (fn, expression) in parsed.items():
        declared = CALL_NAMES | {p for p, _ in fn.params}
        try:
            # The body as written (parameters as plain names), with the functions it calls
            # inlined: recursion and every other problem show at the body's own position.
            checked = inline(fn.body, {k: v for k, v in functions.items()}, root=qualified)
            compile_ast(checked, source=expression.source, declared=declared, limits=limits,
                        backend="closures")
        except ExpressionError as e:
            pos = expression.position_of(e.offset)
            problems.append(Problem(pos.file, pos.line, pos.column,
                                    f"library function {qualified}: {e.message}"
                                    + qualified_hint(e.message, functions)))
            continue
        good[qualified] = fn
    return good


def _reference(node: cel.Node, root: str) -> str | None:
    """The name in ``<root>.x`` or ``<root>["x"]`` (``variables``, ``counters``), else None."""
    if (isinstance(node, cel.Select) and isinstance(node.operand, cel.Ident)
            and node.operand.name == root):
        return node.field
    if (isinstance(node, cel.Call) and node.function == "_[_]" and len(node.args) == 2
            and isinstance(node.args[0], cel.Ident) and node.args[0].name == root
            and isinstance(node.args[1], cel.Literal) and isinstance(node.args[1].value, str)):
        return node.args[1].value
    return None


def _plain_data(value: Any) -> Any:
    """Params as plain CEL data (dicts with string keys, lists), copied once at load.

    Every call shares them; that is safe because CEL has no way to mutate a value and the
    engine never writes to them.
    """
    if isinstance(value, dict):
        return {str(k): _plain_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain_data(v) for v in value]
    return value
