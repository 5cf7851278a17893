"""Secrets on every exit path, attacked in the framework's real loop (issue 10, section 1).

Each test puts a secret where a tool, the model or a policy could send it out, runs a
guarded agent (scripted model, real OpenTelemetry SDK, real logging at DEBUG), and checks
that no spelling of the secret (raw, JSON-escaped, repr) is in what the model received,
the response, the session, the logs, the spans and metrics, the decision log or the
decisions' records.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_framework import AgentSession, Content, FunctionTool, tool
from agent_framework.exceptions import UserInputRequiredException

import guardrails
from guardrails.agent_framework import GuardedToolAbort, GuardedToolError, ScriptedChatClient
from guardrails.agent_framework import _function as function_module
from guardrails.agent_framework.scripted import call
from tests.af_support import STREAMING, agent_with, run
from tests.leak_support import Observer, leaks, response_places

DATA = Path(__file__).parent / "data" / "leaks"

# Quotes, a backslash, a newline, non-ASCII and an astral character: every serializer
# escapes some of them.
SECRET = "sk-\"quoted\"\\back'slash\nnew-line-ñ-€-𝄞-7Q3"
PIN = "pin-'9\"1\\7-ü-4401"
SEEN: list[str] = []
BEHAVIOUR: dict[str, Callable[[str], Any]] = {}


@tool(name="vault_call")
def vault_call(mode: str, api_key: str) -> Any:
    """Calls a vault API with an injected key and misbehaves as the test says."""
    SEEN.append(api_key)
    return BEHAVIOUR[mode](api_key)


@tool(name="note")
def note(text: str) -> str:
    """Writes a note."""
    return f"noted {len(text)} characters"


async def _open_note(**arguments: Any) -> str:
    return "noted"


# A schema that accepts any argument name (as an MCP tool's may): names reach the guard.
open_note = FunctionTool(func=_open_note, name="note", description="Writes a note.",
                         input_model={"type": "object", "properties": {"text": {"type": "string"}},
                                      "additionalProperties": True})


@tool(name="login")
def login(user: str, pin: str, memo: str = "", copy_pin: bool = False) -> str:
    """Logs a user in."""
    return f"welcome {user}"


@pytest.fixture(scope="module")
def policies() -> guardrails.PolicySet:
    return guardrails.load(DATA)


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    monkeypatch.setenv("GR_LEAK_KEY", SECRET)
    caplog.set_level(logging.DEBUG)
    SEEN.clear()
    BEHAVIOUR.clear()
    yield
    BEHAVIOUR.clear()


def _everywhere(obs: Observer, caplog: pytest.LogCaptureFixture, client: ScriptedChatClient,
                response: Any, session: Any, secret: str = SECRET) -> list[str]:
    return leaks(secret, model=[m.to_dict() for batch in client.received for m in batch
                                if m.role != "assistant"],
                 **response_places(response, session), **obs.places(caplog))


async def _run_vault(policies: guardrails.PolicySet, behaviour: Callable[[str], Any],
                     caplog: pytest.LogCaptureFixture, *, stream: bool = False,
                     **options: Any) -> tuple[list[str], ScriptedChatClient]:
    BEHAVIOUR["x"] = behaviour
    obs = Observer()
    client = ScriptedChatClient([[call("vault_call", mode="x")]])
    agent = agent_with(client, [vault_call], obs.guard(policies), **options)
    session = AgentSession()
    response = await run(agent, "use the vault", stream=stream, session=session)
    assert SEEN == [SECRET]  # the tool got the real key
    return _everywhere(obs, caplog, client, response, session), client


# -- every field of every content a tool returns ------------------------------------------

def _approval_like(s: str) -> Content:
    return Content.from_function_approval_request(
        id="r1", function_call=Content.from_function_call(call_id="c1", name="vault_call",
                                                          arguments={"k": s}))


CONTENTS: dict[str, Callable[[str], Any]] = {
    "text": lambda s: Content.from_text(f"key {s}"),
    "signed-link-uri": lambda s: Content.from_uri(f"https://files.example/a?sig={s}",
                                                  media_type="text/plain"),
    "data-uri": lambda s: Content.from_uri(f"data:text/plain,{s}", media_type="text/plain"),
    "error-fields": lambda s: Content.from_error(message=f"m {s}", error_code=s,
                                                 error_details=f"d {s}"),
    "hosted-file-id": lambda s: Content.from_hosted_file(s),
    "additional-properties": lambda s: Content.from_text(
        "ok", additional_properties={"k": s, s: "as a key", "deep": [{"x": s}]}),
    "nested-function-result": lambda s: Content.from_function_result(call_id="c9", result=s),
    "code-interpreter-outputs": lambda s: Content.from_code_interpreter_tool_result(
        outputs=[Content.from_text(s)]),
    "function-call-arguments": lambda s: Content.from_function_call(
        call_id="c9", name="other", arguments={"a": s}),
    "function-call-arguments-text": lambda s: Content.from_function_call(
        call_id="c9", name="other", arguments=f'{{"a": "{s}"}}'),
    "approval-request": _approval_like,
    "list-of-contents": lambda s: [Content.from_text("a"), Content.from_error(error_code=s)],
    "annotation": lambda s: Content.from_text("x", annotations=[{"type": "citation",
                                                                "url": s, "title": s}]),
}


@pytest.mark.parametrize("kind", sorted(CONTENTS))
async def test_every_field_of_a_returned_content_is_scrubbed(
        policies: guardrails.PolicySet, caplog: pytest.LogCaptureFixture, kind: str) -> None:
    found, _ = await _run_vault(policies, CONTENTS[kind], caplog)
    assert found == []


def test_unknown_content_fields_are_scrubbed_too() -> None:
    """A field a framework release adds is walked like the others (nothing is listed)."""
    from guardrails.agent_framework._secrets import Scrubber, scrub_content

    item = Content.from_text("x")
    item.some_future_field = {"nested": [f"value {SECRET}"]}  # type: ignore[attr-defined]
    item.raw_representation = object()
    out = scrub_content(item, Scrubber([SECRET]))
    assert out.some_future_field == {"nested": ["value [REDACTED]"]}  # type: ignore[attr-defined]
    assert out.raw_representation is None
    assert item.some_future_field == {"nested": [f"value {SECRET}"]}  # type: ignore[attr-defined]


def test_a_self_referencing_content_is_bounded() -> None:
    from guardrails.agent_framework._secrets import Scrubber, scrub_content

    item = Content.from_code_interpreter_tool_result(outputs=[])
    item.outputs = [item]
    out = scrub_content(item, Scrubber([SECRET]))  # terminates
    assert out is not item


# -- serialized forms -----------------------------------------------------------------------

SERIALIZED: dict[str, Callable[[str], Any]] = {
    "dict": lambda s: {"token": s},
    "dict-key": lambda s: {s: 1},
    "list": lambda s: ["a", [s]],
    "nested": lambda s: {"a": [{"b": {"c": f"prefix {s} suffix"}}]},
    "pem-in-json": lambda s: {"pem": f"-----BEGIN KEY-----\n{s}\n-----END KEY-----"},
    "json-credential": lambda s: {"credentials": {"client_secret": s, "quoted": f'"{s}"'}},
    "object-str": lambda s: type("Opaque", (), {"__str__": lambda self: f"opaque {s}"})(),
    "bytes-in-dict": lambda s: {"raw": s.encode()},          # json.dumps(default=str): b'...'
    "bytes-alone": lambda s: s.encode(),
    "repr-in-dict": lambda s: {"error": KeyError(s)},        # repr, then JSON-escaped
    "repr-text-in-list": lambda s: [repr({"k": s})],
}


@pytest.mark.parametrize("kind", sorted(SERIALIZED))
async def test_serialized_results_are_scrubbed(
        policies: guardrails.PolicySet, caplog: pytest.LogCaptureFixture, kind: str) -> None:
    found, client = await _run_vault(policies, SERIALIZED[kind], caplog)
    assert found == []
    assert "[REDACTED]" in client.model_saw()


# -- exceptions -----------------------------------------------------------------------------

class UnreadableError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


def _raise(exc: Callable[[str], BaseException]) -> Callable[[str], Any]:
    def behaviour(s: str) -> Any:
        raise exc(s)
    return behaviour


def _chained(s: str) -> BaseException:
    try:
        raise OSError(f"low-level {s}")
    except OSError as inner:
        outer = RuntimeError("wrapped")
        outer.__cause__ = inner
        return outer


def _noted(s: str) -> BaseException:
    exc = ValueError("plain")
    exc.add_note(f"note {s}")
    return exc


EXCEPTIONS: dict[str, Callable[[str], BaseException]] = {
    "value-error": lambda s: ValueError(f"bad key {s}"),
    "key-error-repr": lambda s: KeyError(s),
    "exception-group": lambda s: ExceptionGroup("several", [ValueError(s), KeyError(s)]),
    "unreadable-str": lambda s: UnreadableError(s),
    "chained-cause": _chained,
    "notes": _noted,
}


@pytest.mark.parametrize("detailed", [False, True], ids=["brief", "detailed-errors"])
@pytest.mark.parametrize("kind", sorted(EXCEPTIONS))
async def test_tool_exceptions_are_scrubbed(policies: guardrails.PolicySet,
                                            caplog: pytest.LogCaptureFixture, kind: str,
                                            detailed: bool) -> None:
    found, _ = await _run_vault(policies, _raise(EXCEPTIONS[kind]), caplog,
                                include_detailed_errors=detailed)
    assert found == []


async def test_an_unreadable_exception_keeps_only_its_type(
        policies: guardrails.PolicySet, caplog: pytest.LogCaptureFixture) -> None:
    _, client = await _run_vault(policies, _raise(UnreadableError), caplog,
                                 include_detailed_errors=True)
    assert "UnreadableError (its text could not be read)" in client.model_saw()


@STREAMING
async def test_user_input_request_from_a_tool_is_scrubbed(
        policies: guardrails.PolicySet, caplog: pytest.LogCaptureFixture, stream: bool) -> None:
    def ask(s: str) -> Any:
        raise UserInputRequiredException([_approval_like(s)], message=f"need input for {s}")

    found, _ = await _run_vault(policies, ask, caplog, stream=stream)
    assert found == []


class ToolAbort(BaseException):
    """A tool's own BaseException: not a tool error, it ends the run."""


