"""Red team of promises 1-7 and 9 of docs/security-model.md, in the real agent loop.

Each test is an attack that got through before its fix (the finding is named in its
docstring), or one that held and pins the promise it attacked. Real framework loop
(``ScriptedChatClient``), real files, real OpenTelemetry SDK where spans matter.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Agent, AgentSession, Content, tool

from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call, result_text, text
from tests.af_support import STREAMING, agent_with, load_text, run

SECRET = "sk-live-RT15B-secret-70417733"

INJECTING = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: api}
spec:
  match: {tools: ["call_api"]}
  secrets:
    inject:
      api_key: {env: GR_RT15B_KEY}
  rules:
    - {name: never, when: 'false', action: deny}
"""

PLAIN = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: notes}
spec:
  match: {tools: ["read_stash", "read_stash_later", "explode_later"]}
  rules:
    - {name: never, when: 'false', action: deny}
"""

STASH: list[str] = []
"""Where ``call_api`` keeps the key it was given (a cache, a log, a shared client)."""
INJECTED: list[asyncio.Event] = []
"""Set once call_api ran (made per test: an event belongs to one event loop)."""


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("GR_RT15B_KEY", SECRET)
    STASH.clear()
    INJECTED[:] = [asyncio.Event()]
    yield
    STASH.clear()


@tool(name="call_api")
async def call_api(endpoint: str, api_key: str) -> str:
    """Calls an API with the injected key, and keeps the key where other tools read it."""
    STASH.append(api_key)
    INJECTED[0].set()
    return f"called {endpoint}"


@tool(name="read_stash")
def read_stash(text: str) -> str:
    """Returns what call_api kept."""
    return f"{text}: {' '.join(STASH)}"


@tool(name="read_stash_later")
async def read_stash_later(text: str) -> str:
    """Waits until call_api ran (in another run), then returns what it kept."""
    await asyncio.wait_for(INJECTED[0].wait(), 10)
    return f"{text}: {' '.join(STASH)}"


@tool(name="explode_later")
async def explode_later(text: str) -> str:
    """Waits until call_api ran (in another run), then raises with what it kept."""
    await asyncio.wait_for(INJECTED[0].wait(), 10)
    raise RuntimeError(f"{text} failed with {' '.join(STASH)}")


def _both(tmp_path: Path) -> Any:
    return load_text(tmp_path, INJECTING + "---\n" + PLAIN)


# -- promise 5: a value injected while another call's tool runs ---------------------------


@STREAMING
async def test_a_value_injected_while_a_quiet_call_runs_does_not_reach_its_result(
        tmp_path: Path, stream: bool, caplog: pytest.LogCaptureFixture) -> None:
    """Finding (promise 5, concurrency): a call's scrubber was fixed when the call was
    planned. Two runs on one guard: run A's call starts while nothing is secret (a quiet
    call); run B's call_api is then injected with the key and stashes it; A's tool returns
    the stash. A's result, its exception and its history carried the key raw to A's model
    and session. Fixed at the exits after the tool: they scrub every value the guard
    injected up to then, not only those it knew when the call started."""
    middleware = guard(_both(tmp_path))
    client_a = ScriptedChatClient([[call("read_stash_later", text="later"),
                                    call("explode_later", text="boom")], [text("done")]])
    client_b = ScriptedChatClient([[call("call_api", endpoint="https://api.example")],
                                   [text("done")]])
    session_a = AgentSession()
    agent_a = agent_with(client_a, [read_stash_later, explode_later], middleware,
                         include_detailed_errors=True)
    agent_b = agent_with(client_b, [call_api], middleware)

    async def run_b() -> Any:
        await asyncio.sleep(0.05)  # A's tools are waiting: A was planned before the injection
        return await run(agent_b, "call", stream=stream)

    caplog.set_level(logging.DEBUG)
    response_a, _ = await asyncio.gather(run(agent_a, "read", stream=stream, session=session_a),
                                         run_b())
    assert STASH == [SECRET]
    results = [result_text(r) for r in client_a.tool_results()]
    assert results[0] == "later: [REDACTED]"
    assert "boom failed with [REDACTED]" in results[1]
    assert SECRET not in repr(results)
    assert SECRET not in repr(session_a.state)
    assert SECRET not in response_a.text
    assert SECRET not in caplog.text


@STREAMING
async def test_a_sub_agent_with_its_own_guard_does_not_show_its_model_the_callers_secret(
        tmp_path: Path, stream: bool) -> None:
    """Finding (promise 5, a second guard): an agent calls a sub-agent (``as_tool()``)
    guarded by a guard of its own, with no secret (a quiet call). The outer guard injected
    the key into call_api, which stashed it; the sub-agent's read_stash returned it and
    the sub-agent's *model* read it raw (only the outer model's copy was scrubbed, by the
    outer guard). Fixed in the one place tool output leaves: a call made inside another
    guarded call's tool is scrubbed with that call's scrubber too."""
    inner_client = ScriptedChatClient(default=_inner_turn)
    inner_client.function_invocation_configuration.update(  # type: ignore[typeddict-item]
        include_detailed_errors=True)
    inner = Agent(client=inner_client, tools=[read_stash, explode_now],
                  middleware=guard(load_text(tmp_path, PLAIN.replace(
                      '"read_stash", ', '"read_stash", "explode_now", '), "inner.yaml")),
                  name="helper", description="reads notes")
    outer_client = ScriptedChatClient([[call("call_api", endpoint="https://api.example")],
                                       [call("helper", task="read the notes")],
                                       [text("done")]])
    outer = agent_with(outer_client, [call_api, inner.as_tool()],
                       guard(load_text(tmp_path, INJECTING, "outer.yaml")))
    response = await run(outer, "go", stream=stream)
    assert STASH == [SECRET]
    seen_inside = [result_text(r) for r in inner_client.tool_results()]
    assert seen_inside[0] == "notes: [REDACTED]"
    assert "boom failed with [REDACTED]" in seen_inside[1]
    assert SECRET not in repr(seen_inside)
    assert SECRET not in repr([result_text(r) for r in outer_client.tool_results()])
    assert SECRET not in response.text


@tool(name="explode_now")
def explode_now(text: str) -> str:
    """Raises with what call_api kept."""
    raise RuntimeError(f"{text} failed with {' '.join(STASH)}")


def _inner_turn(messages: Any) -> list[Content]:
    done = [c for m in messages for c in m.contents if c.type == "function_result"]
    if len(done) >= 2:
        return [Content.from_text("inner read: " + " | ".join(str(c.result) for c in done))]
    if done:
        return [call("explode_now", text="boom")]
    return [call("read_stash", text="notes")]



@STREAMING
async def test_what_a_sub_agents_guard_injects_does_not_reach_the_callers_model(
        tmp_path: Path, stream: bool) -> None:
    """Finding (promise 5, a second guard, the other way round): the sub-agent's own guard
    injected the key into its call_api, which stashed it; a later tool of the *calling*
    agent returned the stash, and the caller's guard, which never injected the key, gave
    it to the caller's model raw. Fixed: what a guard injects while it runs inside other
    guards' tools is remembered by each of them too (before the tool gets it)."""
    inner_client = ScriptedChatClient(default=_inner_api_turn)
    inner = Agent(client=inner_client, tools=[call_api],
                  middleware=guard(load_text(tmp_path, INJECTING, "inner.yaml")),
                  name="helper", description="calls the API")
    outer_client = ScriptedChatClient([[call("helper", task="call the API")],
                                       [call("read_stash", text="notes")],
                                       [text("done")]])
    session = AgentSession()
    outer = agent_with(outer_client, [read_stash, inner.as_tool()],
                       guard(load_text(tmp_path, PLAIN, "outer.yaml")))
    response = await run(outer, "go", stream=stream, session=session)
    assert STASH == [SECRET]
    seen_outside = [result_text(r) for r in outer_client.tool_results()]
    assert seen_outside[1] == "notes: [REDACTED]"
    assert SECRET not in repr(seen_outside)
    assert SECRET not in repr(session.state)
    assert SECRET not in response.text


