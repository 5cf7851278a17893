"""regex.extract/replace and two-variable comprehensions in real policies through the
production engine, on the generated-code and closure backends: what a policy author writes
for host extraction and per-entry checks, and what a malformed call does to it."""

from __future__ import annotations

from pathlib import Path

import pytest

import guardrails

POLICY = """\
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: fetch}
spec:
  match: {tools: [fetch]}
  params: {allowed: [docs.example.com, api.example.com]}
  rules:
    - name: host-not-allowed
      when: >-
        !(regex.extract(args.url, '^[a-zA-Z][a-zA-Z0-9+.-]*://([^/:?#@]+)(?:[:/?#]|$)')
          .orValue('').lowerAscii() in params.allowed)
      action: deny
      message: host not allowed
    - name: secret-header
      when: 'args.?headers.orValue({}).exists(k, v, k.lowerAscii() == "authorization"
             && regex.replace(v, "\\\\s+", " ").startsWith("Bearer "))'
      action: require_approval
    - name: many-hosts
      when: >-
        args.?mirrors.orValue([]).transformList(i, m, i < 10,
          regex.extract(m, '://([^/]+)').orValue('')).exists(h, !(h in params.allowed))
      action: deny
"""


@pytest.fixture(params=["compiled", "closures"])
def policies(request: pytest.FixtureRequest, tmp_path: Path) -> guardrails.PolicySet:
    f = tmp_path / "fetch.yaml"
    f.write_text(POLICY, encoding="utf-8")
    return guardrails.load(f, backend=request.param)


def fired(decision: guardrails.Decision) -> list[str]:
    return sorted(r.rule for r in decision.rules)


@pytest.mark.parametrize("url", [
    "https://docs.example.com/a", "HTTPS://API.EXAMPLE.COM", "https://docs.example.com:443/x",
])
def test_allowed_hosts_pass(policies: guardrails.PolicySet, url: str) -> None:
    d = policies.evaluate("fetch", {"url": url})
    assert d.effect.value == "allow" and d.errors == (), (url, d)


@pytest.mark.parametrize("url", [
    "https://docs.example.com.evil.org/", "https://evil.org/?docs.example.com",
    "https://docs.example.com@evil.org/", "docs.example.com", "", "https://evil.org#docs",
])
def test_other_hosts_are_denied(policies: guardrails.PolicySet, url: str) -> None:
    d = policies.evaluate("fetch", {"url": url})
    assert d.effect.value == "deny" and fired(d) == ["host-not-allowed"], (url, d)


def test_a_malformed_url_argument_fails_closed(policies: guardrails.PolicySet) -> None:
    d = policies.evaluate("fetch", {"url": 42})
    assert d.effect.value == "deny" and d.errors, d


def test_two_variable_exists_over_a_map_argument(policies: guardrails.PolicySet) -> None:
    ok = "https://api.example.com/"
    d = policies.evaluate("fetch", {"url": ok, "headers": {"Accept": "x",
                                                           "AUTHORIZATION": "Bearer\t\tx"}})
    assert d.effect.value == "require_approval" and fired(d) == ["secret-header"], d
    d = policies.evaluate("fetch", {"url": ok, "headers": {"Accept": "Bearer x"}})
    assert d.effect.value == "allow", d


def test_transform_list_with_filter_over_indices(policies: guardrails.PolicySet) -> None:
    ok = "https://api.example.com/"
    good = [ok] * 10
    assert policies.evaluate("fetch", {"url": ok, "mirrors": good}).effect.value == "allow"
    bad = [*good[:3], "https://evil.org/"]
    d = policies.evaluate("fetch", {"url": ok, "mirrors": bad})
    assert d.effect.value == "deny" and fired(d) == ["many-hosts"], d
    # the filter keeps the first ten mirrors only
    d = policies.evaluate("fetch", {"url": ok, "mirrors": [*good, "https://evil.org/"]})
    assert d.effect.value == "allow", d


def test_a_misused_macro_is_a_load_error_with_a_position(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(POLICY.replace("exists(k, v,", "exists(k, k,"), encoding="utf-8")
    with pytest.raises(guardrails.PolicyError, match="must differ"):
        guardrails.load(f)
