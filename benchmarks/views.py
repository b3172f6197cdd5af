"""What reading a ledger costs a person: the web pages of a 2,000-turn session, the inspector at 500 turns.

Builds one SQLite ledger with a session of 2,000 turns (user prompt, tool call, tool
result, answer: 8,000 entries, a per-turn sliding window of 40, so about 2,000
reductions and 7,960 evicted entries, a pin, truncated tool results) and one of 500
turns, then times:

* the web pages through the ASGI app in process (Starlette's test client): the session
  page, one agent's page (first and last page of the full history), one entry;
* ``contextledger timeline`` of the 2,000-turn session (every entry in one file);
* ``contextledger history`` of the 500-turn session, as a process writing to a pipe;
* ``contextledger --version`` as a process.

    python benchmarks/views.py                    # about two minutes on 2 cores
    python benchmarks/views.py --turns 500        # quicker
    python benchmarks/views.py --write-results    # also rewrite its section of RESULTS.md
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _servers import replace_section, versions
from contextledger import Ledger, Message
from contextledger.managers import SlidingWindowConversationManager

BIG, SMALL = "big-2000", "small-500"


def build(url: str, session_id: str, turns: int) -> None:
    """A tool-using conversation of ``turns`` turns under a per-turn sliding window of 40."""
    with Ledger.connect(url) as ledger:
        conversation = ledger.conversation(
            session_id,
            "agent",
            manager=SlidingWindowConversationManager(window_size=40, per_turn=True, truncate_threshold=400),
        )
        (goal,) = conversation.append(Message.user("Goal: keep the incident timeline straight."))
        conversation.pin(goal.message_id)
        for turn in range(turns):
            conversation.append(Message.user(f"[turn {turn}] check service {turn % 17}"))
            conversation.before_model_call()
            conversation.after_model_call()
            conversation.append(
                Message.tool_use(f"c{turn}", "read_logs", {"service": turn % 17}, text="reading logs"),
                Message.tool_result(f"c{turn}", f"log line {turn}: pool wait 3 ms. " * 20),
            )
            conversation.before_model_call()
            conversation.after_model_call()
            conversation.append(Message.assistant(f"Service {turn % 17} looks fine at turn {turn}."))
            conversation.after_invocation()


def timed(action: Callable[[], object], repeats: int) -> list[float]:
    action()  # warm-up: templates compiled, caches filled
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return samples


def fmt(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"{statistics.median(samples) * 1000:.0f} | {p95 * 1000:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=2000, help="Turns of the big session (default 2000).")
    parser.add_argument("--small", type=int, default=500, help="Turns of the session `history` prints (default 500).")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--write-results", action="store_true")
    args = parser.parse_args()

    from starlette.testclient import TestClient

    from contextledger.web.app import create_app
    from contextledger.web.render import render_session

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "views.db"
        url = f"sqlite:///{path}"
        started = time.perf_counter()
        build(url, BIG, args.turns)
        build(url, SMALL, args.small)
        print(f"built {args.turns}+{args.small} turns in {time.perf_counter() - started:.1f}s")
        rows: list[str] = []
        with Ledger.connect(url, read_only=True) as ledger:
            entries = len(ledger.history(BIG, "agent"))
            reductions = len(ledger.reductions(BIG, "agent"))
            entry_id = ledger.history(BIG, "agent")[entries // 2].message.message_id
            pages = -(-(entries + len(ledger.summaries(BIG, "agent"))) // 200)
            client = TestClient(create_app(ledger))
            cases: dict[str, Callable[[], object]] = {
                "session page (GET /session?id=…)": lambda: client.get("/session", params={"id": BIG}),
                "agent page, history page 1": lambda: client.get("/session", params={"id": BIG, "agent": "agent"}),
                f"agent page, history page {pages} (last)": lambda: client.get(
                    "/session", params={"id": BIG, "agent": "agent", "page": pages}
                ),
                "one entry (GET /entry?…)": lambda: client.get(
                    "/entry", params={"session": BIG, "agent": "agent", "id": entry_id}
                ),
                "timeline file (every entry, render only)": lambda: render_session(ledger, BIG, standalone=True),
            }
            for name, action in cases.items():
                reply = action()
                status = getattr(reply, "status_code", 200)
                assert status == 200, (name, status)
                samples = timed(action, args.repeats if "timeline" not in name else max(3, args.repeats // 3))
                rows.append(
                    f"| {name} | {args.turns} turns, {entries} entries, {reductions} reductions | {fmt(samples)} |"
                )
                print(rows[-1])
        command = [sys.executable, "-m", "contextledger"]
        history = timed(
            lambda: subprocess.run([*command, "history", SMALL, "--url", url], stdout=subprocess.DEVNULL, check=True),
            max(3, args.repeats // 2),
        )
        size = f"{args.small} turns, {args.small * 4 + 1} entries"
        rows.append(f"| `contextledger history` (process, piped) | {size} | {fmt(history)} |")
        print(rows[-1])
        version = timed(lambda: subprocess.run([*command, "--version"], stdout=subprocess.DEVNULL, check=True), 10)
        rows.append(f"| `contextledger --version` (process) | - | {fmt(version)} |")
        print(rows[-1])
    if args.write_results:
        replace_section(
            "## Reading a ledger: web pages and the inspector (`benchmarks/views.py`)",
            [
                "Wall-clock time to produce each page or output, median and 95th percentile of "
                f"{args.repeats} runs after one warm-up. The session: a tool-using agent under a per-turn "
                "sliding window of 40 (user prompt, tool call, tool result, answer per turn), one pin. "
                "Web pages through the ASGI app in process (Starlette's test client, SQLite opened read-only); "
                "the session page draws the chart of every reduction, the live view and the newest 40 "
                "history rows; an agent's page draws 200 history rows a page. Commands as processes "
                "(interpreter start included), output to a pipe.",
                "",
                "| what | size | median ms | p95 ms |",
                "|---|---|---|---|",
                *rows,
                "",
                versions(),
            ],
        )


if __name__ == "__main__":
    main()