def _inner_api_turn(messages: Any) -> list[Content]:
    if any(c.type == "function_result" for m in messages for c in m.contents):
        return [Content.from_text("the API was called")]
    return [call("call_api", endpoint="https://api.example")]


# -- promise 5: one guard shared by threads, each with its own event loop ------------------


@tool(name="call_api_sync")
def call_api_sync(endpoint: str, api_key: str) -> str:
    """call_api for a thread of its own (no event shared between loops)."""
    STASH.append(api_key)
    return f"called {endpoint}"


def test_a_reload_in_one_thread_does_not_lose_a_value_injected_in_another(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Finding (promise 5, threads): a guard shared by threads (each running its own event
    loop) rebuilt its memory of injected values for a reloaded set from a copy of the values
    taken before another thread injected a new one, and then stored it over the memory that
    held the new value: the value was never scrubbed again (here a later call's result gave
    it to the model raw). The window is held open where it was (the rebuild of the memory)
    until the other thread has injected, or for half a second. Fixed: the memory is changed
    under one lock (the rebuild and an injection never interleave)."""
    import threading

    from guardrails.agent_framework import _function

    first = load_text(tmp_path, INJECTING + "---\n" + PLAIN.replace(
        '"read_stash", "read_stash_later", "explode_later"', '"read_stash"').replace(
        '"call_api"', '"call_api_sync"'), "first.yaml")
    second = load_text(tmp_path, (INJECTING + "---\n" + PLAIN).replace(
        '"call_api"', '"call_api_sync"'), "second.yaml")

    class Source:
        current = first

    middleware = guard(Source())
    entered, injected = threading.Event(), threading.Event()
    rebuilding: list[threading.Thread] = []
    real = _function.Scrubber

    def held_open(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() in rebuilding:
            entered.set()
            injected.wait(0.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(_function, "Scrubber", held_open)

    def reload_and_read() -> None:
        Source.current = second
        asyncio.run(run(agent_with(ScriptedChatClient([[call("read_stash", text="first")],
                                                       [text("done")]]),
                                   [read_stash], middleware), "read"))

    def inject() -> None:
        entered.wait(5)
        client = ScriptedChatClient([[call("call_api_sync", endpoint="https://api.example")],
                                     [text("done")]])
        asyncio.run(run(agent_with(client, [call_api_sync], middleware), "call"))
        injected.set()

    reader = threading.Thread(target=reload_and_read)
    injector = threading.Thread(target=inject)
    rebuilding.append(reader)
    reader.start()
    injector.start()
    reader.join(10)
    injector.join(10)
    assert STASH == [SECRET]
    client = ScriptedChatClient([[call("read_stash", text="later")], [text("done")]])
    asyncio.run(run(agent_with(client, [read_stash], middleware), "read"))
    [later] = [result_text(r) for r in client.tool_results()]
    assert later == "later: [REDACTED]"


# -- promise 5: what a secret provider returns -------------------------------------------


class Masked(str):
    """A vault client's "masked" secret: prints as a mask, equal to any other mask."""

    def __str__(self) -> str:
        return "****"

    def __repr__(self) -> str:
        return "Masked('****')"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Masked) or other == "****"

    def __hash__(self) -> int:
        return hash("****")


