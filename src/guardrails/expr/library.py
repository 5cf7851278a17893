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

from guardrails.expr import lib_ext as _ext
from guardrails.expr import lib_net as _net
from guardrails.expr import lib_optional as _opt
from guardrails.expr import lib_provenance as _prov
from guardrails.expr import lib_strings as _str
from guardrails.expr import lib_text as _text
from guardrails.expr.lib_common import cel_equal
from guardrails.expr.lib_net import CIDR, IP, URL
from guardrails.expr.limits import CALL_COST
from guardrails.expr.values import CelType

__all__ = ["CIDR", "FUNCTIONS", "IP", "METHODS", "SIGNATURES", "TYPES", "URL", "cel_equal"]

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
        # cel-go optional library, and the optional syntax the parser desugars
        "optional.of": _opt.of,
        "optional.none": _opt.none,
        "optional.ofNonZeroValue": _opt.of_non_zero_value,
        "optional.@select": _opt.select,
        "optional.@index": _opt.index,
        "optional.@items": _opt.items,
        "optional.@flat": _opt.flat_result,
        "optional.@list": _opt.make_list,
        "optional.@map": _opt.make_map,
        # results of two-variable comprehensions (the parser calls them)
        "cel.@pairsToMap": _ext.pairs_to_map,
        "cel.@mergeMaps": _ext.merge_maps,
        # cel-go regex extension
        "regex.extract": _str.regex_extract,
        "regex.extractAll": _str.regex_extract_all,
        "regex.replace": _str.regex_replace,
        "iban.valid": _ext.iban_valid,
        "domains.distance": _ext.domains_distance,
        "domains.lookalike": _ext.domains_lookalike,
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
        # cel-go optional library
        "hasValue": _opt.has_value,
        "value": _opt.value,
        "orValue": _opt.or_value,
        "or": _opt.or_,
        # cel-go lists extension
        "flatten": _ext.flatten,
        "distinct": _ext.distinct,
        "sum": _ext.sum_,
        "min": _ext.min_,
        "max": _ext.max_,
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
        # provenance: request.mentions(value); a text's links, as request.urls/emails
        "mentions": _prov.mentions,
        "urls": _prov.urls,
        "emails": _prov.emails,
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


