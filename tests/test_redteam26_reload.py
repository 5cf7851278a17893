"""Red team 26, promise 7: policies are all or nothing, attacked through real files.

A policy file is rewritten in place (``open(..., "w")`` truncates it, then writes), a
directory is read file by file, a poll can land at any moment of a write: the set in use
must never be replaced by one missing a policy, or with a policy cut short.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import guardrails
from guardrails.model import loader
from tests.engine_support import policy

GUARD = policy("guard", spec="""
    match: {tools: [send]}
    rules:
      - {name: negative, when: 'args.x < 0', action: deny, message: negative}
      - {name: zero, when: 'args.x == 0', action: deny, message: zero}
""")
HALF = GUARD[:GUARD.index("- {name: zero")]
"""The guard policy's first half: valid YAML, one rule fewer."""
OTHER = policy("other", spec="""
    match: {tools: [send]}
    rules:
      - {name: big, when: 'args.x > 100', action: deny, message: big}
""")


def _bump(path: Path, by_ms: int = 1) -> None:
    """Make a rewrite visible to the stat check even within one mtime tick."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + by_ms * 1_000_000))


def _setup(tmp_path: Path) -> Path:
    d = tmp_path / "policies"
    d.mkdir()
    (d / "guard.yaml").write_text(GUARD)
    (d / "other.yaml").write_text(OTHER)
    return d


def _complete(policies: guardrails.PolicySet) -> bool:
    return (policies.evaluate("send", {"x": -5}).effect == "deny"
            and policies.evaluate("send", {"x": 0}).effect == "deny"
            and policies.evaluate("send", {"x": 500}).effect == "deny")


# -- an emptied file: the moment between the truncation and the write ------------------


def test_a_truncated_file_never_replaces_the_set_in_use(tmp_path: Path) -> None:
    d = _setup(tmp_path)
    with guardrails.watch(d, interval=3600) as source:
        first = source.current
        assert _complete(first)
        (d / "guard.yaml").write_text("")  # the writer truncated; its write is still coming
        _bump(d / "guard.yaml")
        assert source.refresh() is False
        assert source.current is first and not source.status.ok
        assert "guard.yaml" in (source.status.error or "")
        assert "now holds no YAML document" in (source.status.error or "")
        (d / "guard.yaml").write_text("# a comment the writer put first\n")
        _bump(d / "guard.yaml", 2)
        assert source.refresh() is False and source.current is first
        (d / "guard.yaml").write_text(GUARD.replace("message: zero", "message: nought"))
        _bump(d / "guard.yaml", 3)
        assert source.refresh() is True and _complete(source.current)
        (d / "guard.yaml").unlink()  # removing a file's policies is deleting it
        assert source.refresh() is True
        assert source.current.evaluate("send", {"x": 0}).effect == "allow"


# -- a file written while it is read ----------------------------------------------------


def test_a_file_rewritten_during_the_read_is_not_swapped_in(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real writer races the poll: right after the loader read the file, the file is
    rewritten (the read saw its first half). The half must not become the set in use;
    the next poll loads the whole file."""
    d = _setup(tmp_path)
    half = HALF
    assert guardrails.load([_write(tmp_path / "half.yaml", half)]).evaluate(
        "send", {"x": 0}).effect == "allow"
    real_read = loader.read_regular_file
    raced: list[str] = []

    def read_then_finish_write(name: str, limit: int) -> bytes:
        data = real_read(name, limit)
        if name.endswith("guard.yaml") and not raced:
            raced.append(name)
            Path(name).write_text(GUARD)  # the writer's second half lands after the read
            _bump(Path(name), 3)
        return data

    with guardrails.watch(d, interval=3600) as source:
        first = source.current
        (d / "guard.yaml").write_text(half)
        _bump(d / "guard.yaml", 2)
        monkeypatch.setattr(loader, "read_regular_file", read_then_finish_write)
        swapped = source.refresh()
        assert raced
        assert source.current is first or _complete(source.current), "a half file loaded"
        assert swapped is False
        monkeypatch.setattr(loader, "read_regular_file", real_read)
        source.refresh()
        assert _complete(source.current)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_the_background_poll_waits_for_a_file_to_settle(tmp_path: Path) -> None:
    """The poll lands between two writes of one file (a copy in progress, an editor
    writing in chunks): what it saw is a prefix that parses. The background thread loads a
    change only once a later poll sees it unchanged, so the prefix never decides a call."""
    d = _setup(tmp_path)
    half = HALF
    with guardrails.watch(d, interval=0.5) as source:
        first = source.current
        seen_before = source.status.checked_at
        (d / "guard.yaml").write_text(half)
        _bump(d / "guard.yaml", 2)
        _wait(lambda: source.status.checked_at != seen_before)
        # One poll saw the half file: it is not loaded yet.
        assert source.current is first
        (d / "guard.yaml").write_text(GUARD.replace("message: zero", "message: nought"))
        _bump(d / "guard.yaml", 4)
        _wait(lambda: source.current is not first)
        assert _complete(source.current)
        assert source.current.evaluate("send", {"x": 0}).rules[0].message == "nought"