MASKED_KEYS = {"GR_RT15B_A": "sk-live-first-RT15B-11117777",
               "GR_RT15B_B": "sk-live-second-RT15B-22228888"}


class MaskingProvider:
    def get(self, ref: str) -> str:
        return Masked(MASKED_KEYS[ref])


@tool(name="call_two")
def call_two(endpoint: str, api_key: str, other_key: str) -> str:
    """Calls an API with two injected keys, and keeps them where other tools read them."""
    STASH.extend([str.__str__(api_key), str.__str__(other_key)])
    return f"called {endpoint} with {api_key} and {other_key}"


@STREAMING
async def test_secrets_a_provider_returns_as_a_str_subclass_are_remembered_by_their_data(
        tmp_path: Path, stream: bool) -> None:
    """Finding (promise 5, secret providers): a provider returned its secrets as a str
    subclass with its own equality (equal by their mask). The guard remembered the first
    and took the second for it (``value in memory`` asked the subclass), so a later tool
    that returned the second key gave it to the model raw. Fixed at the boundary: what a
    provider returns is taken as the plain ``str`` of its data before it is remembered,
    injected or scrubbed; and the scrubber reads any ``str`` subclass by its data."""
    policies = load_text(tmp_path, INJECTING.replace('"call_api"', '"call_two"').replace(
        "api_key: {env: GR_RT15B_KEY}",
        "api_key: {env: GR_RT15B_A}\n      other_key: {env: GR_RT15B_B}") + "---\n" + PLAIN)
    client = ScriptedChatClient([[call("call_two", endpoint="https://api.example")],
                                 [call("read_stash", text="kept")], [text("done")]])
    session = AgentSession()
    response = await run(agent_with(client, [call_two, read_stash],
                                    guard(policies, secrets=MaskingProvider())),
                         "go", stream=stream, session=session)
    assert list(MASKED_KEYS.values()) == STASH
    first, later = [result_text(r) for r in client.tool_results()]
    assert first == "called https://api.example with [REDACTED] and [REDACTED]"
    assert later == "kept: [REDACTED] [REDACTED]"
    for key in MASKED_KEYS.values():
        assert key not in repr(session.state)
        assert key not in response.text