@pytest.mark.parametrize("kind", ["custom-base-exception", "base-exception-group"])
async def test_base_exceptions_end_the_run_scrubbed(
        policies: guardrails.PolicySet, caplog: pytest.LogCaptureFixture, kind: str) -> None:
    make: Callable[[str], BaseException] = {
        "custom-base-exception": lambda s: ToolAbort(f"abort {s}"),
        "base-exception-group": lambda s: BaseExceptionGroup("g", [ToolAbort(s)]),
    }[kind]
    BEHAVIOUR["x"] = _raise(make)
    obs = Observer()
    client = ScriptedChatClient([[call("vault_call", mode="x")]])
    agent = agent_with(client, [vault_call], obs.guard(policies))
    with pytest.raises(BaseException) as caught:
        await agent.run("go")
    import traceback

    exc = caught.value
    assert type(exc) is GuardedToolAbort  # still ends the run, as the original would have
    text = "".join(traceback.format_exception(exc))
    assert leaks(SECRET, raised=[text, repr(exc)], **obs.places(caplog)) == []
    assert exc.__cause__ is None and exc.__context__ is None  # the original is not chained


async def test_a_clean_base_exception_is_raised_unchanged(
        policies: guardrails.PolicySet) -> None:
    original = ToolAbort("nothing secret")
    BEHAVIOUR["x"] = lambda s: (_ for _ in ()).throw(original)
    client = ScriptedChatClient([[call("vault_call", mode="x")]])
    with pytest.raises(ToolAbort) as caught:
        await agent_with(client, [vault_call], Observer().guard(policies)).run("go")
    assert caught.value is original


