"""Red team 17b: what a tool hands back holding an injected secret, in forms the result
scrubber reads other than as text: a ``bytearray`` (``bytes`` are decoded and searched;
a bytearray is read as its ``repr``, where a non-ASCII password is spelled in UTF-8
``\\x`` escapes: the escaped views find it) and a ``memoryview``. All held. And the scrubber's
caches by identity: a ``str`` subclass that lies in ``__eq__``/``__hash__``, the same
text object scrubbed by scrubbers of different values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agent_framework import AgentSession, tool

from guardrails.agent_framework import ScriptedChatClient
from guardrails.agent_framework._secrets import scrub_value
from guardrails.agent_framework.scripted import call, result_text, text
from guardrails.engine.scrub import Scrubber
from tests.af_support import STREAMING, agent_with, load_text, run
from tests.leak_support import Observer

PASSWORD = "pässwörd-Zq9vTx3mW2pLr8"
POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: api}
spec:
  match: {tools: ["echo_back"]}
  secrets:
    inject:
      password: {env: GR_RT17B_PASSWORD}
"""
SHAPE: list[str] = ["bytearray"]


@tool
def echo_back(note: str, password: str) -> Any:
    """Hands the injected password back in a binary form."""
    data = f"{note}: {password}".encode()
    if SHAPE[0] == "bytearray":
        return bytearray(data)
    if SHAPE[0] == "memoryview":
        return memoryview(data)
    return [bytearray(data)]


@STREAMING
@pytest.mark.parametrize("shape", ["bytearray", "memoryview", "list"])
async def test_a_binary_result_holding_the_secret_reaches_the_model_scrubbed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stream: bool, shape: str) -> None:
    monkeypatch.setenv("GR_RT17B_PASSWORD", PASSWORD)
    SHAPE[0] = shape
    obs = Observer()
    client = ScriptedChatClient([[call("echo_back", note="n")], [text("done")]])
    agent = agent_with(client, [echo_back], obs.guard(load_text(tmp_path, POLICY)))
    await run(agent, "go", stream=stream, session=AgentSession())
    [result] = client.tool_results()
    seen = result_text(result)
    escaped = repr(PASSWORD.encode())[2:-1]
    assert ("n: [REDACTED]" in seen) if shape != "memoryview" else "<memory at" in seen
    assert PASSWORD not in seen and escaped not in seen, seen
    assert PASSWORD.encode("utf-8").hex() not in seen


@pytest.mark.parametrize("value", [
    bytearray(PASSWORD.encode()), bytearray(b"x " + PASSWORD.encode() + b" y"),
    [bytearray(PASSWORD.encode("utf-8"))], {"k": bytearray(PASSWORD.encode())}])
def test_scrub_value_reads_a_bytearray_as_bytes(value: Any) -> None:
    out = scrub_value(value, Scrubber([PASSWORD]))
    assert repr(PASSWORD.encode())[2:-1] not in repr(out) and PASSWORD not in repr(out)


class Lying(str):
    """Equal to everything, one hash: a set or cache lookup by value would be fooled."""

    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return 0

    def __str__(self) -> str:
        return "harmless"


def test_a_str_subclass_is_scrubbed_by_its_data() -> None:
    scrub = Scrubber([PASSWORD])
    for text_ in (Lying(PASSWORD), Lying(f'{{"a": "{PASSWORD}"}}'),
                  Lying(PASSWORD.replace("ä", "\\u00e4")), Lying("x" * 3000 + PASSWORD)):
        out = scrub(text_)
        assert type(out) is str and PASSWORD not in out and "\\u00e4ss" not in out


def test_one_text_object_scrubbed_by_scrubbers_of_other_values() -> None:
    """The views of a text are cached by its identity; the values searched in them never
    are: one text, many scrubbers, each finds its own."""
    shared = '{"note": "alpha\\/beta-gamma-77", "k": "' + PASSWORD.replace("ä", "\\u00e4") + '", "z": "q\\/r"}'
    assert PASSWORD not in Scrubber([PASSWORD])(shared).replace("\\u00e4", "ä")
    assert "beta-gamma" not in Scrubber(["alpha/beta-gamma-77"])(shared)
    assert Scrubber(["nothing-here"])(shared) == shared
    assert PASSWORD not in Scrubber([PASSWORD])(shared).replace("\\u00e4", "ä")


PAD = "\\n" * 5_000
"""More escapes than are undone exactly (``scrub.MAX_ESCAPES``): the rough view decides."""
KEY = "sk-live-Zq9vTx3mW2pLr8Kd4"


@pytest.mark.parametrize("spelled", [
    "".join(f"\\u{ord(c):04x}" for c in KEY),
    "".join(f"\\u{ord(c):04X}" for c in KEY),
    "".join(f"\\x{ord(c):02x}" for c in KEY),
    KEY.replace("-", "\\u002d"),
    KEY.replace("-", "\\x2d").replace("/", "\\/"),
    "".join(f"\\U{ord(c):08x}" for c in KEY),
    repr(PASSWORD)[1:-1].encode("ascii", "backslashreplace").decode(),
], ids=["u", "U-hex", "x", "u-one", "x-one", "U8", "repr-ascii"])
@pytest.mark.parametrize("pad", [PAD, PAD + "\\q\\N\\8 tail \\ ", "&amp;" * 5_000])
def test_a_value_spelled_in_escapes_past_the_exact_bound_is_found(spelled: str,
                                                                  pad: str) -> None:
    """Padding a text past 4,096 escapes sent it to the rough view, which undid only the
    common ones: a key spelled in ``\\u`` or ``\\x`` escapes went out whole (red team
    17b). The rough view now undoes every JSON/``repr`` backslash escape at C speed."""
    secret = PASSWORD if spelled.startswith("p") else KEY
    scrub = Scrubber([secret])
    for text_ in (pad + spelled + pad, spelled + " " + pad, '{"k": "' + spelled + '"}' + pad):
        out = scrub(text_)
        assert spelled not in out


def test_a_text_past_the_exact_bound_without_the_value_is_kept() -> None:
    scrub = Scrubber([KEY])
    text_ = PAD + "".join(f"\\u{ord(c):04x}" for c in "harmless text") + "\\q\\N{x}\\"
    assert scrub(text_) == text_