# -- promises 1 and 3: what held ----------------------------------------------------------

RAN: list[Any] = []


@tool(name="echo_any")
def echo_any(text: Any) -> str:
    """Runs with whatever it is given."""
    RAN.append(text)
    return "ran"


ECHO_ANY = PLAIN.replace('"read_stash", "read_stash_later", "explode_later"', '"echo_any"')


@pytest.mark.parametrize("depth", [33, 500, 900])
async def test_deeply_nested_arguments_are_denied_and_never_run(tmp_path: Path,
                                                                depth: int) -> None:
    """Held: arguments nested past the bound (32) up to what the framework can parse are an
    input error, whatever the policy says: the tool never runs, the run goes on."""
    RAN.clear()
    nested = '{"text": ' + "[" * depth + '"x"' + "]" * depth + "}"
    client = ScriptedChatClient([
        [Content.from_function_call(call_id="c1", name="echo_any", arguments=nested)],
        [text("done")]])
    response = await run(agent_with(client, [echo_any], guard(load_text(tmp_path, ECHO_ANY))),
                         "go")
    [result] = [result_text(r) for r in client.tool_results()]
    assert "denied by policy" in result
    assert not RAN
    assert response.text == "done"


@pytest.mark.parametrize(("arguments", "error"), [
    ('{"text": ' + "[" * 5000 + '"x"' + "]" * 5000 + "}", RecursionError),
    ('{"text": ' + "9" * 5000 + "}", ValueError),
], ids=["deep", "long-integer"])
async def test_arguments_the_frameworks_parser_cannot_read_are_denied_and_run_nothing(
        tmp_path: Path, arguments: str, error: type[Exception]) -> None:
    """Held since malformed15 (docs/security-model.md, promise 1): the framework parses the
    model's JSON before any function middleware, and its parser raises ``error`` for
    arguments some 990 levels deep or holding an integer of more than 4,300 digits. The
    guard sees each batch of calls first: the call is denied as unreadable,
    nothing runs and the run goes on to the model's answer. (Unguarded, the run still ends
    with ``error``.)"""
    RAN.clear()
    client = ScriptedChatClient([
        [Content.from_function_call(call_id="c1", name="echo_any", arguments=arguments)],
        [text("done")]])
    response = await run(agent_with(client, [echo_any], guard(load_text(tmp_path, ECHO_ANY))),
                         "go")
    [result] = [result_text(r) for r in client.tool_results()]
    assert "could not be read" in result
    assert response.text == "done"
    assert not RAN
    unguarded = ScriptedChatClient([
        [Content.from_function_call(call_id="c1", name="echo_any", arguments=arguments)],
        [text("done")]])
    with pytest.raises(error):
        await run(agent_with(unguarded, [echo_any], []), "go")
    assert not RAN


