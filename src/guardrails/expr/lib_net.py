"""URL, IP and CIDR values: the Kubernetes CEL URL library and the IP/CIDR library
(cel-go's ``ext.Network``), made strict for guardrail policies.

The parser is deliberately stricter than any HTTP client. A policy such as
``url(args.u).getHostname() == "internal"`` is only sound if every spelling that a
client would send to ``internal`` either normalises to that string or is rejected; where
clients disagree on what a string means (backslashes, percent-encoded or non-ASCII hosts,
numeric IPv4 shorthands, several ``@``) ``url()`` raises ``CelError`` and the engine
fails closed. See docs/functions.md for the full list.
"""

from __future__ import annotations

import functools
import ipaddress
from typing import Any, ClassVar, Final
from urllib.parse import unquote_to_bytes

from guardrails.expr.lib_common import compile_re2, fixed_patterns, guarded, no_overload
from guardrails.expr.values import CelError, CelType

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

# --------------------------------------------------------------------------- IP / CIDR


class IP:
    """A CEL ``net.IP`` value (an IPv4 or IPv6 address without zone)."""

    __slots__ = ("addr",)
    cel_type: ClassVar[CelType] = CelType.named("net.IP")

    def __init__(self, addr: Address) -> None:
        self.addr = addr

    def __eq__(self, other: object) -> bool:
        return type(other) is IP and other.addr == self.addr

    def __hash__(self) -> int:
        return hash(("net.IP", self.addr))

    def __str__(self) -> str:
        return str(self.addr)

    def __repr__(self) -> str:
        return f"ip({str(self.addr)!r})"


class CIDR:
    """A CEL ``net.CIDR`` value: an address and a prefix length (host bits are kept,
    as in Kubernetes; ``masked()`` clears them)."""

    __slots__ = ("addr", "bits")
    cel_type: ClassVar[CelType] = CelType.named("net.CIDR")

    def __init__(self, addr: Address, bits: int) -> None:
        self.addr = addr
        self.bits = bits

    def __eq__(self, other: object) -> bool:
        return type(other) is CIDR and other.addr == self.addr and other.bits == self.bits

    def __hash__(self) -> int:
        return hash(("net.CIDR", self.addr, self.bits))

    def __str__(self) -> str:
        return f"{self.addr}/{self.bits}"

    def __repr__(self) -> str:
        return f"cidr({str(self)!r})"

    def network(self) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
        return ipaddress.ip_network(f"{self.addr}/{self.bits}", strict=False)


def parse_ip(s: str) -> Address:
    """Parse like Go's netip.ParseAddr as cel-go's network library uses it.

    IPv4 must be dotted decimal without leading zeros (so ``0177.0.0.1``, ``127.1`` and
    ``2130706433`` are errors, never another address); zones are rejected; an
    IPv4-mapped IPv6 address written with a dotted quad (``::ffff:1.2.3.4``) is rejected,
    one written in hex (``::ffff:7f00:1``) is read as the IPv4 address it maps (both as
    cel-spec's conformance tests require), so ``isLoopback()`` etc. see the real address.
    """
    if "%" in s:
        raise CelError(f"IP address {s!r} with zone value is not allowed")
    if not s.isascii():
        raise CelError(f"IP Address {s!r} parse error during conversion from string")
    try:
        addr = ipaddress.ip_address(s)
    except ValueError:
        raise CelError(f"IP Address {s!r} parse error during conversion from string") from None
    if isinstance(addr, ipaddress.IPv6Address):
        mapped = addr.ipv4_mapped
        if mapped is not None:
            if "." in s:
                raise CelError(f"IPv4-mapped IPv6 address {s!r} is not allowed")
            return mapped
    return addr


_BITS_RE: Final = r"0|[1-9][0-9]{0,2}"


def parse_cidr(s: str) -> CIDR:
    addr_text, slash, bits_text = s.partition("/")
    if not slash:
        raise CelError(f"CIDR {s!r} parse error during conversion from string: no '/'")
    if "%" in addr_text:
        raise CelError(f"CIDR {s!r} with zone value is not allowed")
    if not bits_text.isascii() or compile_re2(_BITS_RE).fullmatch(bits_text) is None:
        raise CelError(f"CIDR {s!r} parse error during conversion from string: bad bits")
    if not addr_text.isascii():
        raise CelError(f"CIDR {s!r} parse error during conversion from string")
    try:
        addr = ipaddress.ip_address(addr_text)
    except ValueError:
        raise CelError(f"CIDR {s!r} parse error during conversion from string") from None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise CelError(f"IPv4-mapped IPv6 address {s!r} is not allowed")
    bits = int(bits_text)
    if bits > addr.max_prefixlen:
        raise CelError(f"CIDR {s!r} parse error during conversion from string: bits too large")
    return CIDR(addr, bits)


