"""The CEL conformance suite (cel-spec "simple" tests, as JSON in tests/conformance/).

Every test that does not need protobuf messages runs through parse -> compile -> evaluate
and is compared with its expected value or error. Tests we cannot pass are listed in
EXCLUDED with the reason; they are reported as skipped so the per-file counts stay
visible. ``python tests/test_conformance.py`` prints passed/skipped/failed per file.
"""

from __future__ import annotations

import base64
import datetime
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from guardrails.expr import CelError, ExpressionError, compile_expression
from guardrails.expr.compiler import Backend
from guardrails.expr.values import CelType, UInt

DATA = Path(__file__).parent / "conformance"

# (file, section or "*", test name or "*", reason). The first matching entry wins.
_UNBOUND = (
    "by design an unknown variable or function is a load-time error (ExpressionError), "
    "not cel-go's run-time error"
)
_ARITY = "by design a call with the wrong number of arguments is a load-time error"
_TWO_VAR = "two-variable comprehensions (cel-go ext): the AST has one iteration variable"
_NANOS = "nanosecond precision: timestamps and durations keep microseconds (datetime)"
_LEADING_DOT = "leading-dot absolute names: the parser reads '.y' as 'y'"
EXCLUDED: list[tuple[str, str, str, str]] = [
    ("basic", "variables", "self_eval_unbound_lookup", _UNBOUND),
    ("basic", "variables", "unbound_is_runtime_error", _UNBOUND),
    ("basic", "functions", "unbound", _UNBOUND),
    ("basic", "functions", "unbound_is_runtime_error", _UNBOUND),
    ("conversions", "type", "dyn_no_denotation", _UNBOUND),
    ("parse", "receiver_function_names", "*", _UNBOUND),
    ("namespace", "namespace_shadowing", "disambiguation", _LEADING_DOT),
    ("namespace", "namespace_shadowing", "comprehension_shadowing_disambiguation", _LEADING_DOT),
    (
        "namespace",
        "namespace_shadowing",
        "comprehension_shadowing_namespaced_selector_disambiguation",
        _LEADING_DOT,
    ),
    ("macros2", "*", "*", _TWO_VAR),
    ("block_ext", "*", "*", "cel.block is a cel-go optimiser form, not for hand-written policies"),
    (
        "string_ext",
        "format",
        "map support (all key types)",
        "a map mixing the bool key true with the int key 1 (Python dicts merge them): "
        "rejected with an error",
    ),
    ("string_ext", "type_errors", "indexof_ternary_invalid_arguments", _ARITY),
    ("timestamps", "*", "toString_timestamp_nanos", _NANOS),
    ("timestamps", "*", "add_duration_nanos_over", _NANOS),
    ("timestamps", "*", "add_duration_nanos_under", _NANOS),
    (
        "parse",
        "bytes_literals",
        "triple_single_quoted_unescaped_punctuation",
        "upstream data: the expected bytes hold a backslash that the expression does not",
    ),
    (
        "parse",
        "bytes_literals",
        "triple_double_quoted_unescaped_punctuation",
        "upstream data: the expected bytes hold a backslash that the expression does not",
    ),
]


@dataclass(frozen=True)
class Case:
    file: str
    index: int
    section: str
    name: str
    expr: str
    container: str
    declared: tuple[str, ...]
    bindings: Mapping[str, Any]
    expected: Mapping[str, Any]
    skip: str | None

    @property
    def id(self) -> str:
        return f"{self.file}/{self.index}/{self.section}/{self.name}"


_SPECIAL = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf, "-0.0": -0.0}


def decode(v: Mapping[str, Any]) -> Any:
    ((tag, x),) = v.items()
    if tag == "null":
        return None
    if tag in ("bool", "string"):
        return x
    if tag == "int":
        return int(x)
    if tag == "uint":
        return UInt(int(x))
    if tag == "double":
        return _SPECIAL[x] if isinstance(x, str) else float(x)
    if tag == "bytes_b64":
        return base64.b64decode(x)
    if tag == "list":
        return [decode(e) for e in x]
    if tag == "map":
        return {decode(k): decode(e) for k, e in x}
    if tag == "type":
        return CelType.named(x)
    if tag == "timestamp":
        m = re.fullmatch(r"(.*?)(?:\.(\d+))?Z", x)
        assert m is not None
        frac = (m.group(2) or "").ljust(6, "0")[:6]
        dt = datetime.datetime.fromisoformat(m.group(1) + "+00:00")
        return dt.replace(microsecond=int(frac))
    if tag == "duration":
        m = re.fullmatch(r"(-?)(\d+)(?:\.(\d+))?s", x)
        assert m is not None
        us = int(m.group(2)) * 1_000_000 + int((m.group(3) or "").ljust(6, "0")[:6])
        return datetime.timedelta(microseconds=-us if m.group(1) else us)
    raise ValueError(f"unsupported VALUE tag {tag!r}")