COSTS: Final[Mapping[str, tuple[int, int]]] = MappingProxyType({
    # name: (fixed units, units per character or element of each string/list argument)
    # The URL, IP and CIDR parsers and checks take about 3-5 µs on short inputs, paths and
    # e-mails 1-3 µs, credentials.found (several RE2 searches) 4 µs even on an empty text.
    **dict.fromkeys(("ip", "isIP", "ip.isCanonical", "cidr", "isCIDR",
                     "credentials.found"), (1000, 1)),
    # percent-decoding and checking a URL: up to 200 ns a character (a 300 kB URL of
    # escapes took 60 ms in one call)
    **dict.fromkeys(("url", "isURL"), (1000, 16)),
    # paths split into segments and rejoined, e-mails matched by a long RE2 pattern: up to
    # 30 ns a character on the longest inputs
    **dict.fromkeys(("paths.clean", "paths.within", "paths.glob"), (500, 2)),
    **dict.fromkeys(("emails.domain", "emails.valid"), (500, 4)),
    # parseJSON builds a value for every few characters it reads
    "parseJSON": (200, 16),
    # Python loops over the elements (CEL comparisons, hashing: 50-300 ns each); before,
    # one unit an element: sets.contains of two lists of 4,000 numbers in a loop took
    # 0.58 s, max() of 8,000 numbers 0.22 s.
    **dict.fromkeys(("sets.contains", "sets.intersects", "sets.equivalent"), (CALL_COST, 8)),
    **dict.fromkeys(("sum", "min", "max"), (CALL_COST, 10)),
    "join": (CALL_COST, 4),
    # a clause of a format string: 0.3-0.7 µs (its nested values: ``cel_extra_cost``)
    "format": (CALL_COST, 16),
    # non-ASCII text goes through a translation table: 30 ns a character; a split into
    # code points builds a string object for each (20-50 ns)
    **dict.fromkeys(("lowerAscii", "upperAscii", "split"), (CALL_COST, 2)),
    # the provenance functions declare their own weight (lib_provenance)
    **{name: (_prov.provenance.cel_cost, 1)  # type: ignore[attr-defined]
       for name in ("provenance", "untrusted", "mentions")},
    # two or four passes of Python's re over the text (lib_provenance._LINK_CHARGE)
    **dict.fromkeys(("urls", "emails"), (CALL_COST, _prov._LINK_CHARGE)),
    **dict.fromkeys(
        ("strings.quote", "regex.extract", "regex.extractAll", "regex.replace", "iban.valid",
         "domains.distance", "domains.lookalike", "optional.of", "optional.none",
         "optional.ofNonZeroValue", "optional.@select", "optional.@index", "optional.@items",
         "optional.@flat", "optional.@list", "optional.@map", "cel.@pairsToMap",
         "cel.@mergeMaps", "charAt", "indexOf", "lastIndexOf", "replace",
         "substring", "trim", "reverse", "hasValue", "value", "orValue", "or", "flatten",
         "distinct", "find", "findAll", "getScheme", "getHost", "getHostname", "getPort",
         "getEscapedPath", "getQuery", "family", "isUnspecified", "isLoopback",
         "isLinkLocalMulticast", "isLinkLocalUnicast", "isGlobalUnicast", "isPrivate",
         "containsIP", "containsCIDR", "masked", "prefixLength", "isMask"),
        (CALL_COST, 1)),
})
"""What every library function costs (``limits.cost_of``), declared here for each one:
a function without an entry is refused at import, so none can be added uncharged. Work
that the arguments' lengths do not add up to is the function's ``cel_extra_cost`` (edit
distances, pairs of sets, nested values) or reported by the function itself
(``cel_with_work``: the matches of the regex functions)."""


def _weigh() -> None:
    names = set(FUNCTIONS) | set(METHODS)
    if names != set(COSTS):
        raise AssertionError(f"library functions without a declared cost: "
                             f"{sorted(names - set(COSTS))}; costs of no function: "
                             f"{sorted(set(COSTS) - names)}")
    for table in (FUNCTIONS, METHODS):
        for name, fn in table.items():
            fixed, per = COSTS[name]
            fn.cel_cost = fixed  # type: ignore[attr-defined]
            fn.cel_scan_cost = per  # type: ignore[attr-defined]


_weigh()

_U, _I, _C = "kubernetes.URL", "net.IP", "net.CIDR"