@guarded("ip")
def ip(s: Any) -> IP:
    if type(s) is not str:
        raise no_overload("ip", s)
    return IP(parse_ip(s))


@guarded("isIP")
def is_ip(s: Any) -> bool:
    if type(s) is not str:
        raise no_overload("isIP", s)
    try:
        parse_ip(s)
    except CelError:
        return False
    return True


@guarded("ip.isCanonical")
def ip_is_canonical(s: Any) -> bool:
    if type(s) is not str:
        raise no_overload("ip.isCanonical", s)
    return str(parse_ip(s)) == s


@fixed_patterns(_BITS_RE)
@guarded("cidr")
def cidr(s: Any) -> CIDR:
    if type(s) is not str:
        raise no_overload("cidr", s)
    return parse_cidr(s)


@fixed_patterns(_BITS_RE)
@guarded("isCIDR")
def is_cidr(s: Any) -> bool:
    if type(s) is not str:
        raise no_overload("isCIDR", s)
    try:
        parse_cidr(s)
    except CelError:
        return False
    return True


def _ip_arg(name: str, x: Any) -> Address:
    if type(x) is not IP:
        raise no_overload(name, x)
    return x.addr


@guarded("family")
def family(x: Any) -> int:
    return _ip_arg("family", x).version


@guarded("isUnspecified")
def is_unspecified(x: Any) -> bool:
    return int(_ip_arg("isUnspecified", x)) == 0


@guarded("isLoopback")
def is_loopback(x: Any) -> bool:
    a = _ip_arg("isLoopback", x)
    if a.version == 4:
        return int(a) >> 24 == 127
    return int(a) == 1


@guarded("isLinkLocalMulticast")
def is_link_local_multicast(x: Any) -> bool:
    a = _ip_arg("isLinkLocalMulticast", x)
    if a.version == 4:
        return int(a) >> 8 == 0xE00000
    return (int(a) >> 112) & 0xFF0F == 0xFF02


def _link_local_unicast(a: Address) -> bool:
    if a.version == 4:
        return int(a) >> 16 == 0xA9FE
    return int(a) >> 118 == 0xFE80 >> 6


def _multicast(a: Address) -> bool:
    if a.version == 4:
        return int(a) >> 28 == 0xE
    return int(a) >> 120 == 0xFF


@guarded("isLinkLocalUnicast")
def is_link_local_unicast(x: Any) -> bool:
    return _link_local_unicast(_ip_arg("isLinkLocalUnicast", x))


@guarded("isGlobalUnicast")
def is_global_unicast(x: Any) -> bool:
    """Go's definition: not unspecified, broadcast, loopback, multicast or link-local.
    Private (RFC 1918) and ULA addresses ARE global unicast, as in Go."""
    a = _ip_arg("isGlobalUnicast", x)
    n = int(a)
    if n == 0 or (a.version == 4 and n == 0xFFFFFFFF):
        return False
    loopback = (n >> 24 == 127) if a.version == 4 else n == 1
    return not loopback and not _multicast(a) and not _link_local_unicast(a)


@guarded("isPrivate")
def is_private(x: Any) -> bool:
    """RFC 1918 (10/8, 172.16/12, 192.168/16) and RFC 4193 (fc00::/7), as Go's
    net.IP.IsPrivate. Not CGNAT 100.64/10, loopback or link-local: test those too."""
    a = _ip_arg("isPrivate", x)
    n = int(a)
    if a.version == 4:
        return n >> 24 == 10 or n >> 20 == 0xAC1 or n >> 16 == 0xC0A8
    return n >> 121 == 0xFC >> 1


def _cidr_arg(name: str, x: Any, *rest: Any) -> CIDR:
    if type(x) is not CIDR:
        raise no_overload(name, x, *rest)
    return x


@guarded("containsIP")
def contains_ip(c: Any, other: Any) -> bool:
    net = _cidr_arg("containsIP", c, other)
    if type(other) is str:
        addr = parse_ip(other)
    elif type(other) is IP:
        addr = other.addr
    else:
        raise no_overload("containsIP", c, other)
    if addr.version != net.addr.version:
        return False
    shift = net.addr.max_prefixlen - net.bits
    return int(addr) >> shift == int(net.addr) >> shift