def _wait(condition: Any, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_refresh_loads_at_once(tmp_path: Path) -> None:
    # The host that calls refresh() knows its write is done: no waiting for a second poll.
    d = _setup(tmp_path)
    with guardrails.watch(d, interval=3600) as source:
        (d / "other.yaml").write_text(OTHER.replace("> 100", "> 50"))
        _bump(d / "other.yaml")
        assert source.refresh() is True
        assert source.current.evaluate("send", {"x": 60}).effect == "deny"


# -- attacks that did not get through (kept as passing tests) ---------------------------


def test_a_file_deleted_between_the_listing_and_the_read_is_a_problem(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = _setup(tmp_path)
    real_files = loader.document_files

    def list_then_delete(paths: Any, problems: list[Any]) -> list[str]:
        names = real_files(paths, problems)
        (d / "guard.yaml").unlink()
        return names

    monkeypatch.setattr(loader, "document_files", list_then_delete)
    with pytest.raises(guardrails.PolicyError, match=r"guard\.yaml.*cannot read"):
        guardrails.load(d)


def test_two_files_defining_one_name_never_load(tmp_path: Path) -> None:
    d = _setup(tmp_path)
    with guardrails.watch(d, interval=3600) as source:
        first = source.current
        (d / "copy.yaml").write_text(OTHER.replace("> 100", "> 1000"))
        assert source.refresh() is False and source.current is first
        assert "copy.yaml" in (source.status.error or "")


def test_a_symlink_swapped_to_a_broken_target_keeps_the_set(tmp_path: Path) -> None:
    """Kubernetes publishes a ConfigMap by swapping a ``..data`` symlink: files are links
    into it. A swap to a directory whose copy is broken keeps the set in use; a swap to a
    good one loads it, and the link's target directory is not read twice."""
    mount = tmp_path / "mount"
    mount.mkdir()
    for name, text in (("v1", GUARD), ("v2", GUARD.replace("'args.x < 0'", "'args.x <")),
                       ("v3", GUARD.replace("message: zero", "message: nought"))):
        (mount / f"..{name}").mkdir()
        (mount / f"..{name}" / "guard.yaml").write_text(text)
        (mount / f"..{name}" / "other.yaml").write_text(OTHER)
    (mount / "..data").symlink_to("..v1")
    for f in ("guard.yaml", "other.yaml"):
        (mount / f).symlink_to(f"..data/{f}")
    with guardrails.watch([mount / "guard.yaml", mount / "other.yaml"],
                          interval=3600) as source:
        first = source.current
        for target, swapped in (("..v2", False), ("..v3", True)):
            (mount / "..tmp").symlink_to(target)
            os.replace(mount / "..tmp", mount / "..data")  # the atomic swap
            assert source.refresh() is swapped
        assert source.current is not first and _complete(source.current)
        assert source.current.evaluate("send", {"x": 0}).rules[0].message == "nought"


def test_a_reload_racing_decisions_never_mixes_two_sets(tmp_path: Path) -> None:
    """Decisions in one thread while another rewrites both files (each complete, via
    rename) and polls: every decision's rules agree on one version."""
    d = tmp_path / "policies"
    d.mkdir()

    def publish(version: int) -> None:
        for name, text in (("guard.yaml", GUARD), ("other.yaml", OTHER)):
            tmp = d / f".{name}.tmp"
            tmp.write_text(text.replace("message: big", f"message: big-v{version}")
                           .replace("message: negative", f"message: negative-v{version}"))
            os.replace(tmp, d / name)

    publish(0)
    stop = threading.Event()
    with guardrails.watch(d, interval=3600) as source:
        def writer() -> None:
            v = 1
            while not stop.is_set():
                publish(v)
                source.refresh()
                v += 1

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            mixed = []
            for _ in range(300):
                current = source.current
                msgs = {r.message for r in current.evaluate("send", {"x": -500}).rules}
                msgs |= {r.message for r in current.evaluate("send", {"x": 500}).rules}
                versions = {m.rsplit("-", 1)[-1] for m in msgs if m}
                if len(versions) > 1:
                    mixed.append(msgs)
        finally:
            stop.set()
            thread.join()
    # Files are replaced one by one: a set read between the two renames holds both
    # versions (the documented limit of a directory); what must hold is that it is whole.
    assert all(len(m) == 2 for m in mixed)
