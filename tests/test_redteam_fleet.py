"""Red team of the fleet features: bundles tampered with, bundle servers that misbehave,
sources replaced under a watch. Every attack goes through the public entry points
(``guardrails.load``, ``guardrails.watch``) against real files and real servers on
127.0.0.1 (ephemeral ports), and must end in a refusal within a bounded time."""

from __future__ import annotations

import gzip
import http.server
import io
import os
import socket
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import guardrails
from guardrails.fleet.bundle import BundleError, build, generate_key, read
from guardrails.model.errors import PolicyError
from tests.engine_support import policy

PAY = policy("pay", spec="""
    match: {tools: [send_money]}
    rules:
      - {name: cap, when: 'args.amount > CAP', action: deny}
""")


def _bundle(tmp_path: Path, cap: int, name: str = "b.tgz", sign: str | None = None) -> Path:
    d = tmp_path / f"src{cap}"
    d.mkdir(exist_ok=True)
    (d / "pay.yaml").write_text(PAY.replace("CAP", str(cap)))
    out = tmp_path / name
    build(d, out, sign=sign)
    return out


def _members(data: bytes) -> list[tuple[tarfile.TarInfo, bytes]]:
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as tar:
        return [(m, tar.extractfile(m).read()) for m in tar.getmembers()]  # type: ignore[union-attr]