@guarded("containsCIDR")
def contains_cidr(c: Any, other: Any) -> bool:
    net = _cidr_arg("containsCIDR", c, other)
    if type(other) is str:
        sub = parse_cidr(other)
    elif type(other) is CIDR:
        sub = other
    else:
        raise no_overload("containsCIDR", c, other)
    if sub.addr.version != net.addr.version or sub.bits < net.bits:
        return False
    shift = net.addr.max_prefixlen - net.bits
    return int(sub.addr) >> shift == int(net.addr) >> shift


@guarded("ip")
def cidr_ip(c: Any) -> IP:
    return IP(_cidr_arg("ip", c).addr)


@guarded("masked")
def masked(c: Any) -> CIDR:
    net = _cidr_arg("masked", c)
    return CIDR(net.network().network_address, net.bits)


@guarded("prefixLength")
def prefix_length(c: Any) -> int:
    return _cidr_arg("prefixLength", c).bits


@guarded("isMask")
def is_mask(c: Any) -> bool:
    """cel-go ``isMask``: true when no host bits are set."""
    net = _cidr_arg("isMask", c)
    return net.network().network_address == net.addr


# --------------------------------------------------------------------------- URL

_SPECIAL_SCHEMES: Final = frozenset({"http", "https", "ws", "wss", "ftp", "file"})
_SCHEME_RE: Final = r"[A-Za-z][A-Za-z0-9+.\-]*"
_PORT_LIKE_RE: Final = r"[0-9]+(?:/.*)?"
_LABEL_RE: Final = r"[a-z0-9_](?:[a-z0-9_\-]{0,61}[a-z0-9_])?"
_NUMERIC_LABEL_RE: Final = r"[0-9]+|0[xX][0-9A-Fa-f]*"
_DEC_OCTET_RE: Final = r"0|[1-9][0-9]{0,2}"
_USERINFO_RE: Final = r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:]|%[0-9A-Fa-f]{2})*"
_BAD_ESCAPE_RE: Final = r"%(?:[^0-9A-Fa-f]|[0-9A-Fa-f][^0-9A-Fa-f]|[0-9A-Fa-f]?$)"
# Characters kept as written in an escaped path (Go's validEncoded set plus '%').
_PATH_SAFE: Final = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/[]%"
)


def _url_error(s: str, why: str) -> CelError:
    # A long value is not quoted at all: a cut-off quote could end inside a secret, and
    # the scrubber removes whole values, never their prefixes.
    shown = repr(s) if len(s) <= 200 else f"of {len(s)} characters"
    return CelError(f"URL parse error during conversion from string {shown}: {why}")


class URL:
    """A CEL ``kubernetes.URL`` value, already normalised (see ``parse_url``)."""

    __slots__ = ("fragment", "hostname", "opaque", "path", "port", "query", "scheme", "userinfo")
    cel_type: ClassVar[CelType] = CelType.named("kubernetes.URL")
    scheme: str
    userinfo: str | None
    hostname: str
    port: str
    path: str
    query: str | None
    fragment: str | None
    opaque: str | None

    def __init__(
        self,
        *,
        scheme: str,
        userinfo: str | None,
        hostname: str,
        port: str,
        path: str,
        query: str | None,
        fragment: str | None,
        opaque: str | None,
    ) -> None:
        init = object.__setattr__  # immutable: url() results are cached and shared
        init(self, "scheme", scheme)
        init(self, "userinfo", userinfo)
        init(self, "hostname", hostname)
        init(self, "port", port)
        init(self, "path", path)
        init(self, "query", query)
        init(self, "fragment", fragment)
        init(self, "opaque", opaque)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("URL values are immutable")

    @property
    def host(self) -> str:
        h = f"[{self.hostname}]" if ":" in self.hostname else self.hostname
        return f"{h}:{self.port}" if self.port else h

    def __str__(self) -> str:
        out = f"{self.scheme}:" if self.scheme else ""
        if self.opaque is not None:
            out += self.opaque
        else:
            # An empty authority is written out before a path starting with "//", or
            # the path would read back as a host (as Go's url.URL.String does).
            if (
                self.hostname
                or self.scheme == "file"
                or self.userinfo is not None
                or self.path.startswith("//")
            ):
                out += "//"
                if self.userinfo is not None:
                    out += self.userinfo + "@"
                out += self.host
            out += self.path
        if self.query is not None:
            out += "?" + self.query
        if self.fragment is not None:
            out += "#" + self.fragment
        return out

    def __eq__(self, other: object) -> bool:
        return type(other) is URL and str(other) == str(self)

    def __hash__(self) -> int:
        return hash(("kubernetes.URL", str(self)))

    def __repr__(self) -> str:
        return f"url({str(self)!r})"