def test_guarded_tool_error_is_public() -> None:
    assert issubclass(GuardedToolError, RuntimeError)


# -- records: by value, not only by name ---------------------------------------------------

async def _run_calls(policies: guardrails.PolicySet, caplog: pytest.LogCaptureFixture,
                     calls: list[Content], secret: str,
                     tools: list[Any] | None = None) -> list[str]:
    obs = Observer()
    client = ScriptedChatClient([[c] for c in calls])
    agent = agent_with(client, tools or [login, note, vault_call], obs.guard(policies))
    session = AgentSession()
    response = await agent.run("go", session=session)
    return _everywhere(obs, caplog, client, response, session, secret)


RECORD_ATTACKS: dict[str, dict[str, Any]] = {
    # The declared secret repeated in another argument, quoted by a rule message.
    "secret-repeated-in-another-argument": {"user": "u", "pin": "4401", "memo": f"quote {PIN}"},
    # A repair copies the secret into another argument.
    "repaired-copy-of-a-secret": {"user": "u", "pin": PIN, "copy_pin": True},
    # An expression error quotes the raw value with repr() (int() of a non-number).
    "error-quoting-the-raw-value": {"user": "u", "pin": PIN},
    # url() of a long value used to quote a cut-off prefix of it.
    "error-quoting-a-long-value": {"user": "u", "pin": PIN, "memo": "x" * 190 + PIN + "y" * 50},
    "error-quoting-a-short-value": {"user": "u", "pin": PIN, "memo": f"::{PIN}"},
}