def _pack(members: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            if info.isreg():
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(info)
    return gzip.compress(raw.getvalue())


def _info(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    return info


def _within(seconds: float, work: Callable[[], object]) -> BaseException | object:
    """Run ``work`` in a thread; fail the test if it has not ended after ``seconds``."""
    out: list[BaseException | object] = []

    def run() -> None:
        try:
            out.append(work())
        except BaseException as e:
            out.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds} s: not bounded in time"
    return out[0]


# --- the archive itself -----------------------------------------------------------------


def test_archive_tampering_every_way(tmp_path: Path) -> None:
    priv, pub = generate_key(tmp_path / "k")
    good = _bundle(tmp_path, 100, sign=priv).read_bytes()
    members = _members(good)
    by_name = {m.name: (m, b) for m, b in members}
    policy_member = by_name["files/pay.yaml"]
    attacks: dict[str, bytes] = {
        "symlink member": _pack([*members, (_info("files/x.yaml", tarfile.SYMTYPE,
                                                  "/etc/passwd"), b"")]),
        "hardlink member": _pack([*members, (_info("files/x.yaml", tarfile.LNKTYPE,
                                                   "files/pay.yaml"), b"")]),
        "directory member": _pack([*members, (_info("files/d", tarfile.DIRTYPE), b"")]),
        "fifo member": _pack([*members, (_info("files/f.yaml", tarfile.FIFOTYPE), b"")]),
        "absolute path": _pack([*members, (_info("/files/pay.yaml"), b"x")]),
        "dot-dot path": _pack([*members, (_info("files/../../pay.yaml"), b"x")]),
        "dot segment": _pack([*members, (_info("files/./pay.yaml"), b"x")]),
        "backslash": _pack([*members, (_info("files\\..\\pay.yaml"), b"x")]),
        "duplicate policy, second wins in a naive reader": _pack(
            [*members, (_info("files/pay.yaml"), policy_member[1].replace(b"100", b"10**9"))]),
        "duplicate manifest": _pack([*members, (_info("manifest.json"), b"{}")]),
        "look-alike name (Cyrillic a)": _pack(
            [*members, (_info("files/p\u0430y.yaml"), PAY.replace("CAP", "1").encode())]),
        "case twin": _pack([*members, (_info("files/PAY.yaml"),
                                       PAY.replace("CAP", "1").encode())]),
        "file and directory at once": _pack(
            [*members, (_info("files/pay.yaml/x.yaml"), b"x")]),
        "re-ordered members": _pack(list(reversed(members))),
        "signature stripped": _pack([(m, b) for m, b in members if m.name != "manifest.sig"]),
        "trailing bytes after the gzip stream": good + b"\x00" * 10,
        "a second gzip member appended": good + gzip.compress(b"more"),
        "truncated": good[:-9],
    }
    # A valid signature over a different manifest: the signature of a bundle with cap 5.
    other = _members(_bundle(tmp_path, 5, "other.tgz", sign=priv).read_bytes())
    other_sig = next(b for m, b in other if m.name == "manifest.sig")
    attacks["signature of another manifest"] = _pack(
        [(m, other_sig if m.name == "manifest.sig" else b) for m, b in members])
    # The other bundle's signed manifest over this bundle's files: the hashes disagree.
    other_manifest = next(b for m, b in other if m.name == "manifest.json")
    attacks["signed manifest of another bundle"] = _pack(
        [(m, other_manifest if m.name == "manifest.json" else
          (other_sig if m.name == "manifest.sig" else b)) for m, b in members])
    # One changed byte anywhere in the uncompressed archive (header or content).
    raw = bytearray(gzip.decompress(good))
    for offset in range(0, len(raw), 97):
        flipped = bytearray(raw)
        flipped[offset] ^= 0x01
        attacks[f"byte {offset} flipped"] = gzip.compress(bytes(flipped))
    bundle = tmp_path / "attack.tgz"
    for what, data in attacks.items():
        bundle.write_bytes(data)
        outcome = _within(10, lambda: guardrails.load(bundle, key=pub))
        if what == "re-ordered members":
            # Order carries no meaning: the same verified content loads.
            assert not isinstance(outcome, BaseException), outcome
            continue
        if isinstance(outcome, PolicyError):
            continue
        if isinstance(outcome, BaseException):
            raise AssertionError(f"{what}: crashed instead of refusing") from outcome
        # A flipped byte in tar padding or an unused header field changes nothing loaded:
        # what loads must then be exactly the signed content.
        assert what.startswith("byte "), f"{what}: loaded"
        assert outcome.evaluate("send_money", {"amount": 150}).effect == "deny", what  # type: ignore[attr-defined]


def test_key_confusion(tmp_path: Path) -> None:
    priv_a, pub_a = generate_key(tmp_path / "a")
    _priv_b, pub_b = generate_key(tmp_path / "b")
    signed = _bundle(tmp_path, 100, sign=priv_a)
    unsigned = _bundle(tmp_path, 100, "u.tgz")
    with pytest.raises(BundleError, match="does not verify"):
        guardrails.load(signed, key=pub_b)
    with pytest.raises(BundleError, match="not signed"):
        guardrails.load(unsigned, key=pub_a)
    # The private key given where the public one belongs is a configuration error, said
    # plainly (not a traceback from deep inside a parser).
    with pytest.raises((ValueError, PolicyError)):
        guardrails.load(signed, key=priv_a)


def test_a_deeply_nested_manifest_is_refused_not_a_crash(tmp_path: Path) -> None:
    good = _bundle(tmp_path, 100).read_bytes()
    for name, body in (("manifest.json", b"[" * 200_000 + b"]" * 200_000),
                       ("manifest.sig", b"[" * 200_000 + b"]" * 200_000)):
        members = [(m, body if m.name == name else b) for m, b in _members(good)]
        if name == "manifest.sig":
            members.append((_info("manifest.sig"), body))
        data = _pack(members)
        _priv, pub = generate_key(tmp_path / f"k{len(name)}")
        with pytest.raises(BundleError):
            read(data, key=pub if name == "manifest.sig" else None)


def test_a_gzip_bomb_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    bomb = gzip.compress(b"\x00" * (64 * 1024 * 1024), compresslevel=9)
    path = tmp_path / "bomb.tgz"
    path.write_bytes(bomb)
    with pytest.raises(BundleError, match="size bound"):
        guardrails.load(path)


# --- bundle servers that misbehave ------------------------------------------------------


class _Trickle:
    """Sends a 200 with a large Content-Length, then one byte every 50 ms, for ever
    (``headers=True``: the status line, then header bytes one at a time, never ending)."""

    def __init__(self, headers: bool = False) -> None:
        self.headers = headers
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        self.sock.settimeout(0.1)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\n")
                if self.headers:  # one header line, never ended (http.client allows 64 KB)
                    conn.sendall(b"X-Slow: ")
                    while not self.stop.is_set():
                        conn.sendall(b"a")
                        time.sleep(0.05)
                conn.sendall(b"Content-Length: 30000000\r\nETag: \"x\"\r\n\r\n")
                while not self.stop.is_set():
                    conn.sendall(b"\x1f")
                    time.sleep(0.05)
            except OSError:
                pass

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


@pytest.fixture
def trickle() -> Iterator[_Trickle]:
    server = _Trickle()
    try:
        yield server
    finally:
        server.close()


def test_a_server_that_never_ends_its_headers_is_bounded_in_time() -> None:
    server = _Trickle(headers=True)
    try:
        url = f"http://127.0.0.1:{server.port}/bundle"
        outcome = _within(8, lambda: guardrails.load(url, timeout=1.0))
        assert isinstance(outcome, Exception) and not isinstance(outcome, AssertionError)
    finally:
        server.close()


def test_a_server_that_never_finishes_is_bounded_in_time(tmp_path: Path,
                                                         trickle: _Trickle) -> None:
    url = f"http://127.0.0.1:{trickle.port}/bundle"
    outcome = _within(8, lambda: guardrails.load(url, timeout=1.0))
    assert isinstance(outcome, Exception) and not isinstance(outcome, AssertionError)
    assert "time" in str(outcome).lower() or "timed out" in str(outcome).lower(), outcome


def test_a_watch_of_a_trickling_server_stays_responsive(tmp_path: Path,
                                                        trickle: _Trickle) -> None:
    good = _bundle(tmp_path, 100).read_bytes()

    class Once(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(good)))
            self.send_header("ETag", '"1"')
            self.end_headers()
            self.wfile.write(good)

        def log_message(self, *args: object) -> None:
            pass

    first = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Once)
    threading.Thread(target=first.serve_forever, daemon=True).start()
    try:
        source = guardrails.watch(f"http://127.0.0.1:{first.server_address[1]}/b",
                                  interval=3600, timeout=1.0)
    finally:
        first.shutdown()
        first.server_close()
    with source:
        # The server now misbehaves: point the fetcher at the trickling one.
        source._fetcher.name = f"http://127.0.0.1:{trickle.port}/bundle"  # type: ignore[attr-defined]
        outcome = _within(8, source.refresh)
        assert outcome is False
        assert not source.status.ok and source.current.revision == source.status.revision


