"""Properties of red team 20's escape families (promise 5): random secrets, spelled by any
chain of up to three serializers of the families the scrubber reads (red team 20's and
the earlier ones: JSON, ``repr``, HTML, percent-encoding), never come out readable, neither
from the scrubber nor from the framework's real loop; and ordinary texts in which those
families' trigger characters are common (prose with ``=`` signs, CSV and SQL with doubled
quotes, code with octal numbers, wrapped paragraphs) come out unchanged.
"""

from __future__ import annotations

import html
import json
import logging
import quopri
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agent_framework import AgentSession, tool
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import guardrails
from guardrails.agent_framework import ScriptedChatClient
from guardrails.agent_framework.scripted import call, text
from guardrails.engine.scrub import Scrubber
from tests.af_support import agent_with, load_text, run
from tests.escape_families import FAMILIES, decoded
from tests.leak_support import Observer, response_places, strings_in

ROOT = Path(__file__).resolve().parent.parent

ESCAPERS: dict[str, Callable[[str], str]] = {
    **FAMILIES,
    "json": lambda v: json.dumps(v)[1:-1],
    "json-utf8": lambda v: json.dumps(v, ensure_ascii=False)[1:-1],
    "repr": lambda v: repr(v)[1:-1],
    "html": html.escape,
    "percent": lambda v: urllib.parse.quote(v, safe=""),
}

_CHARS = st.sampled_from([*"aZ09/+=&<>\"'\\-_ %;#.?", "é", "ß", "€", "ü", "\n"])
SECRETS = st.text(_CHARS, min_size=8, max_size=20).filter(
    lambda s: s.strip() == s and len(set(s)) > 4 and len(set(s) - set(" \n")) > 4)
CHAINS = st.lists(st.sampled_from(list(ESCAPERS)), min_size=1, max_size=3)
AROUND = st.text(st.sampled_from([*"ab =&\\\"'\n%<", "é"]), max_size=5)

QP_WRAPPED = "quoted-printable-wrapped"


def _spelled(secret: str, chain: list[str], around: str, *, check: bool = True) -> str:
    """The chain applied; with ``check``, inside a property only: ``assume`` skips a chain
    that cannot spell the secret."""
    text_ = around + secret + around
    for name in chain:
        if not check:
            text_ = ESCAPERS[name](text_)
            continue
        # A space right after a line break reads as indentation, and is removed with it:
        # a wrapped text's own spaces (a value's, CSS's ``\\41 ``) are not read back
        # (docs/security-model.md, promise 5, accepted limits).
        assume(not (name.startswith("wrapped") and " " in text_))
        try:
            text_ = ESCAPERS[name](text_)
        except UnicodeEncodeError:  # cp1252 has no such character: not this chain
            assume(False)
    return text_


@settings(max_examples=300, deadline=None)
@given(secret=SECRETS, chain=CHAINS, around=AROUND)
def test_a_secret_through_any_three_serializers_is_not_in_any_decoding(
        secret: str, chain: list[str], around: str) -> None:
    text_ = _spelled(secret, chain, around)
    out = Scrubber([secret])(text_)
    assert secret not in decoded(out, levels=len(chain)), (chain, text_[:200], out[:200])


@pytest.mark.parametrize("chain", [["sql"], ["sql", "shell"], ["shell", "sql"], ["csv"]])
def test_a_backslash_quote_in_sql_is_found(chain: list[str]) -> None:
    """Found by this file's property (fourteenth session): the secret ``\\'00009;`` in a
    SQL literal, ``('\\''00009;')``, then shell-quoted, went out readable: the plain
    family read the literal's quote, the backslash and the doubled quote as a shell's
    escaped quote. Doubled quotes are a view of their own now (``scrub._DOUBLED``)."""
    secret = "\\'00009;"
    out = Scrubber([secret])(_spelled(secret, chain, "", check=False))
    assert "00009" not in out, out


@pytest.mark.parametrize("secret", ["000=09;<", "ab=cdef;<x", "abcé;<xyz"])
def test_a_value_needing_escapes_quoted_printable_wrapped_three_times(secret: str) -> None:
    """Found by the property in CI (session 8): two levels down, the outer layer's soft
    line break inside a line break reads ``=\\r\\r\\n``, a soft line break to ``a2b_qp``."""
    text_ = secret
    for _ in range(3):
        text_ = ESCAPERS[QP_WRAPPED](text_)
    assert secret not in decoded(Scrubber([secret])(text_), levels=3)



def test_a_soft_line_break_wrapped_over_lines_is_read() -> None:
    """Found by the property with 2,000 examples (session 9): wrapping a quoted-printable
    text splits a soft line break into ``=``, a break, the indentation and a break; a
    reader deletes the white space at the line's end (RFC 2045), then joins the lines."""
    secret = "00009;<="
    text_ = ESCAPERS["wrapped-indented"](ESCAPERS[QP_WRAPPED](secret))
    assert "=\r\n    \r\n" in text_
    assert secret not in decoded(Scrubber([secret])(text_), levels=2)


