"""The expression library beyond standard CEL, as two tables the compiler resolves against.

``FUNCTIONS`` holds global functions by qualified name (``url``, ``sets.contains``);
``METHODS`` holds receiver-style functions called as ``fn(receiver, *args)``. A method
name shared by several receiver types (``ip`` on a CIDR, ``reverse`` on strings and
lists) is one function that dispatches on the receiver. Every function raises
``CelError`` -- and only ``CelError`` -- for wrong argument types or counts and for
invalid input. Semantics: docs/functions.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final

from guardrails.expr import lib_net as _net
from guardrails.expr import lib_provenance as _prov
from guardrails.expr import lib_strings as _str
from guardrails.expr import lib_text as _text
from guardrails.expr.lib_common import cel_equal
from guardrails.expr.lib_net import CIDR, IP, URL
from guardrails.expr.values import CelType

__all__ = ["CIDR", "FUNCTIONS", "IP", "METHODS", "TYPES", "URL", "cel_equal"]

FUNCTIONS: Final[Mapping[str, Callable[..., Any]]] = MappingProxyType(
    {
        # cel-go strings extension
        "strings.quote": _str.quote,
        # cel-go sets extension
        "sets.contains": _str.sets_contains,
        "sets.intersects": _str.sets_intersects,
        "sets.equivalent": _str.sets_equivalent,
        # JSON
        "parseJSON": _str.parse_json,
        # Kubernetes URL library
        "url": _net.url,
        "isURL": _net.is_url,
        # Kubernetes / cel-go IP and CIDR library
        "ip": _net.ip,
        "isIP": _net.is_ip,
        "ip.isCanonical": _net.ip_is_canonical,
        "cidr": _net.cidr,
        "isCIDR": _net.is_cidr,
        # guardrails additions
        "paths.clean": _text.paths_clean,
        "paths.within": _text.paths_within,
        "paths.glob": _text.paths_glob,
        "emails.domain": _text.emails_domain,
        "emails.valid": _text.emails_valid,
        "credentials.found": _text.credentials_found,
        # provenance (the call's context is set by the engine: lib_provenance.ORIGINS)
        "provenance": _prov.provenance,
        "untrusted": _prov.untrusted,
    }
)

METHODS: Final[Mapping[str, Callable[..., Any]]] = MappingProxyType(
    {
        # cel-go strings extension
        "charAt": _str.char_at,
        "indexOf": _str.index_of,
        "lastIndexOf": _str.last_index_of,
        "lowerAscii": _str.lower_ascii,
        "upperAscii": _str.upper_ascii,
        "replace": _str.replace,
        "split": _str.split,
        "substring": _str.substring,
        "trim": _str.trim,
        "join": _str.join,
        "reverse": _str.reverse,
        "format": _str.format_string,
        # Kubernetes regex library
        "find": _str.find,
        "findAll": _str.find_all,
        # URL
        "getScheme": _net.get_scheme,
        "getHost": _net.get_host,
        "getHostname": _net.get_hostname,
        "getPort": _net.get_port,
        "getEscapedPath": _net.get_escaped_path,
        "getQuery": _net.get_query,
        # IP
        "family": _net.family,
        "isUnspecified": _net.is_unspecified,
        "isLoopback": _net.is_loopback,
        "isLinkLocalMulticast": _net.is_link_local_multicast,
        "isLinkLocalUnicast": _net.is_link_local_unicast,
        "isGlobalUnicast": _net.is_global_unicast,
        "isPrivate": _net.is_private,
        # CIDR
        "containsIP": _net.contains_ip,
        "containsCIDR": _net.contains_cidr,
        "ip": _net.cidr_ip,
        "masked": _net.masked,
        "prefixLength": _net.prefix_length,
        "isMask": _net.is_mask,
        # provenance: request.mentions(value)
        "mentions": _prov.mentions,
    }
)

TYPES: Final[Mapping[str, CelType]] = MappingProxyType(
    {
        "net.IP": IP.cel_type,
        "net.CIDR": CIDR.cel_type,
        "kubernetes.URL": URL.cel_type,
    }
)
"""Type values of the extension types, for ``type(ip(x)) == net.IP`` (cel-spec
network_ext conformance); the compiler may declare these names as type identifiers."""
