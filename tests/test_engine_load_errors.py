"""Load-time problems found by the engine's compile step, reported at file:line:column."""

from __future__ import annotations

from pathlib import Path

import pytest

import guardrails
from tests.engine_support import policy


def problems(tmp_path: Path, spec: str, name: str = "p.yaml") -> list[guardrails.Problem]:
    path = tmp_path / name
    path.write_text(policy(spec=spec))
    with pytest.raises(guardrails.PolicyError) as info:
        guardrails.load(path)
    return info.value.errors


def test_cel_syntax_error_names_the_character(tmp_path: Path) -> None:
    (p,) = problems(tmp_path, """
        rules:
          - name: r
            when: 'args.amount >> 3'
            action: deny
    """)
    # line 8 is `      when: '...'`: the quote is at column 13, the expression starts
    # at 14, and the offending second `>` is 13 characters into it.
    assert (p.file, p.line) == (str(tmp_path / "p.yaml"), 8)
    assert p.column == 14 + len("args.amount >")
    assert "unexpected" in p.message or "syntax" in p.message.lower()


def test_cel_error_inside_a_block_scalar(tmp_path: Path) -> None:
    (p,) = problems(tmp_path, """
        rules:
          - name: r
            when: |
              args.amount > 3 &&
                args.recipient in )
            action: deny
    """)
    assert p.line == 10
    assert p.column == 7 + len("    args.recipient in ")


def test_unknown_identifier_is_a_load_error(tmp_path: Path) -> None:
    (p,) = problems(tmp_path, """
        rules:
          - {name: r, when: 'argz.amount > 3', action: deny}
    """)
    assert p.line == 7
    assert "argz" in p.message


def test_unknown_variable_is_a_load_error(tmp_path: Path) -> None:
    (p,) = problems(tmp_path, """
        variables:
          - {name: amount, expression: 'double(args.amount)'}
        rules:
          - {name: r, when: 'variables.amout > 3.0', action: deny}
    """)
    assert p.line == 9
    assert "unknown variable 'amout'" in p.message


def test_variable_cannot_use_a_later_variable(tmp_path: Path) -> None:
    (p,) = problems(tmp_path, """
        variables:
          - {name: a, expression: 'variables.b + 1'}
          - {name: b, expression: '1'}
    """)
    assert p.line == 7
    assert "defined before" in p.message


def test_unknown_function_is_a_load_error(tmp_path: Path) -> None:
    (p,) = problems(tmp_path, """
        rules:
          - {name: r, when: 'args.url.getHostt() == "x"', action: deny}
    """)
    assert "getHostt" in p.message


def test_literal_non_bool_condition_is_a_load_error(tmp_path: Path) -> None:
    (p,) = problems(tmp_path, """
        rules:
          - {name: r, when: '"yes"', action: deny}
    """)
    assert "bool" in p.message


def test_every_problem_is_reported_not_just_the_first(tmp_path: Path) -> None:
    found = problems(tmp_path, """
        repairs:
          - name: fix
            set: {amount: 'args.amount +'}
        rules:
          - {name: a, when: 'nope > 1', action: deny}
          - {name: b, when: 'args.x ==', action: deny}
    """)
    assert [p.line for p in found] == [8, 10, 11]


def test_problems_across_files_and_nothing_half_loaded(tmp_path: Path) -> None:
    good = tmp_path / "a.yaml"
    good.write_text(policy("a", spec="rules:\n  - {name: r, when: 'true', action: deny}"))
    bad = tmp_path / "b.yaml"
    bad.write_text(policy("b", spec="rules:\n  - {name: r, when: 'true &&', action: deny}"))
    with pytest.raises(guardrails.PolicyError) as info:
        guardrails.load(tmp_path)
    assert [Path(p.file).name for p in info.value.errors] == ["b.yaml"]
    assert "b.yaml:7:" in str(info.value)


def test_expression_length_bound_is_configurable(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    long_expr = " || ".join(f'args.x == "{i}"' for i in range(40))
    path.write_text(policy(spec=f"rules:\n  - {{name: r, when: '{long_expr}', action: deny}}"))
    guardrails.load(path)
    with pytest.raises(guardrails.PolicyError) as info:
        guardrails.load(path, limits=guardrails.Limits(max_expression_length=100))
    assert info.value.errors[0].line == 7


def test_load_restores_the_garbage_collector_even_when_it_fails(tmp_path: Path) -> None:
    """Loading pauses the cyclic collector for speed; it must always come back on."""
    import gc

    assert gc.isenabled()
    good = tmp_path / "good.yaml"
    good.write_text(policy("a", spec="rules:\n  - {name: r, when: 'true', action: deny}"))
    guardrails.load(good)
    assert gc.isenabled()
    bad = tmp_path / "bad.yaml"
    bad.write_text(policy("b", spec="rules:\n  - {name: r, when: 'true &&', action: deny}"))
    with pytest.raises(guardrails.PolicyError):
        guardrails.load(bad)
    assert gc.isenabled()
    gc.disable()
    try:
        guardrails.load(good)
        assert not gc.isenabled()  # a caller's own choice is left as it was
    finally:
        gc.enable()


def test_a_structural_problem_in_one_file_does_not_hide_a_cel_error_in_another(
        tmp_path: Path) -> None:
    broken = tmp_path / "a.yaml"
    broken.write_text(policy(spec="""
        mode: strict
        rules:
          - {name: r, when: 'true', action: deny}
    """))
    cel = tmp_path / "b.yaml"
    cel.write_text(policy(spec="""
        rules:
          - {name: r, when: 'args.amount >> 3', action: deny}
    """, name="q"))
    with pytest.raises(guardrails.PolicyError) as info:
        guardrails.load(tmp_path)
    found = {(p.file, p.message.split(":")[0]) for p in info.value.errors}
    assert (str(broken), "spec.mode") in found
    assert any(f == str(cel) for f, _ in found), info.value.errors
    # And the other way round in one file: a broken document, a good one with bad CEL.
    both = tmp_path / "c" / "both.yaml"
    both.parent.mkdir()
    both.write_text(policy(spec="  mode: strict\n", name="x") + "---\n"
                    + policy(spec="""
        rules:
          - {name: r, when: 'args.nope(', action: deny}
    """, name="y"))
    with pytest.raises(guardrails.PolicyError) as info:
        guardrails.load(both)
    lines = sorted(p.line for p in info.value.errors)
    assert len(lines) == 2 and lines[0] < lines[1], info.value.errors