# -- promise 5: generated interleavings of concurrent runs, sub-agents and injections -----

ROTATED = [f"sk-live-rotated-RT15B-{n:04d}-secret" for n in range(3)]
"""The values the provider hands out in turn (a rotating secret)."""


class RotatingProvider:
    def __init__(self) -> None:
        self.handed = 0

    def get(self, ref: str) -> str:
        value = ROTATED[self.handed % len(ROTATED)]
        self.handed += 1
        return value


@tool(name="call_api_yield")
async def call_api_yield(endpoint: str, api_key: str, pause: int = 0) -> str:
    """call_api that yields to the event loop first (other runs go on meanwhile)."""
    for _ in range(pause):
        await asyncio.sleep(0)
    STASH.append(api_key)
    return f"called {endpoint}"


@tool(name="read_yield")
async def read_yield(text: str, pause: int = 0) -> str:
    """Yields to the event loop ``pause`` times, then returns the stash."""
    for _ in range(pause):
        await asyncio.sleep(0)
    return f"{text}: {' '.join(STASH)}"


@tool(name="explode_yield")
async def explode_yield(text: str, pause: int = 0) -> str:
    """Yields, then raises with the stash."""
    for _ in range(pause):
        await asyncio.sleep(0)
    raise RuntimeError(f"{text}: {' '.join(STASH)}")


MIXED = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: api}
spec:
  match: {tools: ["call_api_yield"]}
  secrets:
    inject:
      api_key: {env: GR_RT15B_ROTATING}
  rules:
    - {name: never, when: 'false', action: deny}
---
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: notes}
spec:
  match: {tools: ["read_yield", "explode_yield"]}
  rules:
    - {name: never, when: 'false', action: deny}
"""


def _mixed_turns(steps: list[tuple[str, int]]) -> list[list[Content]]:
    turns: list[list[Content]] = []
    for n, (kind, pause) in enumerate(steps):
        if kind == "inject":
            turns.append([call("call_api_yield", f"c{n}", endpoint="https://api.example",
                               pause=pause)])
        elif kind == "read":
            turns.append([call("read_yield", f"c{n}", text="r", pause=pause)])
        elif kind == "explode":
            turns.append([call("explode_yield", f"c{n}", text="e", pause=pause)])
        else:  # a batch: a sibling injection and a read
            turns.append([call("call_api_yield", f"c{n}a", endpoint="https://b.example",
                               pause=pause),
                          call("read_yield", f"c{n}b", text="b", pause=3 - pause)])
    return [*turns, [text("done")]]




def _strategies() -> Any:
    from hypothesis import strategies as st

    step = st.tuples(st.sampled_from(["inject", "read", "explode", "batch"]),
                     st.integers(min_value=0, max_value=3))
    return st.lists(st.lists(step, min_size=1, max_size=4), min_size=2, max_size=3)


def test_generated_interleavings_never_show_a_model_an_injected_value(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """Property (promise 5): concurrent runs on one guard, each a generated script of
    injections, reads and raising reads of a shared stash, with sibling batches and tool
    pauses that interleave the runs differently, half of them inside a sub-agent guarded
    by a guard of its own: no model, response or session ever holds an injected value."""
    from hypothesis import HealthCheck, given, settings

    policies = load_text(tmp_path_factory.mktemp("mixed"), MIXED)
    inner_policies = load_text(tmp_path_factory.mktemp("inner"),
                               MIXED.split("---\n")[1])

    @settings(max_examples=25, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(_strategies())
    def check(scripts: list[list[tuple[str, int]]]) -> None:
        STASH.clear()
        middleware = guard(policies, secrets=RotatingProvider())
        clients: list[ScriptedChatClient] = []
        sessions: list[AgentSession] = []

        async def one(n: int, steps: list[tuple[str, int]]) -> str:
            client = ScriptedChatClient(_mixed_turns(steps))
            client.function_invocation_configuration.update(  # type: ignore[typeddict-item]
                include_detailed_errors=True)
            clients.append(client)
            session = AgentSession()
            sessions.append(session)
            tools: list[Any] = [call_api_yield, read_yield, explode_yield]
            if n % 2:  # reads inside a sub-agent with a guard of its own
                inner_client = ScriptedChatClient(default=_inner_read_turn)
                clients.append(inner_client)
                helper = Agent(client=inner_client, tools=[read_yield],
                               middleware=guard(inner_policies), name="helper",
                               description="reads")
                tools.append(helper.as_tool())
                client = ScriptedChatClient([[call("helper", "h0", task="read")],
                                             *_mixed_turns(steps)])
                client.function_invocation_configuration.update(  # type: ignore[typeddict-item]
                    include_detailed_errors=True)
                clients[-2] = client
            response = await run(agent_with(client, tools, middleware), "go", session=session)
            return str(response.text)

        async def all_runs() -> list[str]:
            return list(await asyncio.gather(*(one(n, s) for n, s in enumerate(scripts))))

        texts = asyncio.run(all_runs())
        seen = repr([[r.to_dict() for r in c.tool_results()] for c in clients])
        seen += repr([s.state for s in sessions]) + repr(texts)
        for value in ROTATED:
            assert value not in seen

    check()


def _inner_read_turn(messages: Any) -> list[Content]:
    done = [c for m in messages for c in m.contents if c.type == "function_result"]
    if done:
        return [Content.from_text("inner read: " + str(done[-1].result))]
    return [call("read_yield", text="inner", pause=2)]


# -- promise 7: a call finishes on the set it started with, its redaction included ------

CARD = "4111 1111 1111 1111"

REDACTING = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: notes}
spec:
  match: {tools: ["read_yield", "read_card_later"]}
  rules:
    - {name: never, when: 'false', action: deny}
  redact:
    - {name: card, regex: '\\b(?:\\d[ -]?){13,16}\\b', replacement: '[REDACTED:card]'}
"""