def _normalise_host(s: str, host: str) -> str:
    if host.startswith("["):
        if not host.endswith("]"):
            raise _url_error(s, "unterminated IPv6 literal")
        literal = host[1:-1]
        if "%" in literal:
            raise _url_error(s, "IPv6 zone identifiers are not allowed")
        if not literal.isascii():
            raise _url_error(s, "invalid IPv6 literal")
        try:
            addr = ipaddress.IPv6Address(literal)
        except ValueError:
            raise _url_error(s, "invalid IPv6 literal") from None
        if addr.ipv4_mapped is not None:
            raise _url_error(s, "IPv4-mapped IPv6 hosts are not allowed")
        return addr.compressed
    if not host.isascii():
        raise _url_error(s, "non-ASCII host (write internationalised names as xn-- punycode)")
    if "%" in host:
        raise _url_error(s, "percent-encoded host")
    name = host.lower()
    if name.endswith("."):
        name = name[:-1]  # "internal." is the same DNS name as "internal"
    if not name:
        raise _url_error(s, "empty host")
    if len(name) > 253:
        raise _url_error(s, "host name too long")
    labels = name.split(".")
    label_re = compile_re2(_LABEL_RE)
    for label in labels:
        if label_re.fullmatch(label) is None:
            raise _url_error(s, f"invalid host name {host!r}")
    if compile_re2(_NUMERIC_LABEL_RE).fullmatch(labels[-1]) is not None:
        # Browsers and inet_aton read such hosts as IPv4 numbers (127.1, 0x7f.1,
        # 2130706433, 0177.0.0.1): only the canonical dotted quad is accepted.
        octet_re = compile_re2(_DEC_OCTET_RE)
        if len(labels) != 4 or any(octet_re.fullmatch(x) is None or int(x) > 255 for x in labels):
            raise _url_error(s, f"ambiguous numeric host {host!r} (use a dotted-quad IPv4)")
    return name


def _escape_path(s: str, path: str) -> str:
    if "%" in path and compile_re2(_BAD_ESCAPE_RE).search(path) is not None:
        raise _url_error(s, "invalid percent-escape in path")
    if all(c in _PATH_SAFE for c in path):
        return path
    out = []
    for c in path:
        if c in _PATH_SAFE:
            out.append(c)
        else:
            out.extend(f"%{b:02X}" for b in c.encode("utf-8"))
    return "".join(out)


def parse_url(s: str) -> URL:
    """Parse and normalise a URL (or reject it). See docs/functions.md, ``url``."""
    if not s:
        raise _url_error(s, "empty URL")
    if s != s.strip() or any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in s):
        raise _url_error(s, "control characters or surrounding whitespace")
    rest, hash_mark, fragment = s.partition("#")
    before, question, query = rest.partition("?")
    if "\\" in before:
        raise _url_error(s, "backslash before the query (clients disagree on its meaning)")
    scheme = ""
    opaque: str | None = None
    m = compile_re2(_SCHEME_RE).match(before)
    after = ""
    if m is not None and before[m.end() : m.end() + 1] == ":":
        after = before[m.end() + 1 :]
        if after.startswith("//"):
            scheme = m.group(0).lower()
            hier = after
        elif compile_re2(_PORT_LIKE_RE).fullmatch(after) is not None:
            scheme, hier = "https", "//" + before  # "host:8080/x" is a host, not a scheme
        elif m.group(0).lower() in _SPECIAL_SCHEMES:
            raise _url_error(s, f"{m.group(0)}: must be followed by //")
        else:
            scheme, hier, opaque = m.group(0).lower(), "", after
    elif before.startswith("/"):
        hier = before  # "/path" (absolute path) or "//host/path" (no scheme)
    else:
        scheme, hier = "https", "//" + before  # SPEC: "www.x.com/a" is https://www.x.com/a
    userinfo: str | None = None
    hostname = port = ""
    path = ""
    if opaque is not None:
        if "%" in opaque and compile_re2(_BAD_ESCAPE_RE).search(opaque) is not None:
            raise _url_error(s, "invalid percent-escape")
    elif hier.startswith("//"):
        authority, slash, tail = hier[2:].partition("/")
        path = slash + tail
        if "@" in authority:
            if authority.count("@") > 1:
                raise _url_error(s, "more than one '@' in the authority")
            userinfo, _, authority = authority.partition("@")
            if compile_re2(_USERINFO_RE).fullmatch(userinfo) is None:
                raise _url_error(s, "invalid user info")
        if authority.startswith("["):
            close = authority.find("]")
            host_text, port_text = authority[: close + 1], authority[close + 1 :]
            if close < 0 or (port_text and not port_text.startswith(":")):
                raise _url_error(s, "invalid IPv6 literal")
            port_text = port_text[1:]
        else:
            if authority.count(":") > 1:
                raise _url_error(s, "more than one ':' in the host")
            host_text, _, port_text = authority.partition(":")
        if port_text:
            if not (port_text.isascii() and port_text.isdigit()) or int(port_text) > 65535:
                raise _url_error(s, f"invalid port {port_text!r}")
            port = str(int(port_text))
        if host_text:
            hostname = _normalise_host(s, host_text)
        elif not scheme or (scheme in _SPECIAL_SCHEMES and scheme != "file"):
            raise _url_error(s, "empty host")
        elif userinfo is not None or port:
            raise _url_error(s, "user info or port without a host")
    else:
        path = hier
    return URL(
        scheme=scheme,
        userinfo=userinfo,
        hostname=hostname,
        port=port,
        path=_escape_path(s, path),
        query=query if question else None,
        fragment=fragment if hash_mark else None,
        opaque=opaque,
    )


