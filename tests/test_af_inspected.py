"""Promise 2: what is inspected is what runs, attacked in the framework's real loop.

The model's arguments reach the guard raw whenever the framework's own validation of them
failed (a repair is needed: ``"1,500"`` for a number). The rules must still judge the values
the tool receives after its validation coerced them, not the raw text: each attack below
pairs a value pydantic coerces with an argument that forces that raw path.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum
from pathlib import Path
from typing import Annotated, Any

import pytest
from agent_framework import tool
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call, result_text
from tests.af_support import STREAMING, agent_with, load_text, run

RAN: list[dict[str, Any]] = []


@pytest.fixture(autouse=True)
def _clear_ran() -> Any:
    RAN.clear()
    yield
    RAN.clear()


class Level(IntEnum):
    LOW = 1
    HIGH = 3


class Mode(StrEnum):
    NORMAL = "normal"
    WIRE = "wire"


class Payee(BaseModel):
    iban: str
    vip: bool = False


@tool
def transfer(recipient: str, amount: int, urgent: bool = False, account: int = 0,
             level: Level = Level.LOW, currency: str = "GBP", copies: int = 1,
             mode: Mode = Mode.NORMAL, fee: float = 0.0) -> str:
    """Transfer money."""
    RAN.append({"recipient": recipient, "amount": amount, "urgent": urgent, "account": account,
                "level": level, "currency": currency, "copies": copies, "mode": mode})
    del fee
    return f"sent {amount} to {recipient}"


@tool
def pay_payee(payee: Payee, amount: int) -> str:
    """Pay a structured payee."""
    RAN.append({"payee": payee, "amount": amount})
    return "paid"


class AliasArgs(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    recipient: Annotated[str, Field(alias="to")]
    amount: int


@tool(schema=AliasArgs)
def mail_money(recipient: str, amount: int) -> str:
    """Send money by mail (the schema calls the recipient ``to``)."""
    RAN.append({"recipient": recipient, "amount": amount})
    return "mailed"


POLICY = """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: transfers}
spec:
  match: {tools: ["transfer", "pay_payee", "mail_money"]}
  params: {blocked: [666, 13], known: ["bob", "carol"]}
  repairs:
    - name: amount-as-text
      when: 'has(args.amount) && type(args.amount) == string'
      set: {amount: 'int(args.amount.replace(",", ""))'}
  rules:
    - name: no-urgent
      when: 'has(args.urgent) && args.urgent == true'
      action: deny
      message: Urgent transfers need a phone call.
    - name: blocked-account
      when: 'has(args.account) && args.account in params.blocked'
      action: deny
      message: That account is blocked.
    - name: no-high-level
      when: 'has(args.level) && args.level == 3'
      action: deny
      message: High level needs a manager.
    - name: big-gbp
      when: 'has(args.currency) && args.currency == "GBP" && args.amount > 1000'
      action: deny
      message: Large sterling transfers are refused.
    - name: many-copies
      when: 'has(args.copies) && type(args.copies) == int && args.copies > 5'
      action: deny
      message: Too many copies.
    - name: no-wire
      when: 'has(args.mode) && args.mode == "wire"'
      action: deny
      message: No wires.
    - name: vip-payee
      when: 'has(args.payee) && has(args.payee.vip) && args.payee.vip == true'
      action: deny
      message: VIP payees are handled by hand.
    - name: fee-cap
      when: 'has(args.fee) && (args.fee > 100.0 || args.fee < 0.0)'
      action: deny
      message: Fee out of range.
    - name: known-recipient
      when: 'has(args.recipient) && !(args.recipient in params.known)'
      action: deny
      message: Unknown recipient.