@pytest.mark.parametrize("kind", sorted(RECORD_ATTACKS))
async def test_decision_records_redact_secrets_by_value(
        policies: guardrails.PolicySet, caplog: pytest.LogCaptureFixture, kind: str) -> None:
    args = dict(RECORD_ATTACKS[kind])
    if kind == "secret-repeated-in-another-argument":
        args["pin"] = PIN
    assert await _run_calls(policies, caplog, [call("login", **args)], PIN) == []


def test_expression_errors_never_quote_a_cut_off_value() -> None:
    from guardrails.expr.lib_net import _url_error

    long = "a" * 150 + PIN + "b" * 100
    assert PIN[:10] not in str(_url_error(long, "bad"))


async def test_redact_pattern_matches_are_redacted_in_records(
        policies: guardrails.PolicySet, caplog: pytest.LogCaptureFixture) -> None:
    token = "zz-tok-abcdef123456"
    found = await _run_calls(policies, caplog,
                             [call("login", user=f"user {token}", pin="1", memo=token)], token)
    assert found == []


async def test_exfiltration_halt_alert_does_not_carry_the_credential(
        caplog: pytest.LogCaptureFixture) -> None:
    policies = guardrails.load(Path(__file__).parent.parent / "policies" / "exfiltration.yaml")
    credentials = ["AKIA" + "ABCDEFGHIJKLMNOP", "AIza" + "B" * 35,
                   "ghp_" + "c" * 36, "password=Hunter2Zeta77", "Bearer abcdEFGH1234ijklMNOP5678",
                   "https://bob:s3cret-pw@db.example/x", "sk-proj-" + "aB3" * 8]
    for credential in credentials:
        obs = Observer()
        client = ScriptedChatClient([[call("note", text=f"fyi {credential}")]])
        agent = agent_with(client, [note], obs.guard(policies))
        with pytest.raises(guardrails.PolicyViolation) as caught:
            await agent.run("go")
        alert = caught.value
        secret_part = credential.split("=")[-1].split(" ")[-1].split(":")[-1].split("@")[0]
        found = leaks(secret_part, alert=[str(alert), alert.decision.to_dict()],
                      **obs.places(caplog))
        assert found == [], credential


# -- names the model chooses ----------------------------------------------------------------

