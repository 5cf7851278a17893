"""Red team 27: an injected secret a tool hands back base64- or hex-encoded (promise 5).

Before the fix each of these gave the model a decodable form of the secret (the
"Transformations" limit): a tool echoing its request (an httpbin-like endpoint) returns
``Authorization: Basic base64(user:password)``, a ``Content.from_data`` result is a data:
URI holding its bytes base64-encoded, a hex dump holds them in hex. The scrubber now
searches every value of ``MIN_ENCODED_BYTES`` or more by its encoded cores too
(``scrub._encoded``). In the framework's real loop (red team 20's harness: prose, a dict
result, an exception, a log record while the tool runs), a reader who decodes every base64
and hex run it sees (written here from the formats, not from the scrubber) must not get
the secret back; ordinary base64, hashes and prose must come out unchanged.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import random
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Content

from guardrails.engine import scrub as sc
from guardrails.engine.scrub import MIN_ENCODED_BYTES, Scrubber
from tests import test_redteam20_escapes as redteam20
from tests.escape_families import decoded
from tests.test_redteam20_escapes import CASE, SECRET, WAYS, _leaked

KEY = "Zq9-vTx3-mW2pL-k8Rd"
"""ASCII, as most API keys are (SECRET, red team 20's, holds quotes and non-ASCII)."""


def _b64_runs(text: str) -> list[bytes]:
    """What a reader gets decoding each run of base64 characters in ``text`` (either
    alphabet, padded or not) from each of the 4 places a group may start."""
    out = []
    for run in re.findall(r"[A-Za-z0-9+/_-]{4,}=*", text):
        std = run.rstrip("=").translate(str.maketrans("-_", "+/"))
        for start in range(4):
            part = std[start:]
            part = part[:len(part) - 1] if len(part) % 4 == 1 else part
            with_pad = part + "=" * (-len(part) % 4)
            try:
                out.append(base64.b64decode(with_pad))
            except binascii.Error:
                continue
    return out


def _hex_runs(text: str) -> list[bytes]:
    """What a reader gets decoding each run of hex digits, either case, at both offsets."""
    out = []
    for run in re.findall(r"[0-9A-Fa-f]{4,}", text):
        for start in range(2):
            part = run[start:]
            out.append(bytes.fromhex(part[:len(part) // 2 * 2]))
    return out


def unencoded(text: str) -> str:
    """Every base64 and hex run of ``text`` decoded (UTF-8, a broken character skipped),
    joined by NULs."""
    return "\0".join(data.decode("utf-8", "ignore")
                     for data in _b64_runs(text) + _hex_runs(text))


def _reader(text: str) -> str:
    """The escape families' reader, and every base64 and hex run decoded in each of its
    readings (a base64 blob in a JSON string, a hex dump in a ``repr``), and what was
    decoded read once more (JSON base64-encoded)."""
    readings = decoded(text)
    inner = unencoded(readings)
    return readings + "\0" + inner + "\0" + decoded(inner, levels=1)


def _b64(s: str) -> str:
    return base64.b64encode(s.encode("utf-8")).decode("ascii")


def _wrapped(blob: str, width: int = 76) -> str:
    """Base64 as MIME and PEM write it: lines of ``width`` characters."""
    return "\r\n".join(blob[i:i + width] for i in range(0, len(blob), width))


_PNG_HEAD = bytes.fromhex("89504e470d0a1a0a0000000d49484452")

ENCODINGS: dict[str, Callable[[str], str]] = {
    "base64": _b64,
    "base64-unpadded": lambda s: _b64(s).rstrip("="),
    "basic-auth": lambda s: "Authorization: Basic " + _b64("mailuser:" + s),
    "basic-auth-after-1": lambda s: "Basic " + _b64("u:" + s + "x"),
    "urlsafe": lambda s: base64.urlsafe_b64encode(("\xff\xfe" + s).encode()).decode(),
    "inside-binary": lambda s: base64.b64encode(
        _PNG_HEAD + b"\x00tEXtpw\x00" + s.encode() + b"\x00" * 5).decode(),
    "mime-wrapped": lambda s: _wrapped(base64.b64encode(
        bytes(range(61)) + s.encode() + bytes(range(40))).decode()),
    "hex": lambda s: s.encode().hex(),
    "hex-upper": lambda s: "0x" + s.encode().hex().upper(),
    "hex-in-dump": lambda s: "payload=" + (b"\x01\x02\x03" + s.encode()).hex() + ";",
    "base64-in-json": lambda s: json.dumps({"Authorization": "Basic " + _b64("a:" + s)}),
    "json-in-base64": lambda s: _b64(json.dumps({"sub": "svc", "pw": s})),
    "json-in-base64-raw": lambda s: _b64(json.dumps({"pw": s}, ensure_ascii=False)),
}
"""How a tool may hand a secret back encoded (each then handed back each of ``WAYS``)."""


@pytest.fixture(autouse=True)
def _debug_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.DEBUG)
    yield


def test_the_reader_finds_each_encoding() -> None:
    """The reader is able: each encoding of each secret gives it back (else the loop tests
    below would pass for nothing)."""
    for secret in (SECRET, KEY):
        for name, encode in ENCODINGS.items():
            assert secret in _reader(encode(secret)), name


@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize("encoding", list(ENCODINGS))
@pytest.mark.parametrize("secret", [SECRET, KEY], ids=["non-ascii", "ascii"])
async def test_a_secret_handed_back_encoded_never_leaves(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        secret: str, encoding: str, way: str) -> None:
    """Real loop: the injected secret base64- or hex-encoded, in prose, a dict result, an
    exception's text and a log line; a reader who decodes every run finds nothing. Each
    went out before red team 27's fix."""
    CASE[:] = [ENCODINGS[encoding], WAYS[way]]
    monkeypatch.setattr(redteam20, "decoded", _reader)
    assert await _leaked(tmp_path, monkeypatch, caplog, secret=secret) == []


DATA: dict[str, Callable[[str], Any]] = {
    "alone": lambda s: Content.from_data(s.encode(), "application/octet-stream"),
    "in-a-png": lambda s: Content.from_data(
        _PNG_HEAD + b"\x00\x00tEXtComment\x00" + s.encode() + b"\xae\x42\x60\x82", "image/png"),
    "after-2-bytes": lambda s: Content.from_data(b"\x00\x01" + s.encode(), "text/plain"),
    "in-a-list": lambda s: [Content.from_text("here it is"),
                            Content.from_data(b"k=" + s.encode(), "text/plain")],
}


@pytest.mark.parametrize("item", list(DATA))
@pytest.mark.parametrize("secret", [SECRET, KEY], ids=["non-ascii", "ascii"])
async def test_a_secret_in_a_data_uri_content_never_leaves(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        secret: str, item: str) -> None:
    """Real loop: the tool returns ``Content.from_data`` holding the secret's bytes (its
    data: URI is them base64-encoded)."""
    make = DATA[item]
    CASE[:] = [lambda s: s, make]
    assert secret in _reader(json.dumps(Content.from_data(secret.encode(), "x/y").to_dict()))
    monkeypatch.setattr(redteam20, "decoded", _reader)
    assert await _leaked(tmp_path, monkeypatch, caplog, secret=secret) == []


def _many() -> list[str]:
    """Values past ``_SCAN_NEEDLES``: a guard's memory, searched by RE2."""
    return [f"tok-{i:04d}-{i * 7919:08x}" for i in range(40)]


@pytest.mark.parametrize("memory", [False, True], ids=["few", "memory"])
def test_every_alignment_and_edge(memory: bool) -> None:
    """Every byte alignment before and after, in both alphabets and cases, through the
    few-needle scan and a memory's RE2 search alike; what is kept of the blob holds at most
    4 bits of the value at each edge (the characters around the replaced core)."""
    rng = random.Random(27)
    for secret in (KEY, SECRET):
        scrub = Scrubber([secret, *(_many() if memory else [])])
        if secret == KEY or memory:
            assert (len(scrub._needles) > sc._SCAN_NEEDLES) is memory
        data = secret.encode()
        for before in range(7):
            for after in range(4):
                head, tail = rng.randbytes(before), rng.randbytes(after)
                blob = base64.b64encode(head + data + tail).decode()
                for form in (blob, blob.replace("+", "-").replace("/", "_"), blob.lower(),
                             blob.swapcase()):
                    out = scrub("x " + form + " y")
                    assert out.count("[REDACTED]") == 1, (before, after, form, out)
                    kept_left = out.index("[REDACTED]") - 2
                    kept_right = len(out) - 2 - out.index("[REDACTED]") - len("[REDACTED]")
                    # bits of the value in the kept characters, each side
                    assert 6 * kept_left - 8 * before <= 4, (before, after, out)
                    pad = form.count("=")
                    right_bits = 6 * (kept_right - pad) - 8 * after - 2 * pad
                    assert right_bits <= 4, (before, after, out)
                hexed = (head + data + tail).hex()
                for form in (hexed, hexed.upper()):
                    out = scrub("x " + form + " y")
                    assert out == ("x " + form[:2 * before] + "[REDACTED]"
                                   + form[2 * (before + len(data)):] + " y"), out


def test_ordinary_base64_hashes_and_prose_are_unchanged() -> None:
    """No false positive: base64 of other data (an image of random bytes, the secret's
    neighbours but not it), hex hashes, UUIDs and prose stay as they are, with a call's few
    values and with a memory."""
    rng = random.Random(2027)
    image = base64.b64encode(rng.randbytes(200_000)).decode()
    texts = [
        "data:image/png;base64," + image,
        _wrapped(image[:20_000]),
        " ".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(2000)),
        " ".join(hashlib.sha1(str(i).encode()).hexdigest().upper() for i in range(2000)),
        " ".join(str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(2000)),
        # the secrets' bytes but for their last two, and their first two, encoded
        _b64("user:" + KEY[:-2]) + " " + _b64(KEY[2:]) + " " + KEY[:-2].encode().hex(),
        base64.b64encode(SECRET.encode()[:-2]).decode() + " " + SECRET.encode()[3:].hex(),
        "The quick brown fox jumps over the lazy dog; Zq9 and vTx3 are not the key. " * 200,
        json.dumps({"Authorization": "Basic " + _b64("alice:correct horse battery"),
                    "etag": hashlib.md5(b"x").hexdigest()}),
    ]
    for values in ([KEY, SECRET], [KEY, SECRET, *_many()]):
        scrub = Scrubber(values)
        for text_ in texts:
            assert scrub(text_) == text_, text_[:80]


def test_a_short_value_is_not_searched_encoded() -> None:
    """A value under ``MIN_ENCODED_BYTES`` is found written out (from 4 characters,
    ``MIN_SUBSTRING_LENGTH``) but not encoded: its cores (4-9 characters) would blank any
    base64 that holds them by chance. From 8 bytes on, it is."""
    short = "k8Rd9x"
    assert len(short.encode()) < MIN_ENCODED_BYTES
    scrub = Scrubber([short])
    assert scrub("key " + short + " end") == "key [REDACTED] end"
    assert sc._encoded(short) == set()
    # unrelated base64 that holds the characters of the short value's base64, off its
    # alignment (they decode to other bytes)
    rng = random.Random(6)
    blob = (base64.b64encode(rng.randbytes(3000)).decode() + "Q" + _b64(short)
            + base64.b64encode(rng.randbytes(3000)).decode()[1:])
    assert scrub(blob) == blob
    assert scrub(_b64("u:" + short)) == _b64("u:" + short)  # the documented limit
    eight = "k8Rd9xQ2"
    assert len(eight.encode()) == MIN_ENCODED_BYTES
    for before in range(3):
        assert "[REDACTED]" in Scrubber([eight])(_b64("u:"[:before] + eight))


def test_a_call_layer_of_encoded_values_stays_bounded() -> None:
    """Each value's cores add about 9 characters a byte to its needles (3 alignments, 2
    alphabets, hex): a layer at ``MAX_LAYER_CHARS`` stays linear in it, and one past it is
    opaque as before."""
    memory = Scrubber(_many())
    value = "".join(random.Random(1).choices("abcdefghijklmnopqrstuvwxyz0123456789", k=8000))
    layer = memory.with_values([value])
    assert not layer.opaque
    chars = sum(len(n) for n in layer._needles)
    assert chars <= 12 * len(value), chars
    assert "[REDACTED]" in layer(_b64("k:" + value))
    assert memory.with_values([value * 2]).opaque