"""


@pytest.fixture(scope="module")
def transfers(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return load_text(tmp_path_factory.mktemp("inspected"), POLICY)


async def _attempt(policies: Any, tool_obj: Any, stream: bool, **arguments: Any) -> str:
    client = ScriptedChatClient([[call(tool_obj.name, **arguments)]])
    agent = agent_with(client, [tool_obj], guard(policies))
    await run(agent, "pay bob", stream=stream)
    return result_text(client.tool_results()[0])


# Each attack: a value pydantic coerces into one a rule forbids, plus "1,500"-style text that
# makes the framework hand the guard the raw arguments.
COERCIONS = [
    pytest.param({"urgent": "true"}, "Urgent transfers", id="bool-string-true"),
    pytest.param({"urgent": "yes"}, "Urgent transfers", id="bool-string-yes"),
    pytest.param({"urgent": 1}, "Urgent transfers", id="bool-from-int"),
    pytest.param({"account": "666"}, "account is blocked", id="int-string"),
    pytest.param({"account": 13.0}, "account is blocked", id="float-to-int"),
    pytest.param({"copies": 50.0}, "Too many copies", id="float-to-int-type-check"),
    pytest.param({"level": "3"}, "High level", id="int-enum-from-string"),
    pytest.param({"mode": "wire"}, "No wires", id="str-enum"),
]


@STREAMING
@pytest.mark.parametrize(("coerced", "message"), COERCIONS)
async def test_rules_judge_coerced_values_after_a_repair(transfers: Any, stream: bool,
                                                         coerced: dict[str, Any],
                                                         message: str) -> None:
    result = await _attempt(transfers, transfer, stream, recipient="bob", amount="1,0", **coerced)
    assert RAN == []
    assert "denied by policy" in result and message in result


@STREAMING
@pytest.mark.parametrize(("coerced", "message"), COERCIONS)
async def test_rules_judge_coerced_values_without_a_repair(transfers: Any, stream: bool,
                                                           coerced: dict[str, Any],
                                                           message: str) -> None:
    result = await _attempt(transfers, transfer, stream, recipient="bob", amount=10, **coerced)
    assert RAN == []
    assert "denied by policy" in result and message in result


@STREAMING
async def test_a_default_the_rule_reads_as_missing_is_filled_in(transfers: Any,
                                                                stream: bool) -> None:
    # currency is omitted: the tool runs with its default "GBP", so the rule must see it.
    result = await _attempt(transfers, transfer, stream, recipient="bob", amount="5,000")
    assert RAN == []
    assert "Large sterling transfers" in result


@STREAMING
async def test_nested_model_fields_are_judged_as_validated(transfers: Any, stream: bool) -> None:
    result = await _attempt(transfers, pay_payee, stream,
                            payee={"iban": "GB1", "vip": "on"}, amount="1,0")
    assert RAN == []
    assert "VIP payees" in result


@STREAMING
async def test_an_alias_cannot_smuggle_a_different_recipient(transfers: Any,
                                                             stream: bool) -> None:
    # The rule reads ``recipient``; pydantic takes the alias ``to`` first and ignores the rest.
    result = await _attempt(transfers, mail_money, stream,
                            recipient="bob", to="mallory", amount="1,0")
    assert RAN == []
    assert "Unknown recipient" in result


@STREAMING
async def test_extra_fields_that_never_run_are_not_judged(transfers: Any, stream: bool) -> None:
    # An extra field is dropped by validation: the rules read what runs, without it.
    result = await _attempt(transfers, transfer, stream,
                            recipient="bob", amount="1,0", urgent_note="x")
    assert result == "sent 10 to bob"
    assert RAN == [{"recipient": "bob", "amount": 10, "urgent": False, "account": 0,
                    "level": Level.LOW, "currency": "GBP", "copies": 1, "mode": Mode.NORMAL}]


@STREAMING
async def test_the_tool_receives_exactly_the_validated_values(transfers: Any,
                                                              stream: bool) -> None:
    result = await _attempt(transfers, transfer, stream,
                            recipient="bob", amount="1,0", urgent="false", level="1")
    assert result == "sent 10 to bob"
    (ran,) = RAN
    assert ran["urgent"] is False and ran["amount"] == 10 and type(ran["amount"]) is int
    assert ran["level"] is Level.LOW


@STREAMING
@pytest.mark.parametrize("fee", ["nan", "-inf", "Infinity", "-Infinity"])
@pytest.mark.parametrize("amount", ["1,0", 10])
async def test_validation_cannot_make_a_number_no_rule_can_judge(
        transfers: Any, stream: bool, fee: str, amount: Any) -> None:
    result = await _attempt(transfers, transfer, stream, recipient="bob", amount=amount, fee=fee)
    assert RAN == []
    assert "could not evaluate" in result or "Fee out of range" in result


@STREAMING
async def test_arguments_that_fail_validation_never_run(transfers: Any, stream: bool) -> None:
    result = await _attempt(transfers, transfer, stream,
                            recipient="bob", amount="1,0", urgent="maybe")
    assert RAN == []
    assert result.startswith("Error: Argument parsing failed")


async def test_a_repair_that_validation_undoes_is_refused(tmp_path: Path) -> None:
    # The repair keeps writing a string; validation keeps turning it into an int: the
    # arguments never settle, and the guard blocks the call rather than guess.
    policies = load_text(tmp_path, """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: flip}
spec:
  match: {tools: ["transfer"]}
  repairs:
    - name: amount-as-text
      when: 'type(args.amount) == int'
      set: {amount: 'string(args.amount + 1)'}
