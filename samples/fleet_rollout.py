"""Fleet rollout: a signed bundle, hot reload, a per-tenant binding switched from audit to
enforce, and a counter shared by replicas.

    .venv/bin/python samples/fleet_rollout.py

Offline and self-contained: the bundle is built in a temporary directory, two guards stand
for two replicas sharing one SQLite store, and the model is a scripted stand-in. On a real
fleet the bundle is served over HTTPS (``guardrails.watch("https://...", key=...)``) and the
store is ``guardrails.fleet.stores.RedisStore``; see docs/deployment.md.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from agent_framework import Agent, tool

import guardrails
from guardrails.agent_framework import ScriptedChatClient, guard
from guardrails.agent_framework.scripted import call
from guardrails.fleet.bundle import build, generate_key
from guardrails.fleet.stores import SQLiteStore

POLICY = """
apiVersion: guardrails/v1
kind: ToolPolicy
metadata: {name: payouts}
spec:
  match: {tools: [send_payout]}
  params: {cap: 500}
  counters:
    - {name: payouts, key: 'principal.tenant', window: 1d, limit: 3}
  rules:
    - {name: over-cap, when: 'args.amount > params.cap', action: deny,
       message: Payout over the tenant's cap.}
    - {name: daily-limit, when: 'counters.payouts.exceeded', action: deny,
       messageExpression: '"Daily payout limit reached (" + string(counters.payouts.limit) + ")."'}
---
apiVersion: guardrails/v1
kind: PolicyBinding
metadata: {name: acme}
spec:
  policy: payouts
  mode: MODE
  match: {when: 'principal.tenant == "acme"'}
"""


@tool
def send_payout(account: str, amount: float) -> str:
    """Send a payout."""
    print(f"   tool ran: send_payout({account!r}, {amount!r})")
    return "sent"


class PrintingLog:
    def write(self, record: Any) -> None:
        rules = [f"{r['policy']}/{r['rule']}" + (" (audit)" if r["audit"] else "")
                 for r in record["rules"]]
        print(f"   decision: effect={record['effect']} revision={record['revision'][:8]} "
              f"rules={rules}")


async def pay(middleware: list[Any], amount: float) -> None:
    client = ScriptedChatClient([[call("send_payout", account="ACME-1", amount=amount)]])
    await Agent(client=client, tools=[send_payout], middleware=middleware).run("pay out")


def publish(directory: Path, bundle: Path, key: Path, mode: str) -> str:
    (directory / "payouts.yaml").write_text(POLICY.replace("MODE", mode))
    return build(directory, bundle, sign=key).revision


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        private, public = generate_key(work / "signing.key")
        policies_dir = work / "policies"
        policies_dir.mkdir()
        bundle = work / "policies.tgz"

        print("1. The policy is bound to tenant acme in audit mode, signed and published")
        publish(policies_dir, bundle, Path(private), "audit")
        source = guardrails.watch(bundle, interval=3600, key=public)
        store = SQLiteStore(work / "state.db")
        replica_a = guard(source, principal={"tenant": "acme"}, counters=store,
                          decision_log=PrintingLog())
        replica_b = guard(source, principal={"tenant": "acme"}, counters=store,
                          decision_log=PrintingLog())
        await pay(replica_a, 900)  # over the cap: recorded as would-be denial, runs

        print("2. A tampered bundle is published: refused, the good set stays")
        data = bytearray(bundle.read_bytes())
        data[len(data) // 2] ^= 0xFF
        bundle.write_bytes(bytes(data))
        source.refresh()
        print(f"   status ok={source.status.ok}: {source.status.error}")
        await pay(replica_b, 900)

        print("3. The binding is switched to enforce: one field, a new signed bundle")
        publish(policies_dir, bundle, Path(private), "enforce")
        source.refresh()
        print(f"   status ok={source.status.ok}, revision {source.status.revision[:8]}")
        await pay(replica_a, 900)  # now denied

        print("4. The daily limit (3 payouts) is shared by both replicas; the two payouts that")
        print("   ran while the binding was in audit mode count too")
        for i, replica in enumerate([replica_a, replica_b, replica_a, replica_b]):
            await pay(replica, 100 + i)
        source.close()
        store.close()


if __name__ == "__main__":
    asyncio.run(main())