@tool(name="read_card_later")
async def read_card_later(text: str) -> str:
    """Waits until call_api ran (in another run), then returns a card number."""
    await asyncio.wait_for(INJECTED[0].wait(), 10)
    return f"{text}: card {CARD}"


@STREAMING
async def test_a_reload_dropping_a_pattern_while_a_call_runs_does_not_unredact_its_result(
        tmp_path: Path, stream: bool) -> None:
    """Finding (promise 7, with promise 5): a call decided on a set with a redact pattern
    was scrubbed, once the memory changed while its tool ran (a reload, here with an
    injection of another run), by the memory as it then was: the new set's, without the
    pattern, so the card number went out. A call finishes on the set it started with: its
    own scrubber stays, the values injected meanwhile are added to it."""
    first = load_text(tmp_path, REDACTING, "first.yaml")
    second = load_text(tmp_path, INJECTING + "---\n" + REDACTING.split("  redact:")[0],
                       "second.yaml")

    class Source:
        current = first

    middleware = guard(Source())
    reader = ScriptedChatClient([[call("read_card_later", text="later")], [text("done")]])
    caller = ScriptedChatClient([[call("call_api", endpoint="https://api.example")],
                                 [text("done")]])

    async def reload_and_inject() -> Any:
        await asyncio.sleep(0.05)  # the reader's tool is waiting: it was decided on ``first``
        Source.current = second
        return await run(agent_with(caller, [call_api], middleware), "call", stream=stream)

    await asyncio.gather(run(agent_with(reader, [read_card_later], middleware), "read",
                             stream=stream), reload_and_inject())
    [result] = [result_text(r) for r in reader.tool_results()]
    assert result == "later: card [REDACTED:card]"


# -- promise 5: two agents, each with its own guard, one session -------------------------