async def test_a_secret_as_an_argument_name_or_call_id_stays_out_of_records(
        policies: guardrails.PolicySet, caplog: pytest.LogCaptureFixture) -> None:
    BEHAVIOUR["x"] = lambda s: "ok"
    calls = [call("vault_call", mode="x"),
             call("note", "call-" + SECRET, text="hi"),            # an injected value as call id
             call("note", text="hi", **{SECRET: "v"}),            # ... as an argument name
             call("note", text="hi", nested={f"k {SECRET}": 1}),  # ... as a nested map key
             call("login", PIN, user="u", pin=PIN),                # a declared secret as call id
             call("login", user="u", pin=PIN, **{f"x{PIN}": 1})]   # ... inside an argument name
    obs = Observer()
    client = ScriptedChatClient([[c] for c in calls])
    agent = agent_with(client, [login, open_note, vault_call], obs.guard(policies))
    session = AgentSession()
    response = await agent.run("go", session=session)
    for secret in (SECRET, PIN):
        assert leaks(secret, **obs.places(caplog)) == [], secret
    # The model's own calls are its words, and a function result repeats the call id the
    # model chose (they are paired); everything else (history included) is clean.
    found = leaks(SECRET, **response_places(response, session))
    assert [f for f in found if not f.endswith(repr("call-" + SECRET))] == []
    guard_spans = [s for s in obs.spans() if s["name"].startswith("guardrails.guard")]
    # The two calls whose id carries a secret are guard failures, without the id.
    failed = [s for s in guard_spans if s["attributes"].get("error.type") == "ValueError"]
    assert len(failed) == 2 and all("gen_ai.tool.call.id" not in s["attributes"] for s in failed)
    assert sum("gen_ai.tool.call.id" in s["attributes"] for s in guard_spans) == len(calls) - 2
    # A call whose id carries a secret does not run: the framework's execute_tool span and
    # logs would record the id.
    results = [c for m in client.received[-1] for c in m.contents if c.type == "function_result"]
    assert sum("could not evaluate the call" in str(c.result) for c in results) == 2


# -- the framework's sensitive-data telemetry ------------------------------------------------

@pytest.fixture
def sensitive_telemetry() -> Iterator[None]:
    from agent_framework.observability import OBSERVABILITY_SETTINGS

    saved = (OBSERVABILITY_SETTINGS.enable_instrumentation,
             OBSERVABILITY_SETTINGS.enable_sensitive_data)
    OBSERVABILITY_SETTINGS.enable_instrumentation = True
    OBSERVABILITY_SETTINGS.enable_sensitive_data = True
    assert OBSERVABILITY_SETTINGS.SENSITIVE_DATA_ENABLED
    yield
    (OBSERVABILITY_SETTINGS.enable_instrumentation,
     OBSERVABILITY_SETTINGS.enable_sensitive_data) = saved


@pytest.mark.parametrize("mode", ["echo", "raise"])
async def test_injection_is_refused_while_sensitive_telemetry_is_on(
        policies: guardrails.PolicySet, caplog: pytest.LogCaptureFixture,
        sensitive_telemetry: None, mode: str) -> None:
    def echo(s: str) -> str:
        return f"key {s}"

    BEHAVIOUR["x"] = echo if mode == "echo" else _raise(lambda s: ValueError(s))
    obs = Observer()
    client = ScriptedChatClient([[call("vault_call", mode="x")], [call("note", text="hi")]])
    agent = agent_with(client, [vault_call, note], obs.guard(policies))
    session = AgentSession()
    response = await agent.run("go", session=session)
    assert SEEN == []  # the tool never ran with the key
    assert "could not evaluate the call to vault_call" in client.model_saw()
    assert "sensitive-data telemetry is on" in caplog.text
    assert _everywhere(obs, caplog, client, response, session) == []
    # Calls that inject nothing still run, and the framework records them as configured.
    assert any(s["name"] == "execute_tool note" for s in obs.spans())


# -- the memory of injected values -----------------------------------------------------------

