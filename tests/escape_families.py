"""The escape families a tool (or a model steered by an injection) may spell a secret in,
each with the decoding a reader applies (red team 19 measured each going out whole).

Encoders are written from the formats' definitions (``quopri``, ``email``, ``csv``,
``shlex``, ``urllib``), not from the scrubber; decoders likewise, so that a test asks
"can a reader get the secret back?", not "did the scrubber do what it does?".
"""

from __future__ import annotations

import base64
import csv
import email.header
import html
import io
import json
import quopri
import re
import shlex
import unicodedata
import urllib.parse
import warnings
from collections.abc import Callable, Iterable


def _qp_all(value: str) -> str:
    """Quoted-printable with every byte encoded (an attacker's choice)."""
    return "".join(f"={b:02X}" for b in value.encode("utf-8"))


def _qp_wrapped(value: str) -> str:
    """Quoted-printable as a mailer writes a body: soft line breaks (``=`` + CRLF) every
    few characters, inside the value."""
    data = quopri.encodestring(value.encode("utf-8")).decode("ascii").rstrip("\n")
    out, line = [], ""
    for piece in re.findall(r"=[0-9A-F]{2}|.", data, flags=re.S):
        if len(line) + len(piece) > 6:
            out.append(line + "=")
            line = ""
        line += piece
    out.append(line)
    return "\r\n".join(out)


def _mime_q(value: str) -> str:
    return "=?utf-8?q?" + "".join(f"={b:02X}" for b in value.encode("utf-8")) + "?="


def _mime_b(value: str) -> str:
    return "=?UTF-8?B?" + base64.b64encode(value.encode("utf-8")).decode() + "?="


def _mime_split(value: str) -> str:
    """A long header folded into two encoded words (RFC 2047: the space between is not
    part of the text)."""
    half = len(value) // 2
    return _mime_b(value[:half]) + "\r\n " + _mime_q(value[half:])


def _csv(value: str) -> str:
    out = io.StringIO()
    csv.writer(out).writerow(["id", value, "note"])
    return out.getvalue()


def _sql(value: str) -> str:
    return "INSERT INTO t VALUES ('" + value.replace("'", "''") + "');"


def _octal(value: str) -> str:
    return "".join(f"\\{b:03o}" for b in value.encode("utf-8"))


def _css(value: str) -> str:
    return "".join(f"\\{ord(c):X} " for c in value)


def _css6(value: str) -> str:
    return "".join(f"\\{ord(c):06x}" for c in value)


def _percent_u(value: str) -> str:
    out = []
    for c in value:
        for unit in (c.encode("utf-16-be"),):
            for i in range(0, len(unit), 2):
                out.append(f"%u{int.from_bytes(unit[i:i + 2], 'big'):04X}")
    return "".join(out)


def _percent_latin1(value: str) -> str:
    return urllib.parse.quote(value, safe="", encoding="cp1252", errors="strict")


def _fullwidth(value: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in value)


def _between(filler: str) -> Callable[[str], str]:
    return lambda value: filler.join(value)


def _wrapped(value: str) -> str:
    return "\n".join(value[i:i + 5] for i in range(0, len(value), 5))


def _wrapped_indented(value: str) -> str:
    return "\r\n    ".join(value[i:i + 7] for i in range(0, len(value), 7))


FAMILIES: dict[str, Callable[[str], str]] = {
    "quoted-printable": _qp_all,
    "quoted-printable-wrapped": _qp_wrapped,
    "mime-q": _mime_q,
    "mime-b": _mime_b,
    "mime-split": _mime_split,
    "csv": _csv,
    "sql": _sql,
    "shell": shlex.quote,
    "shell-escaped-quote": lambda v: "'" + v.replace("'", "'\\''") + "'",
    "octal": _octal,
    "css": _css,
    "css6": _css6,
    "percent-u": _percent_u,
    "percent-cp1252": _percent_latin1,
    "fullwidth": _fullwidth,
    "zero-width": _between("\u200b"),
    "zero-width-joiner": _between("\u200d"),
    "word-joiner": _between("\u2060"),
    "bom": _between("\ufeff"),
    "soft-hyphen": _between("\u00ad"),
    "wrapped": _wrapped,
    "wrapped-indented": _wrapped_indented,
}
"""Each family, applied to a whole text (the secret inside it)."""


# -- decoders: what a reader does with what the model saw --------------------------------

def _qp_decode(text: str) -> str:
    try:
        return quopri.decodestring(text.encode("utf-8")).decode("utf-8", "replace")
    except Exception:
        return text


def _qp_decode_cp1252(text: str) -> str:
    try:
        return quopri.decodestring(text.encode("utf-8")).decode("cp1252", "replace")
    except Exception:
        return text


def _mime_decode(text: str) -> str:
    try:
        return str(email.header.make_header(email.header.decode_header(text)))
    except Exception:
        return text


def _unquote_doubled(text: str) -> str:
    return text.replace("'\\''", "'").replace("'\"'\"'", "'").replace("''", "'").replace(
        '""', '"')


def _octal_decode(text: str) -> str:
    def bytes_of(m: re.Match[str]) -> str:
        data = bytes(int(o, 8) & 0xFF for o in re.findall(r"\\([0-7]{1,3})", m.group(0)))
        return data.decode("utf-8", "replace")
    return re.sub(r"(?:\\[0-7]{1,3})+", bytes_of, text)


def _css_decode(text: str) -> str:
    def char(m: re.Match[str]) -> str:
        code = int(m.group(1), 16)
        return chr(code) if 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else "\ufffd"
    return re.sub(r"\\([0-9A-Fa-f]{1,6})(?:\r\n|[ \t\n\r\f])?", char, text)


def _percent_u_decode(text: str) -> str:
    def units(m: re.Match[str]) -> str:
        data = b"".join(int(u, 16).to_bytes(2, "big") for u in re.findall(
            r"%u([0-9A-Fa-f]{4})", m.group(0)))
        return data.decode("utf-16-be", "replace")
    return re.sub(r"(?:%u[0-9A-Fa-f]{4})+", units, text)


def _cp1252_unquote(text: str) -> str:
    return urllib.parse.unquote(text, encoding="cp1252", errors="replace")


def _backslash_decode(text: str) -> str:
    text = text.replace("\\/", "/")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return text.encode("latin-1", "backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError:
        return text


_FILLERS = re.compile("[\u200b-\u200d\u2060\ufeff\u00ad]")


def _unfilled(text: str) -> str:
    return _FILLERS.sub("", text)


def _unwrapped(text: str) -> str:
    return re.sub(r"[ \t]*(?:\r\n|\r|\n)[ \t]*", "", text)


def _json_decode(text: str) -> str:
    try:
        return "\n".join(_strings(json.loads(text)))
    except Exception:
        return text


def _strings(value: object) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


DECODERS: tuple[Callable[[str], str], ...] = (
    _qp_decode, _qp_decode_cp1252, _mime_decode, _unquote_doubled, _octal_decode,
    _css_decode, _percent_u_decode, _cp1252_unquote, urllib.parse.unquote, html.unescape,
    _backslash_decode, _json_decode, lambda t: unicodedata.normalize("NFKC", t), _unfilled,
    _unwrapped)


def decoded(seen: str, levels: int = 2) -> str:
    """Every decoding a reader might try on ``seen`` (each sequence of up to ``levels`` of
    the decoders above), joined by a NUL (never inside a secret the tests use)."""
    out = {seen}
    for _ in range(levels):
        out |= {decode(s) for s in out for decode in DECODERS}
    return "\0".join(out)