def same(actual: Any, expected: Any) -> bool:
    """Strict CEL value equality for checking results: int, uint, double and bool differ."""
    if type(actual) is tuple:
        actual = list(actual)
    if type(actual) is not type(expected):
        if isinstance(actual, Mapping) and type(expected) is dict:
            actual = dict(actual)
        else:
            return False
    if type(expected) is float:
        if math.isnan(expected):
            return math.isnan(actual)
        return bool(actual == expected) and math.copysign(1, actual) == math.copysign(1, expected)
    if type(expected) is list:
        return len(actual) == len(expected) and all(
            same(a, e) for a, e in zip(actual, expected, strict=True)
        )
    if type(expected) is dict:
        if len(actual) != len(expected):
            return False
        for k, v in expected.items():
            match = [ak for ak in actual if same(ak, k)]
            if len(match) != 1 or not same(actual[match[0]], v):
                return False
        return True
    return bool(actual == expected)


def _excluded(file: str, section: str, name: str) -> str | None:
    for f, s, n, reason in EXCLUDED:
        if f == file and s in ("*", section) and n in ("*", name):
            return reason
    return None


def load_cases() -> list[Case]:
    cases = []
    for path in sorted(DATA.glob("*.json")):
        for t in json.loads(path.read_text(encoding="utf-8"))["tests"]:
            skip = None
            if t["needs_proto"]:
                skip = "needs protobuf messages (not supported by design)"
            elif t["check_only"]:
                skip = "type-checker only (no evaluation to run)"
            elif any(w.startswith("construct:") for w in t.get("wkt", ())):
                skip = "builds a protobuf well-known-type message (message literals unsupported)"
            else:
                skip = _excluded(t["file"], t["section"], t["name"])
            declared = tuple(
                sorted(
                    {*t["bindings"], *(e["name"] for e in t["type_env"] if e["kind"] == "ident")}
                )
            )
            bindings = {} if skip else {k: decode(v) for k, v in t["bindings"].items()}
            cases.append(
                Case(
                    t["file"],
                    t["index"],
                    t["section"],
                    t["name"],
                    t["expr"],
                    t["container"],
                    declared,
                    bindings,
                    t["expected"],
                    skip,
                )
            )
    return cases


CASES = load_cases()


BACKENDS = ("compiled", "closures")
"""The generated-code backend (the default) and the closure backend, both held to cel-spec."""


def run_case(case: Case, backend: Backend = "compiled") -> str | None:
    """None when the case passes, else what went wrong."""
    try:
        program = compile_expression(
            case.expr, declared=case.declared, container=case.container, backend=backend
        )
    except ExpressionError as e:
        return f"compile error: {e.message} at {e.offset}"
    expected = case.expected
    try:
        result = program.evaluate(case.bindings)
    except CelError as e:
        if "error" in expected:
            return None
        return f"evaluation error: {e.message}"
    if "error" in expected:
        return f"expected error {expected['error']!r}, got {result!r}"
    want = decode(expected["value"])
    if not same(result, want):
        return f"expected {want!r}, got {result!r}"
    return None


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_conformance(case: Case, backend: Backend) -> None:
    if case.skip:
        pytest.skip(case.skip)
    problem = run_case(case, backend)
    assert problem is None, f"{case.expr!r}: {problem}"


def test_every_file_runs_something() -> None:
    files = {c.file for c in CASES if c.skip is None}
    assert {"basic", "comparisons", "conversions", "logic", "macros", "string"} <= files


if __name__ == "__main__":
    import sys
    from collections import Counter

    verbose = "-v" in sys.argv
    backend: Backend = "closures" if "--closures" in sys.argv else "compiled"
    print(f"backend: {backend}")
    counts: dict[str, Counter[str]] = {}
    for case in CASES:
        c = counts.setdefault(case.file, Counter())
        if case.skip:
            c["skipped"] += 1
            continue
        problem = run_case(case, backend)
        if problem is None:
            c["passed"] += 1
        else:
            c["failed"] += 1
            if verbose:
                print(f"FAIL {case.id}: {case.expr!r}: {problem}")
    total: Counter[str] = Counter()
    for file, c in sorted(counts.items()):
        total.update(c)
        print(f"{file:16} passed {c['passed']:4}  skipped {c['skipped']:4}  failed {c['failed']:4}")
    print(
        f"{'total':16} passed {total['passed']:4}  skipped {total['skipped']:4}  failed {total['failed']:4}"
    )