""")
    result = await _attempt(policies, transfer, False, recipient="bob", amount=10)
    assert RAN == []
    assert "could not evaluate" in result


@tool
def call_service(endpoint: str, api_key: str, retries: int = 0) -> str:
    """Call a service (the key is injected by policy)."""
    RAN.append({"endpoint": endpoint, "api_key": api_key, "retries": retries})
    return "ok"


INJECTING = """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: service}
spec:
  match: {tools: ["call_service"]}
  secrets:
    inject:
      api_key: {env: INSPECTED_TEST_KEY}
  rules:
    - name: retries
      when: 'args.retries > 3'
      action: deny
      message: Too many retries.
"""


@STREAMING
async def test_injected_arguments_are_validated_and_rules_see_coerced_others(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stream: bool) -> None:
    monkeypatch.setenv("INSPECTED_TEST_KEY", "k-123456")
    policies = load_text(tmp_path, INJECTING)
    denied = await _attempt(policies, call_service, stream, endpoint="e", retries="9")
    assert RAN == [] and "Too many retries" in denied
    # The model's own value for the injected argument never runs, nor is it judged.
    allowed = await _attempt(policies, call_service, stream, endpoint="e", retries="2",
                             api_key="model-chosen")
    assert allowed == "ok"
    assert RAN == [{"endpoint": "e", "api_key": "k-123456", "retries": 2}]


def test_same_json_tells_apart_what_python_equates() -> None:
    from types import MappingProxyType

    from guardrails.agent_framework._arguments import same_json

    assert not same_json({"a": True}, {"a": 1})
    assert not same_json({"a": 1}, {"a": 1.0})
    assert not same_json({"a": "1"}, {"a": 1})
    assert not same_json({"a": [1]}, {"a": [1, 2]})
    assert not same_json({"a": 1}, {"b": 1})
    assert not same_json({"a": {"b": False}}, {"a": {"b": 0}})
    assert same_json({"a": [1, {"b": "x"}]}, MappingProxyType({"a": (1, {"b": "x"})}))


Lowered = Annotated[str, StringConstraints(strip_whitespace=True, to_lower=True)]


@tool
def notify(who: Lowered, amount: int) -> str:
    """Notify someone (the name is normalised by validation)."""
    RAN.append({"who": who, "amount": amount})
    return f"notified {who}"


NOTIFY = """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: notify}
spec:
  match: {tools: ["notify"]}
  repairs:
    - name: amount-as-text
      when: 'type(args.amount) == string'
      set: {amount: 'int(args.amount.replace(",", ""))'}
  rules:
    - name: not-mallory
      when: 'args.who == "mallory"'
      action: deny
      message: Never mallory.
"""


@STREAMING
@pytest.mark.parametrize("who", ["MALLORY", " mallory ", "Mallory\t"])
@pytest.mark.parametrize("amount", ["1,0", 10])
async def test_a_normalising_validator_is_judged_after_normalising(
        tmp_path: Path, stream: bool, who: str, amount: Any) -> None:
    policies = load_text(tmp_path, NOTIFY)
    result = await _attempt(policies, notify, stream, who=who, amount=amount)
    assert RAN == []
    assert "Never mallory" in result


@tool
def call_strict(endpoint: str, api_key: Annotated[str, Field(min_length=40)],
                retries: int = 0) -> str:
    """Call a service whose key has a minimum length (the key is injected by policy)."""
    RAN.append({"endpoint": endpoint, "api_key": api_key, "retries": retries})
    return "ok"


STRICT_INJECTING = INJECTING.replace('"call_service"', '"call_strict"')


@STREAMING
async def test_an_injected_argument_with_constraints_is_validated_with_the_real_secret(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stream: bool) -> None:
    key = "k-" + "7" * 46
    monkeypatch.setenv("INSPECTED_TEST_KEY", key)
    policies = load_text(tmp_path, STRICT_INJECTING)
    assert await _attempt(policies, call_strict, stream, endpoint="e", retries=2) == "ok"
    assert [{"endpoint": "e", "api_key": key, "retries": 2}] == RAN
    RAN.clear()
    # A value validation would change is refused rather than run unjudged.
    refused = await _attempt(policies, call_strict, stream, endpoint="e", retries=2.0)
    assert RAN == [] and "could not evaluate" in refused
    denied = await _attempt(policies, call_strict, stream, endpoint="e", retries=9)
    assert RAN == [] and "Too many retries" in denied


@STREAMING
async def test_a_real_secret_that_fails_validation_is_not_shown(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stream: bool) -> None:
    monkeypatch.setenv("INSPECTED_TEST_KEY", "short-SECRET-value")
    policies = load_text(tmp_path, STRICT_INJECTING)
    client = ScriptedChatClient([[call("call_strict", endpoint="e", retries=1)]])
    agent = agent_with(client, [call_strict], guard(policies),
                       include_detailed_errors=True)
    await run(agent, "call", stream=stream)
    result = result_text(client.tool_results()[0])
    assert RAN == []
    assert result.startswith("Error: Argument parsing failed"), result
    assert "short-SECRET-value" not in client.model_saw(own_calls=True)


# -- the property: for any arguments, what runs is what the rules read --------------------

RECEIVED: list[dict[str, Any]] = []


@tool
def typed(flag: bool = False, count: int = 0, ratio: float = 1.0, name: str = "",
          level: Level = Level.LOW, mode: Mode = Mode.NORMAL,
          tags: Annotated[list[int] | None, Field()] = None,
          payee: Payee | None = None) -> str:
    """A tool whose parameters pydantic coerces in every way it can."""
    RECEIVED.append({"flag": flag, "count": count, "ratio": ratio, "name": name,
                     "level": level, "mode": mode, "tags": tags, "payee": payee})
    return "ran"


TYPED = """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: typed}
spec:
  match: {tools: ["typed"]}
  repairs:
    - name: count-as-text
      when: 'has(args.count) && type(args.count) == string && args.count.contains(",")'
      set: {count: 'args.count.replace(",", "")'}
  rules:
    - name: never
      when: 'false'
      action: deny