@STREAMING
async def test_agents_with_guards_of_their_own_sharing_a_session_scrub_each_others_values(
        tmp_path: Path, stream: bool) -> None:
    """Finding (promise 5, a second guard sharing state): two agents, each with a guard of
    its own, run one after the other on one session. The first agent's guard injected the
    key, which its tool stashed; the second agent's tool returned the stash, and its guard,
    which never injected the key, gave it to the second agent's model, the response and
    the session raw. Fixed: the guards that injected a value into a session's calls are
    known to the session (in this process), and every guard scrubs what they injected
    from the output of that session's calls."""
    session = AgentSession()
    first = ScriptedChatClient([[call("call_api", endpoint="https://api.example")],
                                [text("done")]])
    await run(agent_with(first, [call_api], guard(load_text(tmp_path, INJECTING, "a.yaml"))),
              "call", stream=stream, session=session)
    second = ScriptedChatClient([[call("read_stash", text="kept")],
                                 [call("explode_now", text="boom")], [text("done")]])
    second.function_invocation_configuration.update(  # type: ignore[typeddict-item]
        include_detailed_errors=True)
    response = await run(agent_with(second, [read_stash, explode_now], guard(load_text(
        tmp_path, PLAIN.replace('"read_stash", ', '"read_stash", "explode_now", '),
        "b.yaml"))), "read", stream=stream, session=session)
    assert STASH == [SECRET]
    results = [result_text(r) for r in second.tool_results()]
    assert results[-2] == "kept: [REDACTED]"  # (the first agent's result is in the session)
    assert "boom failed with [REDACTED]" in results[-1]
    assert SECRET not in repr(results)
    assert SECRET not in repr(session.state)
    assert SECRET not in response.text


# --- promise 9 against promise 6: a held approval record the guard cannot compare -------

COUNTED_APPROVALS = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: payments}
spec:
  match: {tools: [send_money]}
  counters:
    - {name: payments, key: 'principal.user', window: 1d, limit: 1}
  rules:
    - {name: daily-limit, when: 'counters.payments.exceeded', action: deny,
       message: daily payment limit reached}
    - {name: big, when: 'args.amount > 1000', action: require_approval}
"""


@pytest.mark.parametrize("field", ["token", "mac"])
@pytest.mark.parametrize("char", ["\u00e9", "\ud800"])
async def test_a_held_record_the_guard_cannot_compare_blocks_and_counts_nothing(
        tmp_path: Path, field: str, char: str) -> None:
    """Finding (redteam15c): session state rewritten to hold a non-ASCII token (or MAC)
    in the approval record made ``secrets.compare_digest`` raise TypeError on the
    approved replay. The call was blocked (fail closed), but after the counted
    evaluation had reserved it: the reservation of a call that never ran was kept, and
    the user's next payment was denied as over the daily limit. Now a record that
    cannot be compared approves nothing (no error), and any guard error after the
    reservation gives it back."""
    import json

    from agent_framework import Message

    from guardrails.engine.counters import MemoryStore, window_key
    from tests.af_tools import CALLS, send_money

    CALLS.clear()
    policies = load_text(tmp_path, COUNTED_APPROVALS)
    store = MemoryStore()
    mw = guard(policies, principal={"user": "ann"}, counters=store,
               approval_key=b"k" * 32)
    client = ScriptedChatClient([[call("send_money", recipient="UK12", amount=2000)],
                                 [call("send_money", recipient="UK13", amount=10)],
                                 [text("done")]])
    agent = agent_with(client, [send_money], mw)
    session = agent.create_session()
    first = await agent.run("pay UK12 2000", session=session)
    [request] = first.user_input_requests
    held = session.state["guardrails"]["approvals"][request.id]
    held[field] = char + held[field][1:]  # same length, not ASCII
    answer = Message(role="user", contents=[request.to_function_approval_response(True)])
    again = await agent.run(answer, session=session)
    assert CALLS == []  # the altered record approved nothing: approval is asked again
    assert len(again.user_input_requests) == 1
    key = window_key("payments/payments", json.dumps("ann"))
    assert store.count(key, 86400) == 0  # and nothing is counted
    await agent.run("pay UK13 10", session=session)
    assert CALLS == [("send_money", {"recipient": "UK13", "amount": 10.0})]


HALTING_COUNTED = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: payments}
spec:
  match: {tools: [send_money]}
  counters:
    - {name: payments, key: 'principal.user', window: 1d, limit: 5}
  rules:
    - {name: absurd, when: 'args.amount > 100000', action: halt}
"""


