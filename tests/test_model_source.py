"""Expression.position_of: offsets inside a CEL expression map back to file:line:column."""

from __future__ import annotations

from pathlib import Path

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails.model import Expression, Position, ToolPolicy, load_documents


def _policy_with_when(tmp_path: Path, when_yaml: str, newline: str = "\n") -> tuple[
        ToolPolicy, list[str]]:
    text = (
        "apiVersion: guardrails/v1\n"
        "kind: ToolPolicy\n"
        "metadata: {name: p}\n"
        "spec:\n"
        "  rules:\n"
        "    - name: r\n"
        "      action: deny\n"
        f"      when: {when_yaml}\n"
    ).replace("\n", newline)
    path = tmp_path / "p.yaml"
    path.write_bytes(text.encode())
    policy = load_documents(str(path)).policies[0]
    return policy, text.split(newline)


def _char_at(lines: list[str], pos: Position) -> str:
    line = lines[pos.line - 1]
    return line[pos.column - 1] if pos.column - 1 < len(line) else "\n"


def _assert_every_char_maps(expr: Expression, lines: list[str]) -> None:
    for i, ch in enumerate(expr.source):
        if ch.isspace():
            continue
        assert _char_at(lines, expr.position_of(i)) in (ch, "\\"), (i, ch, expr.position_of(i))


def test_plain_scalar(tmp_path: Path) -> None:
    policy, lines = _policy_with_when(tmp_path, "args.a > 1 && args.b")
    when = policy.rules[0].when
    assert when.position == Position(str(tmp_path / "p.yaml"), 8, 13)
    assert when.position_of(0) == when.position
    assert when.position_of(14) == Position(when.position.file, 8, 27)  # 'a' of args.b
    assert _char_at(lines, when.position_of(14)) == "a"
    assert when.position_of(len(when.source)).column == 13 + len(when.source)


def test_single_quoted_with_doubled_quote(tmp_path: Path) -> None:
    policy, lines = _policy_with_when(tmp_path, "'args.s == ''it''''s'' && x'")
    when = policy.rules[0].when
    assert when.source == "args.s == 'it''s' && x"
    assert when.position.column == 14  # after the opening quote
    x = when.source.index("x")
    assert when.position_of(x) == Position(when.position.file, 8, lines[7].rindex("x") + 1)
    assert _char_at(lines, when.position_of(x)) == "x"
    _assert_every_char_maps(when, lines)


def test_double_quoted_without_and_with_escapes(tmp_path: Path) -> None:
    policy, lines = _policy_with_when(tmp_path, r'"args.s == \"a\u0041\" && y"')
    when = policy.rules[0].when
    assert when.source == 'args.s == "aA" && y'
    assert when.position.column == 14
    y = when.source.index("y")
    assert _char_at(lines, when.position_of(y)) == "y"
    assert when.position_of(y).column == lines[7].index("y") + 1
    # The escape \u0041 maps to its backslash.
    assert _char_at(lines, when.position_of(when.source.index("A"))) == "\\"


def test_literal_block_multi_line(tmp_path: Path) -> None:
    policy, lines = _policy_with_when(
        tmp_path, "|\n        args.a > 1\n          && args.b.startsWith(\"x\")\n")
    when = policy.rules[0].when
    assert when.source == 'args.a > 1\n  && args.b.startsWith("x")\n'
    assert when.position == Position(when.position.file, 9, 9)
    amp = when.source.index("&&")
    assert when.position_of(amp) == Position(when.position.file, 10, 11)
    # A kept leading space maps to its own column, not to the indentation.
    assert when.position_of(amp - 1) == Position(when.position.file, 10, 10)
    _assert_every_char_maps(when, lines)


def test_literal_block_strip_and_explicit_indent(tmp_path: Path) -> None:
    policy, lines = _policy_with_when(tmp_path, "|2-\n          x == 1\n         || y")
    when = policy.rules[0].when
    assert when.source == "  x == 1\n || y"  # indentation 8 = parent's 6 + 2
    assert when.position_of(when.source.index("x")) == Position(when.position.file, 9, 11)
    assert when.position_of(when.source.index("y")) == Position(when.position.file, 10, 13)
    _assert_every_char_maps(when, lines)


def test_folded_block_and_plain_multi_line(tmp_path: Path) -> None:
    policy, _ = _policy_with_when(tmp_path, ">\n        a &&\n        b\n")
    when = policy.rules[0].when
    assert when.source == "a && b\n"
    assert when.position_of(5) == Position(when.position.file, 10, 9)
    policy, _ = _policy_with_when(tmp_path, "a &&\n        b")
    when = policy.rules[0].when
    assert when.source == "a && b"
    assert when.position_of(5) == Position(when.position.file, 9, 9)


def test_crlf_line_endings(tmp_path: Path) -> None:
    policy, _ = _policy_with_when(tmp_path, "|\n        a\n        && b\n", newline="\r\n")
    when = policy.rules[0].when
    assert when.source == "a\n&& b\n"
    assert when.position_of(when.source.index("b")) == Position(when.position.file, 10, 12)


def test_hand_built_expression_counts_from_its_position() -> None:
    expr = Expression("ab\ncd", Position("f.yaml", 3, 7))
    assert expr.position_of(1) == Position("f.yaml", 3, 8)
    assert expr.position_of(4) == Position("f.yaml", 4, 2)
    assert expr.position_of(-5) == Position("f.yaml", 3, 7)
    assert expr.position_of(99) == Position("f.yaml", 4, 3)


_CEL_CHARS = st.sampled_from([*list("abcxyz019_.()[]{}<>=!&|+-*/%?:,'\"\\# \t\n"), "é", "→", "\x01"])


@settings(max_examples=200, deadline=None)
@given(source=st.text(_CEL_CHARS, min_size=1, max_size=60).filter(lambda s: s.strip()),
       style=st.sampled_from([None, "'", '"', "|", ">"]))
def test_any_emitted_style_maps_every_visible_character(source: str, style: str | None,
                                                         tmp_path_factory: object) -> None:
    """Whatever style PyYAML's emitter picks, visible characters map to themselves (or to
    the backslash of their escape)."""
    body = yaml.safe_dump({"when": source}, default_style=style, allow_unicode=True,
                          width=30)
    # A kept trailing newline ends the document with "...": not valid once indented.
    if body.endswith("\n...\n"):
        body = body[: -len("...\n")]
    text = (
        "apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata: {name: p}\nspec:\n"
        "  rules:\n  - name: r\n    action: deny\n"
        + "".join("    " + line + "\n" for line in body.splitlines())
    )
    directory = tmp_path_factory.mktemp("h")  # type: ignore[attr-defined]
    path = directory / "p.yaml"
    path.write_text(text, encoding="utf-8")
    when = load_documents(str(path)).policies[0].rules[0].when
    assert when.source == source
    # No segments means the text is written verbatim on one line: offsets add to the column.
    _assert_every_char_maps(when, text.split("\n"))


def _line_starts_one_by_one(text: str) -> list[int]:
    """PyYAML Reader's rule, character by character (the loop the search replaced)."""
    starts = [0]
    for i, ch in enumerate(text):
        if ch in "\n\x85\u2028\u2029" or (ch == "\r" and text[i + 1:i + 2] != "\n"):
            starts.append(i + 1)
    return starts


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="ab \r\n\x85\u2028\u2029\t", max_size=40))
def test_line_starts_follow_pyyaml_line_breaks(text: str) -> None:
    from guardrails.model._yaml import SourceFile

    assert SourceFile("f.yaml", text)._line_starts == _line_starts_one_by_one(text)
