"""Bundles: build, sign, verify, load from a file and from a real HTTP server; tampering."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path

import pytest

import guardrails
from guardrails.cli import main
from guardrails.fleet.bundle import BundleError, build, generate_key, load_bundle, read
from tests.engine_support import policy
from tests.fleet_support import BundleServer, bundle_server

__all__ = ["bundle_server"]

PAY = policy("pay", spec="""
    match: {tools: [send_money]}
    paramsFile: pay.params.yaml
    rules:
      - {name: cap, when: 'args.amount > params.cap', action: deny}
""")


def _dir(tmp_path: Path, cap: int = 100) -> Path:
    d = tmp_path / "policies"
    (d / "sub").mkdir(parents=True, exist_ok=True)
    (d / "sub" / "pay.yaml").write_text(PAY)
    (d / "sub" / "pay.params.yaml").write_text(f"cap: {cap}\n")
    return d


@pytest.fixture
def keys(tmp_path: Path) -> tuple[str, str]:
    return generate_key(tmp_path / "signing.key")


def test_bundle_round_trip_same_revision_as_the_directory(tmp_path: Path,
                                                          keys: tuple[str, str]) -> None:
    d = _dir(tmp_path)
    out = tmp_path / "b.tar.gz"
    manifest = build(d, out, sign=keys[0])
    direct = guardrails.load(d)
    assert manifest.revision == direct.revision
    assert set(manifest.files) == {"sub/pay.yaml", "sub/pay.params.yaml"}
    for loaded in (guardrails.load(out), guardrails.load(out, key=keys[1])):
        assert loaded.revision == direct.revision
        assert loaded.evaluate("send_money", {"amount": 500}).effect == "deny"
    assert read(out.read_bytes(), key=keys[1]).manifest.signed_by == manifest.signed_by
    # Deterministic: the same files built at the same time give the same bytes (Ed25519
    # signatures are deterministic too).
    import datetime
    when = datetime.datetime(2026, 5, 1, tzinfo=datetime.UTC)
    build(d, tmp_path / "a.tgz", sign=keys[0], now=when)
    build(d, tmp_path / "b.tgz", sign=keys[0], now=when)
    assert (tmp_path / "a.tgz").read_bytes() == (tmp_path / "b.tgz").read_bytes()


def _members(data: bytes) -> list[tuple[tarfile.TarInfo, bytes]]:
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as tar:
        return [(m, tar.extractfile(m).read()) for m in tar.getmembers()]  # type: ignore[union-attr]


def _pack(members: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for info, data in members:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue())


def _tampered(data: bytes, name: str, change: bytes) -> bytes:
    return _pack([(m, (body.replace(b"cap: 100", change) if m.name == name else body))
                  for m, body in _members(data)])


def test_tampering_is_rejected(tmp_path: Path, keys: tuple[str, str]) -> None:
    out = tmp_path / "b.tar.gz"
    build(_dir(tmp_path), out, sign=keys[0])
    good = out.read_bytes()
    _, other_public = generate_key(tmp_path / "other.key")

    # A changed byte in a file: its hash no longer matches (with or without a key).
    changed = _tampered(good, "files/sub/pay.params.yaml", b"cap: 900")
    for key in (None, keys[1]):
        with pytest.raises(BundleError, match=r"hash mismatch for sub/pay\.params\.yaml"):
            load_bundle(changed, key=key)
    # A changed byte anywhere in the archive itself.
    for i in (10, len(good) // 2, len(good) - 5):
        flipped = bytearray(good)
        flipped[i] ^= 0x01
        with pytest.raises(BundleError):
            load_bundle(bytes(flipped), key=keys[1])
    # The manifest rewritten to match the changed file: the signature breaks.
    members = _members(changed)
    import hashlib
    manifest = json.loads(next(b for m, b in members if m.name == "manifest.json"))
    body = next(b for m, b in members if m.name == "files/sub/pay.params.yaml")
    manifest["files"]["sub/pay.params.yaml"]["sha256"] = hashlib.sha256(body).hexdigest()
    rewritten = _pack([(m, json.dumps(manifest).encode() if m.name == "manifest.json" else b)
                       for m, b in members])
    with pytest.raises(BundleError, match="signature does not verify"):
        load_bundle(rewritten, key=keys[1])
    # ...and without the signature: refused when a key is configured.
    unsigned = _pack([(m, b) for m, b in _members(rewritten) if m.name != "manifest.sig"])
    with pytest.raises(BundleError, match="not signed"):
        load_bundle(unsigned, key=keys[1])
    # The wrong key.
    with pytest.raises(BundleError, match="signature does not verify"):
        load_bundle(good, key=other_public)
    # An extra file smuggled in, or one removed.
    extra = tarfile.TarInfo("files/sub/evil.yaml")
    with pytest.raises(BundleError, match="files differ from the manifest"):
        load_bundle(_pack([*_members(good), (extra, PAY.replace("pay", "evil").encode())]),
                    key=keys[1])
    # Unsafe members: traversal, links.
    for bad in ("files/../../etc/x", "/abs", "files/./x"):
        with pytest.raises(BundleError, match="unsafe member name"):
            load_bundle(_pack([*_members(good), (tarfile.TarInfo(bad), b"x")]))
    link = tarfile.TarInfo("files/link")
    link.type = tarfile.SYMTYPE
    link.linkname = "/etc/passwd"
    with pytest.raises(BundleError, match="not a regular file"):
        load_bundle(_pack([*_members(good), (link, b"")]))
    # Not a bundle at all, and a decompression bomb.
    with pytest.raises(BundleError):
        load_bundle(b"\x1f\x8b not gzip")
    with pytest.raises(BundleError):
        load_bundle(gzip.compress(b"\0" * (40 * 1024 * 1024)))
    assert load_bundle(good, key=keys[1]).evaluate("send_money", {"amount": 500}).effect == "deny"


def test_a_broken_policy_never_becomes_a_bundle(tmp_path: Path) -> None:
    d = _dir(tmp_path)
    (d / "sub" / "pay.yaml").write_text(PAY.replace("args.amount >", "args.amount >>"))
    with pytest.raises(guardrails.PolicyError) as e:
        build(d, tmp_path / "b.tar.gz")
    assert e.value.errors[0].file.endswith("pay.yaml") and e.value.errors[0].line > 0
    assert not (tmp_path / "b.tar.gz").exists()


def test_key_for_a_plain_directory_is_an_error(tmp_path: Path, keys: tuple[str, str]) -> None:
    with pytest.raises(guardrails.PolicyError, match="only bundles are signed"):
        guardrails.load(_dir(tmp_path), key=keys[1])


@pytest.mark.parametrize("argv, line", [
    (["bundle", "build", "{tmp}/nope", "-o", "{tmp}/b.tgz"],
     "guardrails bundle build: error: not a directory: {tmp}/nope"),
    (["bundle", "verify", "{tmp}/b.tgz", "--key", "{tmp}/missing.pub"],
     "guardrails bundle verify: error: no such key file: {tmp}/missing.pub"),
    (["eval", "{tmp}/nope", "--tool", "x"], "guardrails eval: error: "),
])
def test_cli_bad_usage_is_one_line_naming_the_command(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], line: str) -> None:
    """bundle's bad usage goes through the one UsageError of every command, its action
    named in the line."""
    assert main([a.format(tmp=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(line.format(tmp=tmp_path)) and err.count("\n") == 1, err


def test_cli_build_verify_keygen(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _dir(tmp_path)
    key = tmp_path / "k"
    assert main(["bundle", "keygen", str(key)]) == 0
    assert (key.stat().st_mode & 0o777) == 0o600
    assert main(["bundle", "keygen", str(key)]) == 2  # never overwrites a key
    out = tmp_path / "b.tar.gz"
    assert main(["bundle", "build", str(d), "-o", str(out), "--sign", str(key)]) == 0
    capsys.readouterr()
    assert main(["bundle", "verify", str(out), "--key", f"{key}.pub"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["revision"] == guardrails.load(d).revision and shown["signed_by"]
    generate_key(tmp_path / "other")
    assert main(["bundle", "verify", str(out), "--key", str(tmp_path / "other.pub")]) == 1
    assert "signature does not verify" in capsys.readouterr().out
    assert main(["bundle", "verify", str(out), "--key", str(tmp_path / "missing.pub")]) == 2
    unsigned = tmp_path / "u.tar.gz"
    assert main(["bundle", "build", str(d), "-o", str(unsigned)]) == 0
    assert main(["bundle", "verify", str(unsigned), "--key", f"{key}.pub"]) == 1
    assert main(["bundle", "verify", str(unsigned)]) == 0
    capsys.readouterr()
    # A bundle is a policy location for the other commands too.
    assert main(["eval", str(out), "--tool", "send_money", "--args", '{"amount": 500}']) == 0
    assert '"effect": "deny"' in capsys.readouterr().out


def test_load_from_url_with_key(tmp_path: Path, keys: tuple[str, str],
                                bundle_server: BundleServer) -> None:
    out = tmp_path / "b.tar.gz"
    build(_dir(tmp_path), out, sign=keys[0])
    bundle_server.publish(out.read_bytes())
    loaded = guardrails.load(bundle_server.url, key=keys[1])
    assert loaded.evaluate("send_money", {"amount": 500}).effect == "deny"
    bundle_server.publish(_tampered(out.read_bytes(), "files/sub/pay.params.yaml", b"cap: 9"))
    with pytest.raises(BundleError):
        guardrails.load(bundle_server.url, key=keys[1])


def test_a_bundle_reading_files_outside_itself_is_refused(tmp_path: Path) -> None:
    """Hand-made (never signed by build): a paramsFile pointing out of the bundle."""
    outside = tmp_path / "host-secrets.yaml"
    outside.write_text("cap: 1\n")
    doc = PAY.replace("paramsFile: pay.params.yaml", f"paramsFile: {outside}")
    import hashlib
    files = {"pay.yaml": doc.encode()}
    manifest = {"format": "guardrails-bundle/1", "revision": "x", "built": "now",
                "files": {k: {"sha256": hashlib.sha256(v).hexdigest(), "size": len(v)}
                          for k, v in files.items()}}
    members = [(tarfile.TarInfo("manifest.json"), json.dumps(manifest).encode())]
    members += [(tarfile.TarInfo(f"files/{k}"), v) for k, v in files.items()]
    with pytest.raises(BundleError, match="outside the bundle"):
        load_bundle(_pack(members))
    with pytest.raises(BundleError, match="unsafe member name"):
        load_bundle(_pack([*members, (tarfile.TarInfo("files/a\nb"), b"x")]))
    with pytest.raises(BundleError):  # tar cuts the name at NUL: an unlisted file
        load_bundle(_pack([*members, (tarfile.TarInfo("files/a\x00b"), b"x")]))
    clash = [*members, (tarfile.TarInfo("files/pay.yaml/x"), b"x")]
    manifest["files"]["pay.yaml/x"] = {"sha256": hashlib.sha256(b"x").hexdigest(), "size": 1}
    clash[0] = (tarfile.TarInfo("manifest.json"), json.dumps(manifest).encode())
    with pytest.raises(BundleError, match="cannot unpack"):
        load_bundle(_pack(clash))
