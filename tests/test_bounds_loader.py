"""The loader never reads what it should not: FIFOs, devices, sockets, huge files.

Each is refused with a problem naming the file, before anything is read from it: a FIFO
would hang the load (no writer ever comes) and ``/dev/zero`` would exhaust memory. These
tests would hang or run out of memory without the check, so each runs in a thread with a
deadline of its own (a hang fails the test instead of the whole suite).
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

import guardrails
from guardrails.model import PolicyError, Problem, load_documents
from guardrails.model import loader as loader_module

POLICY = ("apiVersion: guardrails/v1\nkind: ToolPolicy\nmetadata:\n  name: p\nspec:\n"
          "  match: {tools: ['t']}\n  rules:\n    - {name: r, when: 'true', action: deny}\n")


def _within(seconds: float, fn: Callable[[], object]) -> object:
    """``fn()``, or a failure if it has not returned in ``seconds`` (it would hang)."""
    out: list[object] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as e:  # handed back to the test
            errors.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "the load hung"
    if errors:
        raise errors[0]
    return out[0]


def _problems(path: Path | str) -> list[Problem]:
    def load() -> object:
        with pytest.raises(PolicyError) as exc:
            load_documents(str(path))
        return exc.value.errors

    found = _within(20, load)
    assert isinstance(found, list)
    return found


def _setup(tmp_path: Path) -> Path:
    (tmp_path / "good.yaml").write_text(POLICY, encoding="utf-8")
    return tmp_path


def test_a_fifo_in_a_policy_directory_is_refused_without_hanging(tmp_path: Path) -> None:
    _setup(tmp_path)
    os.mkfifo(tmp_path / "pipe.yaml")
    (problem,) = _problems(tmp_path)
    assert problem.file.endswith("pipe.yaml")
    assert "not a regular file (a FIFO)" in problem.message


def test_a_fifo_named_directly_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.yaml")
    (problem,) = _problems(tmp_path / "pipe.yaml")
    assert "a FIFO" in problem.message


def test_a_symlink_to_dev_zero_is_refused_without_reading(tmp_path: Path) -> None:
    _setup(tmp_path)
    os.symlink("/dev/zero", tmp_path / "zero.yaml")
    (problem,) = _problems(tmp_path)
    assert problem.file.endswith("zero.yaml") and "a device" in problem.message


def test_a_symlink_to_a_fifo_is_refused(tmp_path: Path) -> None:
    _setup(tmp_path)
    os.mkfifo(tmp_path / "pipe")
    os.symlink(tmp_path / "pipe", tmp_path / "link.yml")
    (problem,) = _problems(tmp_path)
    assert problem.file.endswith("link.yml") and "a FIFO" in problem.message


def test_a_socket_is_refused(tmp_path: Path) -> None:
    _setup(tmp_path)
    path = tmp_path / "s.yaml"
    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.bind(str(path))
        except OSError:  # path too long for a UNIX socket on this machine
            pytest.skip("cannot bind a UNIX socket here")
        (problem,) = _problems(tmp_path)
    assert problem.file.endswith("s.yaml") and "a socket" in problem.message


def test_a_params_file_that_is_a_fifo_or_device_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "params.yaml")
    os.symlink("/dev/zero", tmp_path / "zero.json")
    for params in ("params.yaml", "zero.json"):
        text = POLICY.replace("spec:\n", f"spec:\n  paramsFile: {params}\n")
        (tmp_path / "p.yaml").write_text(text, encoding="utf-8")
        found = _problems(tmp_path / "p.yaml")
        assert any(params in p.file and "not a regular file" in p.message for p in found), found


def test_a_file_over_the_size_bound_is_refused_and_a_good_set_stays(tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    good = guardrails.load(str(_setup(tmp_path)))
    monkeypatch.setattr(loader_module, "MAX_FILE_BYTES", 1000)
    (tmp_path / "big.yaml").write_text(POLICY + "#" * 2000 + "\n", encoding="utf-8")
    (problem,) = _problems(tmp_path)
    assert problem.file.endswith("big.yaml") and "over the 1000-byte bound" in problem.message
    # the set loaded before is untouched and still decides
    assert good.evaluate("t").effect == "deny"


def test_a_dangling_symlink_is_a_clear_problem(tmp_path: Path) -> None:
    _setup(tmp_path)
    os.symlink(tmp_path / "missing", tmp_path / "gone.yaml")
    (problem,) = _problems(tmp_path)
    assert problem.file.endswith("gone.yaml") and "cannot read file" in problem.message


def test_a_symlink_to_a_regular_file_still_loads(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "p.txt").write_text(POLICY, encoding="utf-8")
    d = tmp_path / "d"
    d.mkdir()
    os.symlink(real / "p.txt", d / "p.yaml")
    assert [p.name for p in load_documents(str(d)).policies] == ["p"]


def test_a_tools_file_that_is_a_fifo_is_refused_by_the_cli(tmp_path: Path) -> None:
    import subprocess
    import sys

    os.mkfifo(tmp_path / "tools.json")
    _setup(tmp_path)
    script = Path(sys.executable).parent / "guardrails"
    proc = subprocess.run([str(script), "check", str(tmp_path / "good.yaml"), "--tools",
                           str(tmp_path / "tools.json")], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2, proc
    assert "tools.json" in proc.stderr and "a FIFO" in proc.stderr
