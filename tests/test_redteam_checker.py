"""Red team of the loader and ``guardrails check``: inputs meant to crash it (a traceback
instead of ``file:line:column: message``) or to hang it. Every input must end within a
bounded time with exit 0 or 1 (or 2 for a bad --tools file) and no traceback."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from guardrails.cli import main

HEAD = "apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
RULE = "  match: {tools: [t]}\n  rules:\n    - {name: r, when: 'WHEN', action: deny}\n"


def _when(expression: str) -> str:
    return HEAD + RULE.replace("WHEN", expression.replace("'", "''"))


POLICIES: dict[str, str] = {
    "empty": "",
    "only a comment": "# nothing\n",
    "a bare scalar": "42\n",
    "a list": "- 1\n- 2\n",
    "null document": "~\n",
    "tabs": "apiVersion:\tguardrails/v1\n\tkind: ToolPolicy\n",
    "binary": "\x00\x01\x02\xff",
    "BOM and CRLF": "\ufeff" + HEAD.replace("\n", "\r\n") + RULE.replace(
        "WHEN", "true").replace("\n", "\r\n"),
    "lone surrogate escape": HEAD + '  match: {tools: ["\\ud800"]}\n  rules: []\n',
    "deep flow nesting": "a: " + "[" * 5000 + "]" * 5000 + "\n",
    "deep block nesting": "".join("  " * i + f"k{i}:\n" for i in range(300)),
    "alias bomb": "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n"
        for i in range(8)),
    "merge key": HEAD + "  <<: {match: {tools: [t]}}\n  rules: []\n",
    "duplicate nested key": HEAD + "  match: {tools: [t]}\n  rules:\n"
                            "    - {name: r, when: 'true', when: 'false', action: deny}\n",
    "duplicate top key": HEAD + "  match: {tools: [t]}\n  match: {tools: [u]}\n  rules: []\n",
    "non-string key": HEAD + "  ? [1, 2]\n  : x\n",
    "huge integer": HEAD + "  match: {tools: [t]}\n  params: {n: " + "9" * 5000 + "}\n"
                    "  rules: []\n",
    "many documents": "---\n{}\n" * 2000,
    "unknown tag": HEAD + "  match: !!python/object:os.system {tools: [t]}\n  rules: []\n",
    "timestamp and binary tags": HEAD + "  match: {tools: [!!binary aGk=]}\n  rules: []\n",
    "right-to-left override in a name": HEAD.replace("name: p", "name: \"p\u202egnp\"")
                                        + RULE.replace("WHEN", "true"),
    "zero-width look-alike tool": HEAD + "  match: {tools: [\"t\u200b\"]}\n  rules: []\n",
    "catastrophic regex literal": _when("args.s.matches('(a+)+$')"),
    "regex with a huge repeat": _when("args.s.matches('a{100000}{100000}')"),
    "invalid regex": _when("args.s.matches('(')"),
    "backreference regex": _when("args.s.matches('(a)\\\\1')"),
    "deep expression": _when("(" * 3000 + "true" + ")" * 3000),
    "long chain": _when(" && ".join(["true"] * 20000)),
    "deep comprehension": _when("[1].all(x, " * 200 + "true" + ")" * 200),
    "huge string literal": _when("'" + "a" * 2_000_000 + "' == args.s"),
    "unterminated string": _when("'abc"),
    "bad escape": _when("'\\uZZZZ' == args.s"),
    "unicode identifiers": _when("args.\u00e9t\u00e9 == 1"),
    "nul in expression": _when("true\x00"),
}

TOOLS: dict[str, str] = {
    "recursive $ref": '{"t": {"type": "object", "properties": {"a": {"$ref": "#/$defs/n"}},'
                      ' "$defs": {"n": {"type": "object", "properties": {"next": '
                      '{"$ref": "#/$defs/n"}}}}}}',
    "self $ref": '{"t": {"$ref": "#"}}',
    "mutual $ref": '{"t": {"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b"}, '
                   '"b": {"$ref": "#/$defs/a"}}}}',
    "dangling $ref": '{"t": {"type": "object", "properties": {"a": {"$ref": "#/nope"}}}}',
    "remote $ref": '{"t": {"$ref": "http://127.0.0.1:1/schema.json"}}',
    "deep schema": '{"t": ' + '{"type": "object", "properties": {"a": ' * 400 + "{}"
                   + "}}" * 400 + "}",
    "deep flow nesting": "t: " + "[" * 5000 + "]" * 5000,
    "alias bomb": "a: &a {type: object, properties: {x: {type: string}}}\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} {{type: object, properties: {{"
        + ", ".join(f"p{j}: *{chr(97 + i)}" for j in range(9)) + "}}\n" for i in range(8))
        + "t: *i\n",
    "not an object": "[1, 2, 3]",
    "schema is a string": '{"t": "object"}',
    "properties is a list": '{"t": {"type": "object", "properties": [1]}}',
}


def _run(argv: list[str], capsys: pytest.CaptureFixture[str],
         seconds: float = 30) -> tuple[int, str]:
    result: list[object] = []

    def work() -> None:
        try:
            result.append(main(argv))
        except SystemExit as e:
            result.append(e.code)
        except BaseException as e:
            result.append(e)

    t = threading.Thread(target=work, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"guardrails {' '.join(argv)} still running after {seconds} s"
    out = capsys.readouterr()
    [code] = result
    if isinstance(code, BaseException):
        raise AssertionError(f"crashed: {type(code).__name__}: {code}") from code
    assert isinstance(code, int)
    return code, out.out + out.err


@pytest.mark.parametrize("name", list(POLICIES))
def test_check_never_crashes_on_odd_policies(tmp_path: Path, name: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.yaml"
    path.write_bytes(POLICIES[name].encode("utf-8", "surrogatepass"))
    code, text = _run(["check", str(path)], capsys)
    assert code in (0, 1), (code, text)
    assert "Traceback" not in text
    if code == 1:
        # Every problem is located: the file, then line and column.
        assert re.search(re.escape(str(path)) + r":\d+:\d+: ", text), text[:2000]


@pytest.mark.parametrize("name", list(TOOLS))
def test_check_never_crashes_on_odd_tool_schemas(tmp_path: Path, name: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(HEAD + "  match: {tools: [t]}\n  rules:\n"
                      "    - {name: r, when: 'args.a.next.next.x == 1', action: deny}\n")
    tools = tmp_path / "tools.json"
    tools.write_text(TOOLS[name])
    code, text = _run(["check", str(policy), "--tools", str(tools)], capsys)
    assert code in (0, 1, 2), (code, text)
    assert "Traceback" not in text
