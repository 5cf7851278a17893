"""``guardrails bundle build | verify | keygen``: signed policy bundles for a fleet.

Exit codes follow the other commands: 0 ok, 1 the bundle or the policies have problems,
2 bad usage (a missing key file, an output that exists).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any, TextIO

from guardrails.cli.usage import OK, PROBLEMS, UsageError


def add_parser(sub: Any) -> None:
    p = sub.add_parser("bundle", help="build, sign and verify policy bundles",
                       description="Content-hashed, optionally Ed25519-signed policy "
                       "bundles for load() and watch(): build DIR -o FILE [--sign KEY] | "
                       "verify FILE [--key PUB] | keygen PATH. Exit 0 ok, 1 problems, "
                       "2 bad usage.")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    b = actions.add_parser("build", help="load DIR and write it as a bundle",
                           description="Load and validate DIR, then write its policy files "
                           "and a manifest (files, hashes, revision, build time) to FILE.")
    b.add_argument("directory", metavar="DIR", help="policy directory")
    b.add_argument("-o", "--output", required=True, metavar="FILE", help="bundle to write")
    b.add_argument("--sign", metavar="KEY", help="Ed25519 private key (PEM) to sign with")
    b.set_defaults(run=_build)

    v = actions.add_parser("verify", help="check a bundle's hashes (and signature)",
                           description="Check every hash, and with --key the signature; "
                           "then load the policies. Prints the manifest as JSON.")
    v.add_argument("file", metavar="FILE", help="bundle file")
    v.add_argument("--key", metavar="PUB", help="Ed25519 public key (PEM): the bundle must "
                   "be signed by its private key")
    v.set_defaults(run=_verify)

    k = actions.add_parser("keygen", help="make an Ed25519 key pair for signing",
                           description="Write PATH (private key, mode 0600) and PATH.pub.")
    k.add_argument("path", metavar="PATH", help="private key file to create")
    k.set_defaults(run=_keygen)


def _key_file(path: str | None) -> str | None:
    if path is not None and not os.path.isfile(path):
        raise UsageError(f"no such key file: {path}")
    return path


def _problems(e: Exception, out: TextIO) -> int:
    from guardrails.model.errors import PolicyError

    if not isinstance(e, PolicyError):
        raise e
    for p in e.errors:
        out.write(f"{p}\n")
    return PROBLEMS


def _build(args: argparse.Namespace, out: TextIO) -> int:
    from guardrails.fleet.bundle import build
    from guardrails.model.errors import PolicyError

    if not os.path.isdir(args.directory):
        raise UsageError(f"not a directory: {args.directory}")
    key = _key_file(args.sign)
    try:
        manifest = build(args.directory, args.output, sign=key)
    except PolicyError as e:
        return _problems(e, out)
    except ValueError as e:
        raise UsageError(str(e)) from None
    signed = f", signed by key {manifest.signed_by}" if manifest.signed_by else ", unsigned"
    out.write(f"{args.output}: revision {manifest.revision[:12]}, "
              f"{len(manifest.files)} files{signed}\n")
    return OK


def _verify(args: argparse.Namespace, out: TextIO) -> int:
    from guardrails.fleet.bundle import load_bundle, read
    from guardrails.model.errors import PolicyError

    key = _key_file(args.key)
    try:
        with open(args.file, "rb") as f:
            data = f.read()
    except OSError as e:
        raise UsageError(f"cannot read {args.file}: {e.strerror}") from None
    try:
        bundle = read(data, key=key, origin=args.file)
        load_bundle(data, key=key, origin=args.file)
    except PolicyError as e:
        return _problems(e, out)
    except ValueError as e:
        raise UsageError(str(e)) from None
    m = bundle.manifest
    out.write(json.dumps({"file": args.file, "revision": m.revision, "built": m.built,
                          "signed_by": m.signed_by, "files": dict(m.files)}, indent=2) + "\n")
    return OK


def _keygen(args: argparse.Namespace, out: TextIO) -> int:
    from guardrails.fleet.bundle import generate_key

    try:
        private, public = generate_key(args.path)
    except FileExistsError:
        raise UsageError(f"{args.path} exists; not overwriting a key") from None
    out.write(f"private key: {private} (keep secret)\npublic key: {public}\n")
    return OK