"""

_scalars = st.one_of(
    st.booleans(), st.integers(-5, 5), st.floats(-5, 5, allow_nan=False),
    st.sampled_from(["true", "false", "yes", "off", "1", "0", "3", "2.0", "1,0", "normal",
                     "wire", "", " x ", "nan", "1e3"]),
    st.none())
_values = st.one_of(_scalars, st.lists(_scalars, max_size=3),
                    st.fixed_dictionaries({"iban": st.sampled_from(["GB1", 1])},
                                          optional={"vip": _scalars}))
_coercible = {
    "flag": st.sampled_from([True, False, "true", "false", "yes", "off", "1", "0", 1, 0]),
    "count": st.sampled_from([1, 3, "3", "1,0", 2.0, "2", "1,2,3"]),
    "ratio": st.sampled_from([1, 1.5, "2.5", "1e3", 3, "-0.5"]),
    "name": st.sampled_from([" x ", "bob", "", "ünï"]),
    "level": st.sampled_from([1, 3, "3", "1", 3.0]),
    "mode": st.sampled_from(["normal", "wire"]),
    "tags": st.lists(st.sampled_from(["1", 2, 3.0, True]), max_size=3),
    "payee": st.fixed_dictionaries({"iban": st.just("GB1")},
                                   optional={"vip": st.sampled_from(["on", "no", True, 0])}),
    "extra": _values,
}
_typed_arguments = st.dictionaries(
    st.sampled_from(sorted(_coercible)), st.none(), max_size=6).flatmap(
    lambda keys: st.fixed_dictionaries(
        {k: st.one_of(_coercible[k], _values) if k == "extra" else
         st.one_of(_coercible[k], _coercible[k], _coercible[k], _values) for k in keys}))


@given(arguments=_typed_arguments)
@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
async def test_what_runs_is_what_the_rules_read_for_any_arguments(
        tmp_path: Path, arguments: dict[str, Any]) -> None:
    from guardrails.agent_framework._arguments import json_view, same_json
    from tests.af_support import RecordingTelemetry, guarded

    policies = _typed_policies(tmp_path)
    RECEIVED.clear()
    telemetry = RecordingTelemetry()
    client = ScriptedChatClient([[call("typed", **arguments)]])
    agent = agent_with(client, [typed], guarded(policies, telemetry))
    await agent.run("go")
    if RECEIVED:
        (received,) = RECEIVED
        (decision,) = telemetry.decisions
        assert same_json(json_view(received), decision.arguments), (arguments, received)


_TYPED_CACHE: dict[str, Any] = {}


def _typed_policies(tmp_path: Path) -> Any:
    if "policies" not in _TYPED_CACHE:
        _TYPED_CACHE["policies"] = load_text(tmp_path, TYPED)
    return _TYPED_CACHE["policies"]


@STREAMING
async def test_a_rule_that_errors_on_raw_text_judges_the_coerced_value(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stream: bool) -> None:
    # The key is missing (it is injected), so the guard gets the raw arguments: "2" > 3 is
    # an error on the raw text, but the tool receives 2, which the rule allows.
    monkeypatch.setenv("INSPECTED_TEST_KEY", "k-123456")
    policies = load_text(tmp_path, INJECTING)
    assert await _attempt(policies, call_service, stream, endpoint="e", retries="2") == "ok"
    assert RAN == [{"endpoint": "e", "api_key": "k-123456", "retries": 2}]
