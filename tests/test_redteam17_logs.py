"""Red team, round 5: log records of the tool's own libraries (promise 5).

The guard scrubbed the framework's log records while a tool runs (a filter on each
framework logger), but a filter acts only on records of the logger it sits on. The tool's
own libraries log what it sends: httpx logs every request's URL at INFO
(``HTTP Request: GET https://api.example/v1?key=sk-live-... "HTTP/1.1 200 OK"``), an app
logs a failure with its exception. The injected key went to the host's log handlers
whole. Now every record made while a guarded tool runs, by any logger, is scrubbed as it
is made (the process's log record factory, wrapped, chaining the one it replaced).
"""

from __future__ import annotations

import asyncio
import io
import logging
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_framework import AgentSession, tool

from guardrails.agent_framework import ScriptedChatClient
from guardrails.agent_framework.scripted import call, text
from tests.af_support import STREAMING, agent_with, load_text, run
from tests.leak_support import Observer, root_log_output

KEY = "sk-live-Zq9vTx3mW2pLr8Kd4"
POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: api}
spec:
  match: {tools: ["fetch_report"]}
  secrets:
    inject:
      api_key: {env: GR_RT17_LOG_KEY}
"""


@tool
async def fetch_report(url: str, api_key: str) -> str:
    """Fetches a report; its HTTP client and the app log as they go."""
    logging.getLogger("httpx").info('HTTP Request: GET %s?key=%s "HTTP/1.1 200 OK"', url,
                                    api_key)
    logging.getLogger("reports.client").debug("headers: %r", {"Authorization": api_key})
    try:
        raise ConnectionError(f"upstream refused key {api_key}")
    except ConnectionError:
        logging.getLogger("reports.client").warning("retrying", exc_info=True)
    logging.getLogger("reports.client").error("state", stack_info=True,
                                              extra={"note": "x"})
    # A thread the tool starts with the context copied (asyncio.to_thread does).
    await asyncio.to_thread(logging.getLogger("reports.worker").info, "worker key=%s",
                            api_key)
    return "report ready"


@pytest.fixture(name="handler_output")
def _handler_output(monkeypatch: pytest.MonkeyPatch,
                    caplog: pytest.LogCaptureFixture) -> Iterator[io.StringIO]:
    """A plain handler on the root logger, as a host configures it, and DEBUG everywhere."""
    monkeypatch.setenv("GR_RT17_LOG_KEY", KEY)
    caplog.set_level(logging.DEBUG)
    with root_log_output() as out:
        yield out


def _texts(caplog: pytest.LogCaptureFixture) -> list[str]:
    out = []
    for r in caplog.records:
        out.append(r.getMessage())
        out += [t for t in (r.exc_text, r.stack_info) if t]
        if r.exc_info:
            out.append("".join(traceback.format_exception(*r.exc_info)))
    return out


@STREAMING
async def test_records_of_any_logger_while_the_tool_runs_are_scrubbed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, handler_output: io.StringIO,
        stream: bool) -> None:
    obs = Observer()
    client = ScriptedChatClient([[call("fetch_report", url="https://api.example/v1")],
                                 [text("done")]])
    agent = agent_with(client, [fetch_report], obs.guard(load_text(tmp_path, POLICY)))
    await run(agent, "get the report", stream=stream, session=AgentSession())
    texts = _texts(caplog)
    assert any("HTTP Request: GET https://api.example/v1?key=" in t for t in texts)
    assert any("worker key=" in t for t in texts)
    assert any("ConnectionError" in t for t in texts)  # the traceback's type is kept
    assert [t for t in texts if KEY in t] == []
    assert KEY not in handler_output.getvalue()
    assert "reports.client WARNING retrying" in handler_output.getvalue()


def test_records_outside_a_guarded_call_are_made_as_before(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, handler_output: io.StringIO) -> None:
    from guardrails.agent_framework import guard

    guard(load_text(tmp_path, POLICY))  # installs the factory
    logging.getLogger("reports.client").info("plain %s", "value-1234")
    [record] = [r for r in caplog.records if r.name == "reports.client"]
    assert record.args == ("value-1234",) and record.getMessage() == "plain value-1234"


def test_the_factory_is_installed_once_and_chains_the_one_it_replaced(tmp_path: Path) -> None:
    from guardrails.agent_framework import guard

    made: list[str] = []
    previous = logging.getLogRecordFactory()

    def host_factory(*args: object, **kwargs: object) -> logging.LogRecord:
        record = previous(*args, **kwargs)  # type: ignore[arg-type]
        made.append(record.name)
        return record

    logging.setLogRecordFactory(host_factory)
    try:
        guard(load_text(tmp_path, POLICY))
        guard(load_text(tmp_path, POLICY))
        wrapped = logging.getLogRecordFactory()
        assert wrapped is not host_factory
        logging.getLogger("reports.chain").warning("x")
        assert made.count("reports.chain") == 1
    finally:
        logging.setLogRecordFactory(previous)