SIGNATURES: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {
        "strings.quote": ("strings.quote(string) -> string",),
        "sets.contains": ("sets.contains(list, list) -> bool",),
        "sets.intersects": ("sets.intersects(list, list) -> bool",),
        "sets.equivalent": ("sets.equivalent(list, list) -> bool",),
        "parseJSON": ("parseJSON(string) -> dyn",),
        "url": (f"url(string) -> {_U}",),
        "isURL": ("isURL(string) -> bool",),
        "ip": (f"ip(string) -> {_I}", f"{_C}.ip() -> {_I}"),
        "isIP": ("isIP(string) -> bool",),
        "ip.isCanonical": ("ip.isCanonical(string) -> bool",),
        "cidr": (f"cidr(string) -> {_C}",),
        "isCIDR": ("isCIDR(string) -> bool",),
        "paths.clean": ("paths.clean(string) -> string",),
        "paths.within": ("paths.within(string, string) -> bool",),
        "paths.glob": ("paths.glob(string, string) -> bool",),
        "emails.domain": ("emails.domain(string) -> string",),
        "emails.valid": ("emails.valid(string) -> bool",),
        "credentials.found": ("credentials.found(string) -> bool",),
        **_prov.SIGNATURES,
        "charAt": ("string.charAt(int) -> string",),
        "indexOf": ("string.indexOf(string) -> int", "string.indexOf(string, int) -> int"),
        "lastIndexOf": ("string.lastIndexOf(string) -> int",
                        "string.lastIndexOf(string, int) -> int"),
        "lowerAscii": ("string.lowerAscii() -> string",),
        "upperAscii": ("string.upperAscii() -> string",),
        "replace": ("string.replace(string, string) -> string",
                    "string.replace(string, string, int) -> string"),
        "split": ("string.split(string) -> list(string)",
                  "string.split(string, int) -> list(string)"),
        "substring": ("string.substring(int) -> string", "string.substring(int, int) -> string"),
        "trim": ("string.trim() -> string",),
        "join": ("list.join() -> string", "list.join(string) -> string"),
        "reverse": ("string.reverse() -> string", "list.reverse() -> list"),
        "format": ("string.format(list) -> string",),
        "find": ("string.find(string) -> string",),
        "findAll": ("string.findAll(string) -> list(string)",
                    "string.findAll(string, int) -> list(string)"),
        **{n: (f"{_U}.{n}() -> string",)
           for n in ("getScheme", "getHost", "getHostname", "getPort", "getEscapedPath")},
        "getQuery": (f"{_U}.getQuery() -> map(string, list(string))",),
        "family": (f"{_I}.family() -> int",),
        **{n: (f"{_I}.{n}() -> bool",)
           for n in ("isUnspecified", "isLoopback", "isLinkLocalMulticast",
                     "isLinkLocalUnicast", "isGlobalUnicast", "isPrivate")},
        "containsIP": (f"{_C}.containsIP({_I}) -> bool", f"{_C}.containsIP(string) -> bool"),
        "containsCIDR": (f"{_C}.containsCIDR({_C}) -> bool",
                         f"{_C}.containsCIDR(string) -> bool"),
        "masked": (f"{_C}.masked() -> {_C}",),
        "prefixLength": (f"{_C}.prefixLength() -> int",),
        "isMask": (f"{_C}.isMask() -> bool",),
        # Optionals are dyn to the checker (it has no optional type).
        "optional.of": ("optional.of(dyn) -> dyn",),
        "optional.none": ("optional.none() -> dyn",),
        "optional.ofNonZeroValue": ("optional.ofNonZeroValue(dyn) -> dyn",),
        "optional.@select": ("optional.@select(dyn, string) -> dyn",),
        "optional.@index": ("optional.@index(dyn, dyn) -> dyn",),
        "optional.@items": ("optional.@items(dyn) -> list",),
        "optional.@flat": ("optional.@flat(dyn) -> dyn",),
        # Variadic: calls with elements match no arity and are dyn to the checker.
        "optional.@list": ("optional.@list(string) -> list",),
        "optional.@map": ("optional.@map(string) -> map",),
        "hasValue": ("dyn.hasValue() -> bool",),
        "value": ("dyn.value() -> dyn",),
        "orValue": ("dyn.orValue(dyn) -> dyn",),
        "or": ("dyn.or(dyn) -> dyn",),
        "flatten": ("list.flatten() -> list", "list.flatten(int) -> list"),
        "distinct": ("list.distinct() -> list",),
        "sum": ("list.sum() -> dyn",),
        "min": ("list.min() -> dyn",),
        "max": ("list.max() -> dyn",),
        "cel.@pairsToMap": ("cel.@pairsToMap(list) -> map",),
        "cel.@mergeMaps": ("cel.@mergeMaps(list) -> map",),
        # An optional is dyn to the checker.
        "regex.extract": ("regex.extract(string, string) -> dyn",),
        "regex.extractAll": ("regex.extractAll(string, string) -> list(string)",),
        "regex.replace": ("regex.replace(string, string, string) -> string",
                          "regex.replace(string, string, string, int) -> string"),
        "iban.valid": ("iban.valid(string) -> bool",),
        "domains.distance": ("domains.distance(string, string) -> int",),
        "domains.lookalike": ("domains.lookalike(string, string) -> bool",
                              "domains.lookalike(string, list(string)) -> bool"),
    }
)
"""The types of the functions above, for the static checker (same form as
``stdlib.SIGNATURES``); docs/functions.md describes them for people."""