def _unescape_query(part: str) -> str | None:
    """Go's QueryUnescape: '+' is a space; an invalid %-escape makes the pair invalid."""
    if "%" in part and compile_re2(_BAD_ESCAPE_RE).search(part) is not None:
        return None
    return unquote_to_bytes(part.replace("+", " ")).decode("utf-8", "replace")


def query_map(query: str | None) -> dict[str, list[str]]:
    """Go's url.ParseQuery, keeping the pairs it accepts: pairs split on '&', those with
    ';' or a bad escape are dropped, keys and values are unescaped."""
    out: dict[str, list[str]] = {}
    if not query:
        return out
    for pair in query.split("&"):
        if not pair or ";" in pair:
            continue
        key_text, _, value_text = pair.partition("=")
        key, value = _unescape_query(key_text), _unescape_query(value_text)
        if key is None or value is None:
            continue
        out.setdefault(key, []).append(value)
    return out


_CACHE_MAX_LEN: Final = 2048


@functools.lru_cache(maxsize=512)
def _parse_url_cached(s: str) -> URL:
    return parse_url(s)


_URL_PATTERNS: Final = (_SCHEME_RE, _PORT_LIKE_RE, _LABEL_RE, _NUMERIC_LABEL_RE, _DEC_OCTET_RE,
                        _USERINFO_RE, _BAD_ESCAPE_RE)
"""What parsing a URL compiles (``parse_url``)."""


@fixed_patterns(*_URL_PATTERNS)
@guarded("url")
def url(s: Any) -> URL:
    """URL values are immutable, so the same text (common across the rules of a
    policy set) is parsed once."""
    if type(s) is not str:
        raise no_overload("url", s)
    return _parse_url_cached(s) if len(s) <= _CACHE_MAX_LEN else parse_url(s)


@fixed_patterns(*_URL_PATTERNS)
@guarded("isURL")
def is_url(s: Any) -> bool:
    if type(s) is not str:
        raise no_overload("isURL", s)
    try:
        url(s)
    except CelError:
        return False
    return True


def _url_arg(name: str, u: Any) -> URL:
    if type(u) is not URL:
        raise no_overload(name, u)
    return u


@guarded("getScheme")
def get_scheme(u: Any) -> str:
    return _url_arg("getScheme", u).scheme


@guarded("getHost")
def get_host(u: Any) -> str:
    """Host and port as in Kubernetes (``example.com:8080``, ``[::1]:80``)."""
    return _url_arg("getHost", u).host


@guarded("getHostname")
def get_hostname(u: Any) -> str:
    """Host without port or IPv6 brackets: the one to compare against names."""
    return _url_arg("getHostname", u).hostname


@guarded("getPort")
def get_port(u: Any) -> str:
    return _url_arg("getPort", u).port


@guarded("getEscapedPath")
def get_escaped_path(u: Any) -> str:
    return _url_arg("getEscapedPath", u).path


@guarded("getQuery")
def get_query(u: Any) -> dict[str, list[str]]:
    return query_map(_url_arg("getQuery", u).query)
