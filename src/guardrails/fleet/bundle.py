"""Policy bundles: one content-hashed, optionally Ed25519-signed archive per policy revision.

A bundle is a gzip'd tar holding ``manifest.json`` (format, revision, build time, and the
SHA-256 and size of every file), ``manifest.sig`` when signed, and the policy files under
``files/``. The signature covers the manifest's exact bytes, and the manifest covers every
file by hash, so one signature check covers all content. Reading a bundle checks all of
it before anything is loaded: safe member names and types only, sizes within bounds, the
files exactly those the manifest lists, every hash, and the signature whenever a key is
given (a bundle without one is then refused). A bundle that fails any check is never loaded.

``build`` loads the directory first: a bundle of policies that do not load is never made.
"""

from __future__ import annotations

import base64
import datetime
import gzip
import hashlib
import io
import json
import os
import posixpath
import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from guardrails.engine.compile import Backend, compile_documents
from guardrails.engine.policyset import PolicySet
from guardrails.expr.limits import DEFAULT_LIMITS, Limits
from guardrails.model import load_documents
from guardrails.model.errors import PolicyError, Problem

__all__ = [
    "FORMAT",
    "BundleError",
    "Manifest",
    "build",
    "generate_key",
    "is_bundle",
    "load_bundle",
    "load_verified",
    "read",
]

FORMAT = "guardrails-bundle/1"
MANIFEST = "manifest.json"
SIGNATURE = "manifest.sig"
FILES = "files/"
MAX_BUNDLE_BYTES = 32 * 1024 * 1024
"""Bound on a bundle as fetched and on its content unpacked (a gzip bomb stops here)."""
MAX_FILES = 10_000


class BundleError(PolicyError):
    """A bundle was refused (bad archive, hash, signature, or missing signature)."""

    def __init__(self, origin: str, reason: str) -> None:
        self.origin = origin
        self.reason = reason
        super().__init__([Problem(origin, 0, 0, f"bundle rejected: {reason}")])


@dataclass(frozen=True)
class Manifest:
    revision: str
    built: str
    files: Mapping[str, str]
    """Path inside the bundle to SHA-256 hex of its content."""
    signed_by: str | None
    """Key id (first 16 hex of the public key's SHA-256) when the signature was checked."""


