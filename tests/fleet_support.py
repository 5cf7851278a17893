"""Real servers for the fleet tests: a redis-server and an HTTP bundle server on 127.0.0.1,
each on an ephemeral port, started by the tests and stopped afterwards."""

from __future__ import annotations

import contextlib
import http.server
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import guardrails


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class RedisServer:
    port: int
    process: subprocess.Popen[bytes]
    directory: str

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_redis() -> RedisServer:
    """A redis-server of our own: no persistence, ephemeral port (retried if taken)."""
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.fail("redis-server is not installed: run `make test` (it installs it)")
    directory = tempfile.mkdtemp(prefix="guardrails-redis-")
    for _ in range(5):
        port = _free_port()
        process = subprocess.Popen(
            [exe, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly",
             "no", "--dir", directory, "--protected-mode", "yes"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and process.poll() is None:
            with contextlib.suppress(OSError), socket.create_connection(
                    ("127.0.0.1", port), timeout=0.2) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return RedisServer(port, process, directory)
            time.sleep(0.02)
        process.kill()
        process.wait()
    pytest.fail("could not start redis-server")


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = start_redis()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.directory, ignore_errors=True)


@dataclass
class BundleServer:
    """Serves one file at /bundle with an ETag; counts requests and 304s."""

    directory: str
    port: int = 0
    requests: int = 0
    not_modified: int = 0
    down: bool = False
    headers_seen: list[dict[str, str]] = field(default_factory=list)
    _server: http.server.ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/bundle"

    def publish(self, data: bytes) -> None:
        tmp = os.path.join(self.directory, "bundle.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(self.directory, "bundle"))

    def start(self) -> None:
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.requests += 1
                owner.headers_seen.append(dict(self.headers))
                if owner.down:
                    self.send_error(503)
                    return
                try:
                    with open(os.path.join(owner.directory, "bundle"), "rb") as f:
                        data = f.read()
                except OSError:
                    self.send_error(404)
                    return
                import hashlib
                etag = '"' + hashlib.sha256(data).hexdigest()[:16] + '"'
                if self.headers.get("If-None-Match") == etag:
                    owner.not_modified += 1
                    self.send_response(304)
                    self.send_header("ETag", etag)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("ETag", etag)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


@pytest.fixture
def bundle_server(tmp_path: object) -> Iterator[BundleServer]:
    server = BundleServer(tempfile.mkdtemp(prefix="guardrails-bundles-"))
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.directory, ignore_errors=True)


APPROVAL_KEY = b"replicas-share-this-secret"
"""The HMAC key the replicas of the approval tests share."""

APPROVAL_POLICY = """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: approvals}
spec:
  match: {tools: [send_money]}
  rules:
    - {name: big, when: 'args.amount > 1000', action: require_approval, message: big payment}
"""


@pytest.fixture(name="policies")
def approval_policies(tmp_path: Path) -> guardrails.PolicySet:
    """APPROVAL_POLICY, loaded from a file: payments over 1,000 need approval."""
    (tmp_path / "p.yaml").write_text(APPROVAL_POLICY)
    return guardrails.load(tmp_path / "p.yaml")
