"""Path, e-mail and credential functions (``paths.*``, ``emails.*``, ``credentials.found``).

These exist so policies need not hand-roll string checks that are easy to bypass
(``startsWith("/srv/")`` against ``/srv/../etc``); each documents exactly what it
normalises and what it leaves alone (docs/functions.md).
"""

from __future__ import annotations

import functools
from typing import Any, Final

import re2

from guardrails.expr.lib_common import (
    compile_re2,
    compiles_pattern,
    fixed_patterns,
    guarded,
    no_overload,
)
from guardrails.expr.limits import MAX_MATCHES
from guardrails.expr.values import CelError, MatchBoundExceeded

# --------------------------------------------------------------------------- paths


def _path_arg(name: str, *args: Any) -> None:
    for a in args:
        if type(a) is not str:
            raise no_overload(name, *args)
        if "\x00" in a:
            raise CelError(f"{name}: path contains a NUL byte")


def clean_path(p: str) -> str:
    """Go's path.Clean: collapse '//', drop '.', resolve '..' lexically ("" is ".");
    '..' above the root of an absolute path is dropped, as the kernel does."""
    if p == "":
        return "."
    rooted = p.startswith("/")
    parts: list[str] = []
    for seg in p.split("/"):
        if seg == "" or seg == ".":
            continue
        if seg == "..":
            if parts and parts[-1] != "..":
                parts.pop()
            elif not rooted:
                parts.append("..")
            continue
        parts.append(seg)
    joined = "/".join(parts)
    if rooted:
        return "/" + joined
    return joined or "."


@guarded("paths.clean")
def paths_clean(p: Any) -> str:
    _path_arg("paths.clean", p)
    return clean_path(p)


@guarded("paths.within")
def paths_within(p: Any, root: Any) -> bool:
    """True when the cleaned path is the cleaned root or below it. An absolute path is
    never within a relative root and vice versa."""
    _path_arg("paths.within", p, root)
    c, r = clean_path(p), clean_path(root)
    if c.startswith("/") != r.startswith("/"):
        return False
    if c == r:
        return True
    if r == "/":
        return True
    if r == ".":
        return c != ".." and not c.startswith("../")
    return c.startswith(r + "/")


@functools.lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                at_seg_start = i == 0 or pattern[i - 1] == "/"
                end = i + 2
                if at_seg_start and pattern.startswith("/", end):
                    out.append("(?:.*/)?")  # "**/" : zero or more directories
                    i = end + 1
                    continue
                if at_seg_start and end == n and i > 0:
                    out.pop()  # the "/" before "/**" at the end: the dir itself or below
                    out.append("(?:/.*)?")
                    i = end
                    continue
                out.append(".*")
                i = end
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = i + 1
            negate = j < n and pattern[j] in "!^"
            if negate:
                j += 1
            members: list[str] = []
            first = True
            while j < n and (pattern[j] != "]" or first):
                ch = pattern[j]
                if ch == "\\" and j + 1 < n:
                    j += 1
                    members.append(re2.escape(pattern[j]))
                elif ch == "-" and members and j + 1 < n and pattern[j + 1] != "]":
                    members.append("-")
                else:
                    members.append(re2.escape(ch))
                first = False
                j += 1
            if j >= n:
                raise CelError(f"paths.glob: unterminated '[' in pattern {pattern!r}")
            body = "".join(members)
            if not body:
                raise CelError(f"paths.glob: empty '[]' in pattern {pattern!r}")
            if not negate and compile_re2(f"[{body}]").fullmatch("/") is not None:
                raise CelError(f"paths.glob: '[...]' may match '/' in pattern {pattern!r}")
            out.append(f"[^/{body}]" if negate else f"[{body}]")
            i = j + 1
            continue
        elif c == "\\":
            if i + 1 >= n:
                raise CelError(f"paths.glob: trailing backslash in pattern {pattern!r}")
            out.append(re2.escape(pattern[i + 1]))
            i += 2
            continue
        else:
            out.append(re2.escape(c))
        i += 1
    return "".join(out)


@compiles_pattern(1, prepare=_glob_regex)
@guarded("paths.glob")
def paths_glob(p: Any, pattern: Any) -> bool:
    """Shell-style match of the cleaned path against the pattern (not cleaned).
    ``*``, ``?`` and ``[...]`` never match '/'; ``**`` as a whole segment matches zero
    or more segments; ``*`` matches names starting with '.'."""
    _path_arg("paths.glob", p, pattern)
    regex = compile_re2(_glob_regex(pattern))
    return regex.fullmatch(clean_path(p)) is not None


# --------------------------------------------------------------------------- e-mail

_ATEXT: Final = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~\-]"
_LOCAL: Final = rf"(?:{_ATEXT}+(?:\.{_ATEXT}+)*|\"(?:[\x21\x23-\x5b\x5d-\x7e]|\\[\x21-\x7e])*\")"
_LABEL: Final = r"[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?"
_EMAIL_RE: Final = rf"({_LOCAL})@((?:{_LABEL}\.)+{_LABEL})\.?"


def _parse_email(s: str) -> tuple[str, str] | None:
    if len(s) > 254 or not s.isascii():
        return None
    m = compile_re2(_EMAIL_RE).fullmatch(s)
    if m is None:
        return None
    local, domain = m.group(1), m.group(2)
    if len(local) > 64 or domain.rsplit(".", 1)[-1].isdigit():
        return None
    return local, domain


