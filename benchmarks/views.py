"""What reading a ledger costs a person: the web pages of a 2,000-turn session, the inspector at 500 turns.

Builds one SQLite ledger holding the two-agent session the web tests use
(``tests/web/longsession.py``: 2,000 turns per agent, a tool-using ``lead`` with
truncations, summaries, overflows, pins and a crash repaired, a ``writer`` under a
per-turn sliding window -- about 12,000 entries and 1,200 reductions) and a 500-turn
session for ``contextledger history``, then measures, in one run:

* the web pages through the ASGI app in process (Starlette's test client, the ledger
  opened read-only as ``serve`` opens it): the session page, one agent's page, a page
  of filtered reductions, a search, one entry, one reduction, and the poll of a page
  that follows the ledger while nothing changes (``If-None-Match``, answered 304);
* ``contextledger timeline`` of the session (render only);
* the same session page and timeline file as the baseline renders them -- the web view
  of another revision (``--baseline main`` by default), its ``src/`` exported from git
  into a temporary folder and run in a process of its own;
* the floor: reading what the session page shows (each agent's live view, the
  session's reductions, summaries and pin events) without drawing anything;
* ``contextledger history`` of the 500-turn session and ``contextledger --version``,
  as processes writing to a pipe.

Sizes are bytes of the response body; times are medians and 95th percentiles of
``--repeats`` runs after one warm-up, cases alternated so drift hits all alike.

    python benchmarks/views.py                      # a few minutes on 2 cores
    python benchmarks/views.py --repeats 5 --baseline ''   # no baseline
    python benchmarks/views.py --write-results      # also rewrite its section of DETAILS.md
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the web tests' session builder

from tests.web.longsession import NEEDLE, build_long_session  # noqa: E402

from _details import replace_section, versions  # noqa: E402
from contextledger import Ledger, Message  # noqa: E402
from contextledger.managers import SlidingWindowConversationManager  # noqa: E402

BIG, SMALL = "incident-2000", "small-500"

BASELINE_SCRIPT = """
import json, sys, time
from contextledger import Ledger
from contextledger.web.render import render_session
url, session, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
out = {}
with Ledger.connect(url, read_only=True) as ledger:
    for name, kwargs in (("session page", {}), ("timeline file", {"standalone": True})):
        html = render_session(ledger, session, **kwargs)
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            render_session(ledger, session, **kwargs)
            samples.append(time.perf_counter() - start)
        out[name] = {"bytes": len(html.encode()), "samples": samples}