class _Redirect(http.server.BaseHTTPRequestHandler):
    target = ""

    def do_GET(self) -> None:
        self.send_response(302)
        self.send_header("Location", self.target)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("where", ["other-origin", "file", "ftp"])
def test_redirects_off_the_bundle_origin_are_refused(tmp_path: Path, where: str) -> None:
    evil = _bundle(tmp_path, 10**9, "evil.tgz")
    evil_bytes = evil.read_bytes()

    class Evil(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(evil_bytes)))
            self.end_headers()
            self.wfile.write(evil_bytes)

        def log_message(self, *args: object) -> None:
            pass

    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Evil)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    target = {"other-origin": f"http://127.0.0.1:{other.server_address[1]}/evil",
              "file": f"file://{evil}", "ftp": "ftp://127.0.0.1:1/evil"}[where]
    handler = type("H", (_Redirect,), {"target": target})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        outcome = _within(8, lambda: guardrails.load(
            f"http://127.0.0.1:{server.server_address[1]}/bundle", timeout=1.0))
        assert isinstance(outcome, Exception) and not isinstance(outcome, AssertionError), (
            f"followed a redirect to {target}")
        assert "redirect" in str(outcome).lower(), outcome
    finally:
        for s in (server, other):
            s.shutdown()
            s.server_close()


# --- a watched bundle file replaced under the watch -------------------------------------


@pytest.mark.parametrize("replacement", ["fifo", "dev-zero", "directory", "half-written"])
def test_a_watched_bundle_replaced_by_a_bad_file(tmp_path: Path, replacement: str) -> None:
    path = _bundle(tmp_path, 100)
    with guardrails.watch(path, interval=3600) as source:
        revision = source.current.revision
        os.unlink(path)
        if replacement == "fifo":
            os.mkfifo(path)
        elif replacement == "dev-zero":
            os.symlink("/dev/zero", path)
        elif replacement == "directory":
            os.mkdir(path)
        else:
            path.write_bytes(_bundle(tmp_path, 5, "new.tgz").read_bytes()[:200])
        outcome = _within(8, source.refresh)
        assert outcome is False
        assert source.current.revision == revision
        assert not source.status.ok and source.status.error
        assert source.current.evaluate("send_money", {"amount": 150}).effect == "deny"


def test_a_watched_directory_with_a_fifo_or_dev_zero(tmp_path: Path) -> None:
    d = tmp_path / "p"
    d.mkdir()
    (d / "pay.yaml").write_text(PAY.replace("CAP", "100"))
    with guardrails.watch(d, interval=3600) as source:
        revision = source.current.revision
        os.mkfifo(d / "fifo.yaml")
        os.symlink("/dev/zero", d / "zero.yaml")
        outcome = _within(8, source.refresh)
        assert outcome is False and source.current.revision == revision
        assert "fifo.yaml" in (source.status.error or "")