async def test_a_rotated_token_stashed_earlier_is_still_scrubbed(
        policies: guardrails.PolicySet, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Many rotations later, another tool returns the first version: still scrubbed."""
    stash: list[str] = []
    BEHAVIOUR["x"] = lambda s: stash.append(s) or "ok"
    first = "tok-v0000-" + SECRET

    @tool(name="note")
    def leaky_note(text: str) -> str:
        """Returns what the vault tool stashed first."""
        return f"stashed: {stash[0]}"

    obs = Observer()
    guard = obs.guard(policies)
    for i in range(300):  # more than the old bound of 256
        monkeypatch.setenv("GR_LEAK_KEY", first if i == 0 else f"tok-v{i:04d}-rotated")
        client = ScriptedChatClient([[call("vault_call", mode="x")]])
        await agent_with(client, [vault_call], guard).run("go")
    client = ScriptedChatClient([[call("note", text="show")]])
    response = await agent_with(client, [leaky_note], guard).run("go")
    assert "stashed: [REDACTED]" in client.model_saw()
    assert _everywhere(obs, caplog, client, response, None, first) == []


async def test_a_full_memory_refuses_new_values_instead_of_forgetting(
        policies: guardrails.PolicySet, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(function_module, "INJECTED_MEMORY", 3)
    BEHAVIOUR["x"] = lambda s: "ok"
    guard = Observer().guard(policies)
    for i in range(3):
        monkeypatch.setenv("GR_LEAK_KEY", f"value-{i}-abcdef")
        await agent_with(ScriptedChatClient([[call("vault_call", mode="x")]]),
                         [vault_call], guard).run("go")
    assert len(SEEN) == 3
    monkeypatch.setenv("GR_LEAK_KEY", "value-new-abcdef")
    client = ScriptedChatClient([[call("vault_call", mode="x")]])
    await agent_with(client, [vault_call], guard).run("go")
    assert len(SEEN) == 3  # blocked, fail closed
    assert "could not evaluate the call to vault_call" in client.model_saw()
    assert "INJECTED_MEMORY" in caplog.text
    monkeypatch.setenv("GR_LEAK_KEY", "value-1-abcdef")  # a remembered value still works
    await agent_with(ScriptedChatClient([[call("vault_call", mode="x")]]),
                     [vault_call], guard).run("go")
    assert SEEN[-1] == "value-1-abcdef"


def test_telemetry_never_emits_a_call_id_holding_a_secret(
        policies: guardrails.PolicySet, caplog: pytest.LogCaptureFixture) -> None:
    """Defence in depth below the guard's refusal: the span and the record scrub it too."""
    obs = Observer()
    decision = policies.evaluate("login", {"user": "u", "pin": PIN})
    for raw in (f"id-{PIN}", "zz-tok-abcdef123456"):
        with obs.telemetry.call_span(tool="login", call_id=raw) as span:
            span.record(decision, 0.001)
    ids = [s["attributes"]["gen_ai.tool.call.id"] for s in obs.spans()]
    assert ids == ["[REDACTED]", "[REDACTED]"]
    assert [r["call_id"] for r in obs.sink.records] == ["[REDACTED]", "[REDACTED]"]
    assert leaks(PIN, **obs.places(caplog)) == []


async def test_a_pickled_decision_does_not_carry_the_guards_memory(
        policies: guardrails.PolicySet) -> None:
    import pickle

    BEHAVIOUR["x"] = lambda s: "ok"
    obs = Observer()
    client = ScriptedChatClient([[call("vault_call", mode="x")], [call("login", user="u", pin=PIN)]])
    await agent_with(client, [vault_call, login], obs.guard(policies)).run("go")
    decision = obs.telemetry.decisions[-1]
    assert decision.scrub(f"x {SECRET}") == "x [REDACTED]"  # it knows the injected value
    data = pickle.dumps(decision)
    assert SECRET.encode() not in data and SECRET.encode("unicode_escape") not in data
    copy = pickle.loads(data)
    assert copy.to_dict() == decision.to_dict()
    assert copy.scrub(f"pin {PIN}") == "pin [REDACTED]"  # its own secrets still scrubbed