print(json.dumps(out))
"""


def build_small(url: str, turns: int) -> None:
    """A tool-using conversation of ``turns`` turns under a per-turn sliding window of 40."""
    with Ledger.connect(url) as ledger:
        conversation = ledger.conversation(
            SMALL, "agent", manager=SlidingWindowConversationManager(window_size=40, per_turn=True)
        )
        for turn in range(turns):
            conversation.append(Message.user(f"[turn {turn}] check service {turn % 17}"))
            conversation.before_model_call()
            conversation.append(Message.assistant(f"Service {turn % 17} looks fine at turn {turn}."))
            conversation.after_model_call()


def timed(action: Callable[[], object], repeats: int) -> list[float]:
    action()  # warm-up: templates compiled, caches filled
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return samples


def p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:.0f} | {p95(samples) * 1000:.0f}"


def baseline(ref: str, url: str, repeats: int) -> dict[str, dict[str, object]] | None:
    """The session page and timeline file as revision ``ref`` renders them (``None``: cannot)."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, "src", "migrations"], capture_output=True, check=False
    )
    if archive.returncode != 0:
        print(f"no baseline: git archive {ref} failed: {archive.stderr.decode().strip()}")
        return None
    with tempfile.TemporaryDirectory() as folder:
        with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
            tar.extractall(folder, filter="data")
        done = subprocess.run(
            [sys.executable, "-c", BASELINE_SCRIPT, url, BIG, str(repeats)],
            capture_output=True,
            text=True,
            env={"PYTHONPATH": str(Path(folder) / "src"), "PATH": "/usr/bin:/bin"},
            check=False,
        )
    if done.returncode != 0:
        print(f"no baseline: {ref} could not render the session: {done.stderr.strip()[-400:]}")
        return None
    found: dict[str, dict[str, object]] = json.loads(done.stdout)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=2000, help="Turns per agent of the big session (default 2000).")
    parser.add_argument("--small", type=int, default=500, help="Turns of the session `history` prints (default 500).")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--baseline", default="main", help="Git revision whose web view is the baseline ('' for none).")
    parser.add_argument("--write-results", action="store_true")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]

    from starlette.testclient import TestClient

    from contextledger.web.app import create_app
    from contextledger.web.render import standalone_session

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "views.db"
        url = f"sqlite:///{path}"
        started = time.perf_counter()
        built = build_long_session(url, BIG, turns=args.turns)
        build_small(url, args.small)
        print(f"built {args.turns} turns x 2 agents + {args.small} turns in {time.perf_counter() - started:.1f}s")
        rows: list[str] = []
        ratios: list[str] = []
        with Ledger.connect(url, read_only=True) as ledger:
            entries = sum(len(ledger.history(BIG, a)) for a in ledger.agents(BIG))
            reductions = ledger.reductions(BIG)
            size = f"{len(ledger.agents(BIG))} agents, {entries} entries, {len(reductions)} reductions"
            client = TestClient(create_app(ledger))
            etag = client.get("/session", params={"id": BIG}).headers["etag"]
            middle = reductions[len(reductions) // 2]
            since = min(r.created_at for r in reductions).timestamp()
            cases: dict[str, Callable[[], object]] = {
                "session page (GET /session?id=…)": lambda: client.get("/session", params={"id": BIG}),
                "one agent's page, history page 1": lambda: client.get("/session", params={"id": BIG, "agent": "lead"}),
                "reductions filtered by trigger and time (part)": lambda: client.get(
                    "/session",
                    params={
                        "id": BIG,
                        "trigger": "reactive",
                        "from": since,
                        "to": since + 6 * 3600,
                        "part": "reductions",
                    },
                ),
                "search of the session's messages and summaries": lambda: client.get(
                    "/session", params={"id": BIG, "q": NEEDLE}
                ),
                "one entry (GET /entry?…)": lambda: client.get(
                    "/entry", params={"session": BIG, "agent": "lead", "id": built.needle_entry}
                ),
                "one reduction (GET /reduction?…)": lambda: client.get(
                    "/reduction", params={"session": BIG, "agent": middle.agent_id, "id": middle.reduction_id}
                ),
                "a following page's poll, nothing changed (304)": lambda: client.get(
                    "/session", params={"id": BIG}, headers={"If-None-Match": etag}
                ),
                "timeline file (render only)": lambda: standalone_session(ledger, BIG),
                "floor: what the session page reads, not drawn": lambda: (
                    [ledger.store.load(BIG, a) for a in ledger.agents(BIG)],
                    ledger.reductions(BIG),
                    ledger.summaries(BIG),
                    ledger.pin_history(BIG),
                ),
            }
            sizes: dict[str, int] = {}
            for name, action in cases.items():  # also the warm-up: templates compiled, caches filled
                reply = action()
                if isinstance(reply, str):
                    sizes[name] = len(reply.encode())
                elif isinstance(getattr(reply, "content", None), bytes):
                    status = getattr(reply, "status_code", 0)
                    assert status in (200, 304), (name, status)
                    sizes[name] = len(getattr(reply, "content", b""))
            samples: dict[str, list[float]] = {name: [] for name in cases}
            for round_ in range(args.repeats):
                names = list(cases)
                shift = round_ % len(names)
                for name in names[shift:] + names[:shift]:
                    samples[name].append(_once(cases[name]))
        old = baseline(args.baseline, url, max(3, args.repeats // 2)) if args.baseline else None
        floor = statistics.median(samples["floor: what the session page reads, not drawn"])
        for name in cases:
            median = statistics.median(samples[name])
            bytes_ = f"{sizes[name]:,}" if name in sizes else "-"
            rows.append(f"| {name} | {bytes_} | {ms(samples[name])} | {median / floor:.1f}x |")
            print(rows[-1])
        if old is not None:
            for name, mine in (
                ("session page", "session page (GET /session?id=…)"),
                ("timeline file", "timeline file (render only)"),
            ):
                then = old[name]
                then_samples = [float(s) for s in then["samples"]]  # type: ignore[attr-defined]
                then_bytes = int(then["bytes"])  # type: ignore[call-overload]
                rows.append(
                    f"| baseline ({args.baseline}): {name} | {then_bytes:,} | {ms(then_samples)} | "
                    f"{statistics.median(then_samples) / floor:.1f}x |"
                )
                print(rows[-1])
                ratio_bytes = then_bytes / sizes[mine]
                ratio_time = statistics.median(then_samples) / statistics.median(samples[mine])
                ratios.append(f"the {name} {ratio_bytes:.1f}x smaller and {ratio_time:.1f}x faster")
                print(f"   {name}: {ratio_bytes:.1f}x smaller, {ratio_time:.1f}x faster than {args.baseline}")
        command = [sys.executable, "-m", "contextledger"]
        history = timed(
            lambda: subprocess.run([*command, "history", SMALL, "--url", url], stdout=subprocess.DEVNULL, check=True),
            max(3, args.repeats // 2),
        )
        rows.append(f"| `contextledger history` of {args.small} turns (process, piped) | - | {ms(history)} | - |")
        print(rows[-1])
        version = timed(lambda: subprocess.run([*command, "--version"], stdout=subprocess.DEVNULL, check=True), 10)
        rows.append(f"| `contextledger --version` (process) | - | {ms(version)} | - |")
        print(rows[-1])
    if args.write_results:
        replace_section(
            "## Reading a ledger: web pages and the inspector (`benchmarks/views.py`)",
            [
                f"The session: {size} ({args.turns} turns per agent; see `tests/web/longsession.py`). "
                "Web pages through the ASGI app in process (Starlette's test client, SQLite opened read-only); "
                f"bytes of the body, wall-clock median and 95th percentile of {args.repeats} runs after one warm-up, "
                "and each time as a multiple of the floor (reading what the session page shows, drawing nothing)."
                + (
                    f" The baseline is the web view of `{args.baseline}` on the same ledger, in a process of its own."
                    if args.baseline
                    else ""
                ),
                "",
                "| what | bytes | median ms | p95 ms | × floor |",
                "|---|---|---|---|---|",
                *rows,
                "",
                *([f"Against `{args.baseline}`: " + "; ".join(ratios) + ".", ""] if ratios else []),
                f"Load average {load_before:.1f} at the start and {os.getloadavg()[0]:.1f} at the end "
                f"({os.cpu_count()} CPUs): on a loaded machine the milliseconds are long; the ratios, measured in "
                "the same run, hold.",
                "",
                versions(),
            ],
        )


def _once(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