def is_bundle(path: str | os.PathLike[str]) -> bool:
    """A regular file starting with the gzip magic (a policy file is YAML text)."""
    name = os.fspath(path)
    if not os.path.isfile(name):
        return False
    with open(name, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


# --- keys ------------------------------------------------------------------------------


def _require_cryptography() -> None:
    """Signing and verifying need the ``cryptography`` package: say so plainly."""
    try:
        import cryptography  # noqa: F401
    except ImportError:  # pragma: no cover - an install problem
        raise ImportError("signed bundles need the cryptography package: pip install "
                          "'cel-guardrails[fleet]'") from None


def generate_key(private_path: str | os.PathLike[str]) -> tuple[str, str]:
    """Write a new Ed25519 key pair: ``PATH`` (private, PEM, mode 0600) and ``PATH.pub``."""
    _require_cryptography()
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    name = os.fspath(private_path)
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(private)
    with open(name + ".pub", "wb") as f:
        f.write(public)
    return name, name + ".pub"


def _private_key(key: str | os.PathLike[str] | bytes) -> Any:
    _require_cryptography()
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    data = key if isinstance(key, bytes) else _read(key)
    loaded = serialization.load_pem_private_key(data, password=None)
    if not isinstance(loaded, Ed25519PrivateKey):
        raise ValueError("the signing key is not an Ed25519 private key")
    return loaded


def _public_key(key: str | os.PathLike[str] | bytes) -> Any:
    _require_cryptography()
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    data = key if isinstance(key, bytes) else _read(key)
    loaded = serialization.load_pem_public_key(data)
    if not isinstance(loaded, Ed25519PublicKey):
        raise ValueError("the verification key is not an Ed25519 public key")
    return loaded


def _key_id(public: Any) -> str:
    from cryptography.hazmat.primitives import serialization

    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def _read(path: str | os.PathLike[str]) -> bytes:
    with open(path, "rb") as f:
        return f.read()


# --- build -----------------------------------------------------------------------------


def build(directory: str | os.PathLike[str], output: str | os.PathLike[str], *,
          sign: str | os.PathLike[str] | bytes | None = None,
          now: datetime.datetime | None = None) -> Manifest:
    """Load ``directory`` (raising ``PolicyError`` if it does not load) and write its files
    as a bundle to ``output`` (atomically: a reader never sees half a bundle)."""
    root = os.path.abspath(os.fspath(directory))
    documents = load_documents(root)
    policies = compile_documents(documents)
    files: dict[str, bytes] = {}
    problems: list[Problem] = []
    for name, data in documents.sources.items():
        rel = os.path.relpath(os.path.abspath(name), root)
        if rel.startswith(os.pardir + os.sep) or rel == os.pardir or os.path.isabs(rel):
            problems.append(Problem(name, 0, 0, f"is outside {root}: a bundle holds only the "
                                                "files under its directory"))
            continue
        files[rel.replace(os.sep, "/")] = data
    if problems:
        raise PolicyError(problems)
    built = (now or datetime.datetime.now(datetime.UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    hashes = {k: hashlib.sha256(v).hexdigest() for k, v in sorted(files.items())}
    manifest = {
        "format": FORMAT,
        "revision": policies.revision,
        "built": built,
        "files": {k: {"sha256": h, "size": len(files[k])} for k, h in hashes.items()},
    }
    manifest_bytes = json.dumps(manifest, indent=2, sort_keys=True).encode() + b"\n"
    members: list[tuple[str, bytes]] = [(MANIFEST, manifest_bytes)]
    signed_by = None
    if sign is not None:
        private = _private_key(sign)
        signed_by = _key_id(private.public_key())
        signature = {"algorithm": "ed25519", "key_id": signed_by,
                     "signature": base64.b64encode(private.sign(manifest_bytes)).decode()}
        members.append((SIGNATURE, json.dumps(signature, sort_keys=True).encode() + b"\n"))
    members += [(FILES + k, v) for k, v in sorted(files.items())]
    data = _archive(members)
    out = os.fspath(output)
    tmp = f"{out}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, out)
    return Manifest(policies.revision, built, hashes, signed_by)


def _archive(members: list[tuple[str, bytes]]) -> bytes:
    """A deterministic tar.gz: same files, same bytes (no times, owners or modes)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


# --- read and verify -------------------------------------------------------------------


@dataclass(frozen=True)
class Bundle:
    manifest: Manifest
    files: Mapping[str, bytes]


def read(data: bytes, *, key: str | os.PathLike[str] | bytes | None = None,
         origin: str = "<bundle>") -> Bundle:
    """Check a bundle completely; raise ``BundleError`` on the first thing wrong."""
    if len(data) > MAX_BUNDLE_BYTES:
        raise BundleError(origin, f"larger than {MAX_BUNDLE_BYTES} bytes")
    members = _members(data, origin)
    manifest_bytes = members.pop(MANIFEST, None)
    if manifest_bytes is None:
        raise BundleError(origin, f"no {MANIFEST}")
    signature = members.pop(SIGNATURE, None)
    signed_by = None
    if key is not None:
        if signature is None:
            raise BundleError(origin, "not signed, and a verification key is configured")
        signed_by = _verify(manifest_bytes, signature, key, origin)
    try:
        manifest = json.loads(manifest_bytes)
    except RecursionError:  # nested deeper than the parser's stack: no manifest is
        raise BundleError(origin, f"{MANIFEST} is nested too deeply") from None
    except ValueError as e:
        raise BundleError(origin, f"{MANIFEST} is not JSON: {e}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BundleError(origin, f"not a {FORMAT} manifest")
    listed = manifest.get("files")
    revision, built = manifest.get("revision"), manifest.get("built")
    if not isinstance(listed, dict) or not isinstance(revision, str) or not isinstance(
            built, str):
        raise BundleError(origin, f"{MANIFEST} lacks files, revision or built")
    files: dict[str, bytes] = {}
    for name, content in members.items():
        if not name.startswith(FILES):
            raise BundleError(origin, f"unexpected member {name!r}")
        files[name[len(FILES):]] = content
    if set(files) != set(listed):
        extra = sorted(set(files) - set(listed))
        missing = sorted(set(listed) - set(files))
        raise BundleError(origin, f"files differ from the manifest (not listed: {extra}, "
                                  f"missing: {missing})")
    hashes: dict[str, str] = {}
    for name, content in files.items():
        entry = listed[name]
        digest = entry.get("sha256") if isinstance(entry, dict) else None
        if digest != hashlib.sha256(content).hexdigest():
            raise BundleError(origin, f"hash mismatch for {name}")
        hashes[name] = digest
    return Bundle(Manifest(revision, built, hashes, signed_by), files)


def _verify(manifest: bytes, signature: bytes, key: str | os.PathLike[str] | bytes,
            origin: str) -> str:
    _require_cryptography()
    from cryptography.exceptions import InvalidSignature

    public = _public_key(key)
    try:
        sig = json.loads(signature)
        raw = base64.b64decode(sig["signature"], validate=True)
        if sig.get("algorithm") != "ed25519":
            raise ValueError("not ed25519")
    except (ValueError, KeyError, TypeError, RecursionError):
        raise BundleError(origin, f"{SIGNATURE} is malformed") from None
    try:
        public.verify(raw, manifest)
    except InvalidSignature:
        raise BundleError(origin, "signature does not verify with the configured key"
                          ) from None
    return _key_id(public)


def _members(data: bytes, origin: str) -> dict[str, bytes]:
    try:
        raw = _gunzip(data)
        tar = tarfile.open(fileobj=io.BytesIO(raw), mode="r:")  # noqa: SIM115 (closed below)
    except (OSError, EOFError, tarfile.TarError) as e:
        detail = " ".join(str(e).split())[:200] or type(e).__name__
        raise BundleError(origin, f"not a readable bundle archive ({detail})") from None
    out: dict[str, bytes] = {}
    with tar:
        try:
            infos = tar.getmembers()
        except (tarfile.TarError, OSError, EOFError) as e:
            raise BundleError(origin, f"corrupt archive ({type(e).__name__})") from None
        if len(infos) > MAX_FILES + 2:
            raise BundleError(origin, f"more than {MAX_FILES} files")
        for info in infos:
            name = info.name
            if not info.isreg():
                raise BundleError(origin, f"member {name!r} is not a regular file")
            clean = posixpath.normpath(name)
            if (clean != name or name.startswith("/") or "\\" in name
                    or any(ord(c) < 32 or c == "\x7f" for c in name)
                    or any(part in ("", ".", "..") for part in name.split("/"))):
                raise BundleError(origin, f"unsafe member name {name!r}")
            if name in out:
                raise BundleError(origin, f"duplicate member {name!r}")
            f = tar.extractfile(info)
            if f is None:  # pragma: no cover - isreg() members always have content
                raise BundleError(origin, f"member {name!r} has no content")
            out[name] = f.read()
    return out


def _gunzip(data: bytes) -> bytes:
    """Decompress with a bound on the output size."""
    import zlib

    d = zlib.decompressobj(wbits=31)
    try:
        out = d.decompress(data, MAX_BUNDLE_BYTES + 1)
    except zlib.error as e:
        raise OSError(f"corrupt gzip stream: {e}") from None
    if len(out) > MAX_BUNDLE_BYTES or d.unconsumed_tail:
        raise OSError("unpacked bundle exceeds the size bound")
    if not d.eof:
        raise OSError("truncated gzip stream")
    if d.unused_data:
        # ``build`` writes one gzip member and nothing after it: bytes appended (a second
        # member, padding) are a changed bundle, not ignorable.
        raise OSError("bytes after the end of the gzip stream")
    return out


# --- load ------------------------------------------------------------------------------


def load_bundle(data: bytes, *, key: str | os.PathLike[str] | bytes | None = None,
                origin: str = "<bundle>", limits: Limits | None = None,
                backend: Backend = "compiled", not_before: str | None = None) -> PolicySet:
    """Verify a bundle, then load its policies. Problems name ``origin!/file:line:col``.

    ``not_before``: the build time of the bundle in use; an older one is refused (a
    validly signed but outdated bundle served again is a rollback, not an update).
    """
    return load_verified(data, key=key, origin=origin, limits=limits, backend=backend,
                         not_before=not_before)[0]


def load_verified(data: bytes, *, key: str | os.PathLike[str] | bytes | None = None,
                  origin: str = "<bundle>", limits: Limits | None = None,
                  backend: Backend = "compiled", not_before: str | None = None,
                  ) -> tuple[PolicySet, Manifest]:
    """``load_bundle``, also returning the bundle's manifest."""
    bundle = read(data, key=key, origin=origin)
    if not_before is not None and bundle.manifest.built < not_before:
        raise BundleError(origin, f"built {bundle.manifest.built}, before the bundle in use "
                                  f"({not_before}): a rollback is refused (rebuild the old "
                                  "policies to go back)")
    with tempfile.TemporaryDirectory(prefix="guardrails-bundle-") as tmp:
        try:
            for name, content in bundle.files.items():
                path = os.path.join(tmp, *name.split("/"))
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "xb") as f:
                    f.write(content)
        except OSError as e:  # e.g. "a" and "a/b" both listed
            raise BundleError(origin, f"cannot unpack: {type(e).__name__}") from None
        try:
            documents = load_documents(tmp)
            policies = compile_documents(documents, limits=limits or DEFAULT_LIMITS,
                                         backend=backend)
        except PolicyError as e:
            raise PolicyError(_relocated(p, tmp, origin) for p in e.errors) from None
        root = os.path.realpath(tmp)
        for name in documents.sources:
            if not os.path.realpath(name).startswith(root + os.sep):
                # A paramsFile naming a path outside: a bundle must be self-contained.
                raise BundleError(origin, "a policy reads a file outside the bundle "
                                          f"({os.path.basename(name)})")
    if policies.revision != bundle.manifest.revision:
        raise BundleError(origin, "the files' revision differs from the manifest's")
    return policies, bundle.manifest


def _relocated(problem: Problem, tmp: str, origin: str) -> Problem:
    """A problem in an unpacked file, named as ``bundle!/path`` rather than a temp path."""
    file = problem.file
    if file == tmp or file.startswith(tmp + os.sep):
        file = origin + "!/" + os.path.relpath(file, tmp).replace(os.sep, "/")
    message = problem.message.replace(tmp + os.sep, origin + "!/")
    return Problem(file, problem.line, problem.column, message)
