"""Red team 17b: log records made while a guarded tool runs, outside its context.

The log record factory scrubbed records made in the tool's context (``CURRENT_SCRUBBER``,
a context variable). Two ways around it, both a tool's ordinary libraries take:

- a record made in a thread that does not copy the context (``loop.run_in_executor``,
  a ``threading.Thread``, a library's own worker pool): the injected key went out whole;
- a host (or a library) replacing the record factory after ``guard()`` installed its own,
  without chaining it: every record of a non-framework logger went out unscrubbed.

Now a record made anywhere while some guarded call runs is scrubbed with every running
call's scrubber (over-scrubbing a record of another thread is the safe side), and the
guard puts its factory back in front whenever a guarded call starts.
"""

from __future__ import annotations

import asyncio
import io
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_framework import AgentSession, tool

from guardrails.agent_framework import ScriptedChatClient
from guardrails.agent_framework.scripted import call, text
from tests.af_support import STREAMING, agent_with, load_text, run
from tests.leak_support import Observer, root_log_output

KEY = "sk-live-Hh4Jq8Vb2Nc6Xr0Tw"
POLICY = """apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: api}
spec:
  match: {tools: ["fetch_report"]}
  secrets:
    inject:
      api_key: {env: GR_RT17B_LOG_KEY}
"""


@tool
async def fetch_report(url: str, api_key: str) -> str:
    """Fetches a report; its client logs from worker threads without the context."""
    log = logging.getLogger("reports.pool")
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, log.info, "executor GET %s?key=%s", url, api_key)
    worker = threading.Thread(target=log.warning, args=("thread key=%s", api_key))
    worker.start()
    worker.join()
    return "report ready"


@pytest.fixture(name="handler_output")
def _handler_output(monkeypatch: pytest.MonkeyPatch,
                    caplog: pytest.LogCaptureFixture) -> Iterator[io.StringIO]:
    """A plain handler on the root logger, as a host configures it, and DEBUG everywhere."""
    monkeypatch.setenv("GR_RT17B_LOG_KEY", KEY)
    caplog.set_level(logging.DEBUG)
    with root_log_output() as out:
        yield out


async def _run_once(tmp_path: Path, stream: bool) -> None:
    obs = Observer()
    client = ScriptedChatClient([[call("fetch_report", url="https://api.example/v1")],
                                 [text("done")]])
    agent = agent_with(client, [fetch_report], obs.guard(load_text(tmp_path, POLICY)))
    await run(agent, "get the report", stream=stream, session=AgentSession())


@STREAMING
async def test_records_of_threads_without_the_context_are_scrubbed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, handler_output: io.StringIO,
        stream: bool) -> None:
    await _run_once(tmp_path, stream)
    texts = [r.getMessage() for r in caplog.records if r.name == "reports.pool"]
    assert any(t.startswith("executor GET https://api.example/v1?key=") for t in texts)
    assert any(t.startswith("thread key=") for t in texts)
    assert [t for t in texts if KEY in t] == []
    assert KEY not in handler_output.getvalue()


async def test_a_factory_replaced_after_the_guard_is_put_behind_it_again(
        tmp_path: Path, caplog: pytest.LogCaptureFixture,
        handler_output: io.StringIO) -> None:
    from guardrails.agent_framework import guard

    guard(load_text(tmp_path, POLICY))  # installs the guard's factory
    made: list[str] = []

    def host_factory(*args: object, **kwargs: object) -> logging.LogRecord:
        made.append(str(args[0]))
        return logging.LogRecord(*args, **kwargs)  # type: ignore[arg-type]

    logging.setLogRecordFactory(host_factory)  # does not chain the guard's
    await _run_once(tmp_path, False)
    texts = [r.getMessage() for r in caplog.records if r.name == "reports.pool"]
    assert len(texts) == 2 and [t for t in texts if KEY in t] == []
    assert KEY not in handler_output.getvalue()
    assert "reports.pool" in made  # the host's factory still makes the records


def test_records_outside_any_guarded_call_are_made_as_before(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, handler_output: io.StringIO) -> None:
    from guardrails.agent_framework import guard

    guard(load_text(tmp_path, POLICY))
    done = threading.Thread(target=logging.getLogger("reports.pool").info,
                            args=("plain %s", "value-1234"))
    done.start()
    done.join()
    [record] = [r for r in caplog.records if r.name == "reports.pool"]
    assert record.args == ("value-1234",) and record.getMessage() == "plain value-1234"