@fixed_patterns(_EMAIL_RE)
@guarded("emails.valid")
def emails_valid(s: Any) -> bool:
    """A practical subset of RFC 5322 addr-spec: ASCII only, no display name, comments,
    spaces or control characters, one '@' outside a quoted local part, a domain of at
    least two DNS labels (no IP literals), local part <= 64 and total <= 254 chars."""
    if type(s) is not str:
        raise no_overload("emails.valid", s)
    return _parse_email(s) is not None


@fixed_patterns(_EMAIL_RE)
@guarded("emails.domain")
def emails_domain(s: Any) -> str:
    """The lower-cased domain (trailing dot removed) of a valid address; any string
    ``emails.valid`` rejects (lists, display names, ...) is an error, so a policy cannot
    be shown ``good.com`` while the message also goes elsewhere."""
    if type(s) is not str:
        raise no_overload("emails.domain", s)
    parsed = _parse_email(s)
    if parsed is None:
        # Never a cut-off quote: it could end inside a secret (the scrubber removes whole
        # values, not prefixes).
        shown = repr(s) if len(s) <= 100 else f"(a text of {len(s)} characters)"
        raise CelError(f"emails.domain: not a valid e-mail address: {shown}")
    return parsed[1].lower()


# --------------------------------------------------------------------------- credentials

# Any match is a credential.
_DIRECT: Final = "|".join(
    [
        r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key id
        r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,}\b",  # GitHub tokens
        r"\bgithub_pat_[A-Za-z0-9_]{22,}",  # GitHub fine-grained token
        r"\bxox[abprs]-[A-Za-z0-9\-]{10,}",  # Slack
        r"\b[rs]k_live_[A-Za-z0-9]{16,}",  # Stripe live keys
        r"\bAIza[0-9A-Za-z_\-]{35}",  # Google API key
        r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----",  # PEM / PGP private keys
        r"\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]*",  # JWT
        r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s/:@]+:[^\s/@]{3,}@[A-Za-z0-9.\-\[]",  # URL user:pass
    ]
)
# Candidates that must pass a check to keep ordinary prose from matching.
_OPENAI: Final = r"\bsk-(?:proj-|svcacct-|admin-|ant-)?[A-Za-z0-9_\-]{20,}"
_BEARER: Final = r"(?i)\bbearer\s+([A-Za-z0-9\-._~+/]{20,}=*)"
_ASSIGNMENT: Final = (
    r"(?i)(?:\b|_)(?:password|passwd|pwd|passphrase|secret|client[_\-]?secret|api[_\-]?key"
    r"|apikey|access[_\-]?key|secret[_\-]?key|access[_\-]?token|auth[_\-]?token"
    r"|refresh[_\-]?token|private[_\-]?key|token)[\"']?\s*(?::=|[:=])\s*[\"']?"
    r"([^\s\"'`,;]{8,})"
)
_LONG_ALNUM: Final = r"[A-Za-z0-9]{20,}"
_PLACEHOLDER_START: Final = ("$", "{", "<", "%", "[", "(", "*")


def _mixed(v: str) -> bool:
    return any(c.isdigit() for c in v) and any(c.isalpha() for c in v)


def _secret_value(v: str) -> bool:
    v = v.rstrip(".,)]}>!?")
    if len(v) < 8 or v.startswith(_PLACEHOLDER_START) or len(set(v)) <= 2:
        return False
    classes = (
        any(c.islower() for c in v)
        + any(c.isupper() for c in v)
        + any(c.isdigit() for c in v)
        + any(not c.isalnum() for c in v)
    )
    return _mixed(v) or classes >= 3


@fixed_patterns(_DIRECT, _LONG_ALNUM, _OPENAI, _BEARER, _ASSIGNMENT)
@guarded("credentials.found")
def _credentials_found_work(s: Any) -> tuple[bool, int]:
    """``credentials_found`` and the candidate matches it checked in Python (each a few
    microseconds of work the text's length does not show: 24,000 near-miss assignments in
    a 440 kB argument took 0.3 s in one call); at most ``MAX_MATCHES`` a call."""
    if type(s) is not str:
        raise no_overload("credentials.found", s)
    if compile_re2(_DIRECT).search(s) is not None:
        return True, 0
    seen = 0

    def count() -> None:
        nonlocal seen
        seen += 1
        if seen > MAX_MATCHES:
            raise MatchBoundExceeded(f"credentials.found: more than {MAX_MATCHES} candidates")

    if "sk-" in s:
        long_alnum = compile_re2(_LONG_ALNUM)
        for m in compile_re2(_OPENAI).finditer(s):
            count()
            for r in long_alnum.finditer(m.group(0)):
                count()
                if _mixed(r.group(0)):
                    return True, seen
    for m in compile_re2(_BEARER).finditer(s):
        count()
        if _mixed(m.group(1)):
            return True, seen
    for m in compile_re2(_ASSIGNMENT).finditer(s):
        count()
        if _secret_value(m.group(1)):
            return True, seen
    return False, seen


@fixed_patterns(_DIRECT, _LONG_ALNUM, _OPENAI, _BEARER, _ASSIGNMENT)
@guarded("credentials.found")
def credentials_found(s: Any) -> bool:
    """Heuristic credential detector (RE2, linear time); see docs/functions.md for the
    formats recognised and what is deliberately not matched."""
    return _credentials_found_work(s)[0]


# The call sites run the variant that reports its candidates (``limits.with_work``).
credentials_found.cel_with_work = _credentials_found_work  # type: ignore[attr-defined]
