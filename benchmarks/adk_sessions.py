"""ADK session services side by side in one process: ``LedgerSessionService`` vs ADK's ``DatabaseSessionService``.

Three services run the same steps alternately (the order rotated every round), through
ADK's public API, in the project's own environment (``google-adk`` is in the ``adk``
extra):

* ADK's ``InMemorySessionService`` (the baseline: nothing is written anywhere),
* ADK's ``DatabaseSessionService`` on a SQLite file (aiosqlite; WAL, ``synchronous=NORMAL``),
* contextledger's ``LedgerSessionService`` on a SQLite file (the same durability).

Workloads:

* ``append`` -- one turn of four events (``append_event`` each: the user's text, the
  model's function call, the function response, the answer), as the harness's ``adk``
  contender appends them;
* ``restore`` -- ``get_session`` of a session of ``--turns`` turns (every event);
* ``turn`` -- one turn of a real ``Runner``: the user's message, one model call (the
  scripted model), the answer; with ``LedgerPlugin`` on the ledger's service, so the
  model call is counted and its input recorded.

It prints the median and 95th percentile of each and the ratios to the ledger's service
(a ratio of medians; the machine's load moves every absolute figure, the interleaving
keeps the ratios comparable)::

    python benchmarks/adk_sessions.py                 # 200 turns
    python benchmarks/adk_sessions.py --quick         # 40 turns
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contenders.adk import APP, USER, events_of


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def _services(directory: Path) -> dict[str, Callable[[], Any]]:
    from google.adk.sessions import DatabaseSessionService, InMemorySessionService
    from sqlalchemy import event
    from sqlalchemy.ext.asyncio import create_async_engine

    from contextledger.integrations.adk import LedgerSessionService

    def database() -> Any:
        engine = create_async_engine(f"sqlite+aiosqlite:///{directory / 'adk.db'}")

        @event.listens_for(engine.sync_engine, "connect")
        def _pragmas(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            for pragma in ("foreign_keys = ON", "journal_mode = WAL", "synchronous = NORMAL"):
                cursor.execute(f"PRAGMA {pragma}")
            cursor.close()

        return DatabaseSessionService(db_engine=engine)

    return {
        "ADK InMemorySessionService": InMemorySessionService,
        "ADK DatabaseSessionService (SQLite)": database,
        "contextledger LedgerSessionService (SQLite)": lambda: LedgerSessionService(
            f"sqlite:///{directory / 'ledger.db'}"
        ),
    }


async def _append_and_restore(services: dict[str, Any], turns: int, restores: int) -> dict[str, dict[str, list[float]]]:
    out: dict[str, dict[str, list[float]]] = {name: {"append": [], "restore": []} for name in services}
    sessions = {
        name: await s.create_session(app_name=APP, user_id=USER, session_id="bench") for name, s in services.items()
    }
    names = list(services)
    for n in range(turns):
        rotated = names[n % len(names) :] + names[: n % len(names)]
        for name in rotated:
            events = events_of("bench", n)
            gc.collect()
            t0 = time.perf_counter()
            for event in events:
                await services[name].append_event(sessions[name], event)
            out[name]["append"].append(time.perf_counter() - t0)
    for r in range(restores):
        rotated = names[r % len(names) :] + names[: r % len(names)]
        for name in rotated:
            gc.collect()
            t0 = time.perf_counter()
            got = await services[name].get_session(app_name=APP, user_id=USER, session_id="bench")
            out[name]["restore"].append(time.perf_counter() - t0)
            assert got is not None and len(got.events) == 4 * turns
    return out


async def _runner_turns(services: dict[str, Any], turns: int) -> dict[str, list[float]]:
    from google.adk.agents import LlmAgent
    from google.adk.apps import App
    from google.adk.runners import Runner
    from google.genai import types

    from contextledger.integrations.adk import LedgerPlugin, LedgerSessionService, ScriptedLlm

    runners = {}
    for name, service in services.items():
        model = ScriptedLlm(script=[f"answer {n}" for n in range(turns)])
        plugins = [LedgerPlugin(service)] if isinstance(service, LedgerSessionService) else []
        app = App(name=APP, root_agent=LlmAgent(name="assistant", model=model), plugins=plugins)
        runners[name] = Runner(app=app, session_service=service)
        await service.create_session(app_name=APP, user_id=USER, session_id="turns")
    out: dict[str, list[float]] = {name: [] for name in services}
    names = list(services)
    for n in range(turns):
        rotated = names[n % len(names) :] + names[: n % len(names)]
        for name in rotated:
            message = types.Content(role="user", parts=[types.Part(text=f"question {n}")])
            gc.collect()
            t0 = time.perf_counter()
            async for _ in runners[name].run_async(user_id=USER, session_id="turns", new_message=message):
                pass
            out[name].append(time.perf_counter() - t0)
    return out


def _table(title: str, series: dict[str, list[float]], reference: str) -> str:
    ref = statistics.median(series[reference])
    lines = [f"\n{title}\n", "| service | median ms | p95 ms | x the ledger's median |", "|---|---|---|---|"]
    for name, values in series.items():
        median = statistics.median(values)
        lines.append(f"| {name} | {median * 1000:.3f} | {_p95(values) * 1000:.3f} | {median / ref:.2f}x |")
    return "\n".join(lines)


async def main(turns: int, restores: int) -> None:
    ledger = "contextledger LedgerSessionService (SQLite)"
    with tempfile.TemporaryDirectory() as tmp:
        makers = _services(Path(tmp))
        services = {name: make() for name, make in makers.items()}
        try:
            measured = await _append_and_restore(services, turns, restores)
            runs = await _runner_turns(services, max(10, turns // 4))
        finally:
            for service in services.values():
                close = getattr(service, "close", None)
                if close is not None:
                    await close()
    print(_table(f"Append one turn (4 events), {turns} turns", {n: m["append"] for n, m in measured.items()}, ledger))
    print(
        _table(
            f"get_session of {4 * turns} events, {restores} times",
            {n: m["restore"] for n, m in measured.items()},
            ledger,
        )
    )
    print(_table(f"One Runner turn (one model call), {len(runs[ledger])} turns", runs, ledger))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--restores", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="40 turns, 6 restores")
    args = parser.parse_args()
    asyncio.run(main(40 if args.quick else args.turns, 6 if args.quick else args.restores))