@pytest.mark.parametrize(("secret", "lone"), [
    ("Zq9x\n.\nw8&y", "\n=2E\n"),    # a line that is only a dot
    ("Zq9x \nw8&y", "=20\n"),         # a space at a line's end
    ("Zq9x\t\r\nw8&y", "=09\r\n"),   # a tab at a line's end
    ("Zq9x&w8 ", "=20"),               # a space at the text's end
])
def test_a_lone_quoted_printable_byte_at_a_line_end_is_read(secret: str, lone: str) -> None:
    """An accepted limit until session 10 (found by the property at 10,000 examples):
    ``quopri`` writes a line that is only a dot as ``=2E`` and white space at a line's
    end as ``=20`` or ``=09``, a byte alone that the lone-byte rule did not read; a2b_qp
    reads it."""
    mailed = quopri.encodestring(secret.encode()).decode()
    assert lone in mailed
    for spelled in (mailed, ESCAPERS[QP_WRAPPED](secret)):
        assert secret not in decoded(Scrubber([secret])(spelled), levels=1), spelled


SPELLING: list[Any] = [lambda s: s]


@tool
def read_inbox(folder: str, token: str) -> Any:
    """Returns the injected token spelled as ``SPELLING`` says, in a dict result."""
    return {"folder": folder, "source": SPELLING[0](token)}


POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: inbox}
spec:
  match: {tools: ["read_inbox"]}
  secrets:
    inject:
      token: {env: GR_RT20_TOKEN}
"""


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(secret=SECRETS.map(lambda s: "Tk" + s),
       chain=st.lists(st.sampled_from(list(ESCAPERS)), min_size=1, max_size=2), around=AROUND)
async def test_in_the_real_loop_no_spelling_reaches_the_model_response_or_session(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        secret: str, chain: list[str], around: str) -> None:
    _spelled(secret, chain, around)  # the chain spells this secret (cp1252 can)
    caplog.set_level(logging.DEBUG)
    caplog.clear()
    monkeypatch.setenv("GR_RT20_TOKEN", secret)
    SPELLING[0] = lambda s: _spelled(s, chain, around, check=False)  # in the tool
    obs = Observer()
    client = ScriptedChatClient([[call("read_inbox", folder="inbox")], [text("done")]])
    agent = agent_with(client, [read_inbox], obs.guard(load_text(tmp_path, POLICY)))
    session = AgentSession()
    response = await run(agent, "read", session=session)
    places = {"model": client.model_saw(), **response_places(response, session),
              **obs.places(caplog)}
    levels = len(chain) + 1  # and the JSON of the dict result: three levels in all
    assert [s[:200] for v in places.values() for s in strings_in(v)
            if secret in decoded(s, levels=levels)] == [], chain


# --- ordinary texts stay as they are ------------------------------------------------------

_WORDS = ["the", "cost", "is", "width", "mode", "x", "y", "name", "O'Brien", "note", "value",
          "id", "total", "ok", "Café", "naïve"]
_WORD = st.sampled_from(_WORDS)
_NUMBER = st.integers(0, 99999).map(str) | st.integers(0, 0o777).map(lambda n: f"0{n:o}")
_PROSE = st.lists(st.one_of(_WORD, _NUMBER, st.sampled_from(
    ["=", "==", " = ", "a=b", "x=10", "=3", "(=)", "\n", "\r\n", "  ", ",", "%", "50%"])),
    max_size=40).map(" ".join)
_CSV_FIELD = st.lists(_WORD | _NUMBER, max_size=4).map(" ".join).map(
    lambda f: '"' + f.replace("'", '"') + '"' if "'" in f else f)
_CSV = st.lists(st.lists(_CSV_FIELD | st.sampled_from(['""', '"a ""b"" c"', "''"]),
                         min_size=1, max_size=5).map(",".join), max_size=6).map("\n".join)
_CODE = st.lists(st.sampled_from([
    "int mode = 0755;", "chmod(path, 0644);", "char c = '\\101';", "printf(\"%o\\n\", n);",
    "x = '\\0';", "s = \"\\\\d+\";", "if (a == b) { c = ''; }", "q = \"SELECT 'it''s'\";",
    "echo 'it'\\''s'", "y = 0o17 + 012;", "/* width=100 */"]), max_size=12).map("\n".join)
ORDINARY = st.one_of(_PROSE, _CSV, _CODE)


@pytest.fixture(scope="module", name="exfiltration")
def _exfiltration() -> guardrails.PolicySet:
    return guardrails.load(ROOT / "policies" / "exfiltration.yaml")


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text_=ORDINARY, secret=SECRETS.map(lambda s: "‡" + s))
def test_ordinary_texts_are_unchanged(exfiltration: guardrails.PolicySet, text_: str,
                                      secret: str) -> None:
    """Nothing secret in them: the scrubber and the library's redact patterns change
    nothing, as they are and as a JSON result carries them."""
    scrub = Scrubber([secret, "AKIAIOSFODNN7EXAMPLE"], exfiltration.redact)
    assert scrub(text_) == text_
    as_json = json.dumps({"text": text_})
    assert scrub(as_json) == as_json