async def test_a_call_cancelled_while_its_store_reserves_counts_nothing(tmp_path: Path) -> None:
    """A halt in a parallel batch cancels its siblings. A sibling cancelled while the
    counter store (SQLite, off the event loop) was reserving for it never ran: the
    reservation the store made meanwhile must go back."""
    import json
    import time

    from agent_framework import Agent

    from guardrails import PolicyViolation
    from guardrails.engine.counters import CounterRequest, window_key
    from guardrails.fleet.stores import SQLiteStore
    from tests.af_tools import CALLS, send_money

    class SlowSQLite(SQLiteStore):
        def reserve(self, requests: Any) -> Any:
            time.sleep(0.3)  # the sibling's halt and the batch's cancel happen meanwhile
            return super().reserve(requests)

    CALLS.clear()
    store = SlowSQLite(tmp_path / "counters.db")
    policies = load_text(tmp_path, HALTING_COUNTED)
    client = ScriptedChatClient([[call("send_money", recipient="A", amount=10),
                                  call("send_money", recipient="B", amount=500000)]])
    agent = Agent(client=client, tools=[send_money],
                  middleware=guard(policies, principal={"user": "ann"}, counters=store))
    with pytest.raises(PolicyViolation):
        await agent.run("pay")
    assert CALLS == []
    await asyncio.sleep(0.6)  # the store's thread has finished by now
    key = window_key("payments/payments", json.dumps("ann"))
    [counted] = SQLiteStore.reserve(store, [CounterRequest(key, 86400, 5, 0)])
    assert counted.count == 0


# --- promise 6 and 9: attacks that held (pinned) ---------------------------------------

APPROVAL_ONLY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: payments}
spec:
  match: {tools: [send_money]}
  rules:
    - {name: big, when: 'args.amount > LIMIT', action: require_approval}
"""


async def test_an_approval_given_before_a_reload_approves_nothing_after_it(
        tmp_path: Path) -> None:
    """The approval covers the revision the human was shown: after a reload (here one that
    only changes a threshold) the answered replay asks again, and runs nothing."""
    import os

    import guardrails
    from tests.af_support import approve_all
    from tests.af_tools import CALLS, send_money

    CALLS.clear()
    path = tmp_path / "p.yaml"
    path.write_text(APPROVAL_ONLY.replace("LIMIT", "1000"))
    with guardrails.watch(path, interval=3600) as source:
        client = ScriptedChatClient([[call("send_money", recipient="UK12", amount=2000)],
                                     [text("done")]])
        agent = agent_with(client, [send_money], guard(source))
        session = agent.create_session()
        first = await agent.run("pay", session=session)
        assert len(first.user_input_requests) == 1
        path.write_text(APPROVAL_ONLY.replace("LIMIT", "1500"))
        stat = path.stat()
        os.utime(path, (stat.st_atime, stat.st_mtime + 5))
        assert source.refresh()
        again = await agent.run(approve_all(first), session=session)
        assert CALLS == []
        assert len(again.user_input_requests) == 1


async def test_a_parallel_batch_over_a_counter_runs_exactly_its_limit(tmp_path: Path) -> None:
    """Eight calls in one model turn (run concurrently by the framework) against a limit
    of three, on a real SQLite store: three run, three are counted."""
    import json

    from guardrails.engine.counters import CounterRequest, window_key
    from guardrails.fleet.stores import SQLiteStore
    from tests.af_tools import CALLS, send_money

    CALLS.clear()
    store = SQLiteStore(tmp_path / "counters.db")
    policies = load_text(tmp_path, HALTING_COUNTED.replace("limit: 5", "limit: 3") + (
        "    - {name: over, when: 'counters.payments.exceeded', action: deny}\n"))
    client = ScriptedChatClient([[call("send_money", recipient=f"R{i}", amount=10)
                                  for i in range(8)], [text("done")]])
    agent = agent_with(client, [send_money],
                       guard(policies, principal={"user": "ann"}, counters=store))
    await agent.run("pay")
    assert len(CALLS) == 3
    key = window_key("payments/payments", json.dumps("ann"))
    [counted] = store.reserve([CounterRequest(key, 86400, 3, 0)])
    assert counted.count == 3
