"""Profile the hot paths with cProfile: append, restore, reduction, a Strands turn (SQLite), and import.

    python benchmarks/hotpaths.py append          # 300 four-message turns
    python benchmarks/hotpaths.py restore         # 50 restores of 2,000 active messages
    python benchmarks/hotpaths.py reduction       # 200 reductions at 10,000 entries
    python benchmarks/hotpaths.py import          # what `from contextledger import Ledger` imports
    python benchmarks/hotpaths.py model_call      # 2,000 before_model_call() that reduce nothing (memory)
    python benchmarks/hotpaths.py model_call --url sqlite   # the same on SQLite
    python benchmarks/hotpaths.py model_call --defer        # the count deferred to the next commit
    python benchmarks/hotpaths.py strands_turn    # 200 turns of a Strands Agent with LedgerSessionManager (SQLite)
    python benchmarks/hotpaths.py append --sort cumulative --top 40

Prints the top entries of the profile (by own time unless ``--sort`` says otherwise).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from contenders.cl import bulk_load, native_turn
from contextledger import Ledger, ReductionPlan, SlidingWindowConversationManager


def profile_import(top: int) -> None:
    code = "import contextledger.ledger, sys; print(len(sys.modules))"
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, check=True)
    rows: list[tuple[int, int, str]] = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        head, cumulative, name = line.split("|", 2)
        rows.append((int(cumulative), int(head.split(":", 1)[1]), name.rstrip()))
    print(f"{done.stdout.strip()} modules loaded")
    for total_us, own_us, module in sorted(rows, reverse=True)[:top]:
        print(f"{total_us / 1000:8.1f} ms cumulative {own_us / 1000:7.1f} ms self  {module}")


def profile_strands_turns(directory: Path, turns: int = 200) -> cProfile.Profile:
    """A real Strands ``Agent`` (scripted model) with ``LedgerSessionManager`` on SQLite.

    The turns run on this thread's event loop (``invoke_async``), so the profile sees
    the session manager's hooks, which ``agent(prompt)`` would run on a worker thread.
    """
    import asyncio
    import warnings

    from strands import Agent

    from contextledger.integrations.strands import LedgerSessionManager, ScriptedModel

    warnings.simplefilter("ignore")
    ledger = Ledger.connect(f"sqlite:///{directory}/strands.db")
    manager = LedgerSessionManager("p", ledger=ledger)
    agent = Agent(model=ScriptedModel(), callback_handler=None, session_manager=manager)
    profiler = cProfile.Profile()

    async def run() -> None:
        for n in range(turns + 30):
            agent.model.extend([f"answer {n}: " + "lorem ipsum " * 8])  # type: ignore[attr-defined]
            if n >= 30:  # the window of 40 is full from here on: every turn also evicts
                profiler.enable()
            await agent.invoke_async(f"question {n}")
            profiler.disable()

    asyncio.run(run())
    ledger.close()
    return profiler


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("path", choices=("append", "restore", "reduction", "import", "model_call", "strands_turn"))
    parser.add_argument("--sort", default="tottime")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--url", choices=("sqlite", "memory"), default=None, help="model_call: the store")
    parser.add_argument("--callers", default=None, help="strands_turn: also print the callers of this function")
    parser.add_argument("--defer", action="store_true", help="model_call: before_model_call(defer_count=True)")
    args = parser.parse_args()
    if args.path == "import":
        profile_import(args.top)
        return
    if args.path == "strands_turn":
        with tempfile.TemporaryDirectory() as directory:
            profiler = profile_strands_turns(Path(directory))
        stats = pstats.Stats(profiler).strip_dirs().sort_stats(args.sort)
        stats.print_stats(args.top)
        if args.callers:
            stats.print_callers(args.callers)
        return
    with tempfile.TemporaryDirectory() as directory:
        memory = args.path == "model_call" and args.url != "sqlite"
        ledger = Ledger.connect("memory://" if memory else f"sqlite:///{directory}/profile.db")
        conversation = ledger.conversation("profile", "agent")
        profiler = cProfile.Profile()
        if args.path == "model_call":
            # The benchmark's case: a sliding window of 40 checked before every call, 20
            # messages in the view, so the per-turn reduction finds nothing to do.
            conversation = ledger.conversation(
                "profile", "agent", manager=SlidingWindowConversationManager(window_size=40, per_turn=True)
            )
            for n in range(5):
                conversation.append(*native_turn("profile", n))
            profiler.enable()
            for _ in range(2_000):
                conversation.before_model_call(defer_count=args.defer)
            profiler.disable()
        elif args.path == "append":
            turns = [native_turn("profile", n) for n in range(300)]
            profiler.enable()
            for messages in turns:
                conversation.append(*messages)
            profiler.disable()
        elif args.path == "restore":
            bulk_load(conversation, total=2_000, active=2_000)
            profiler.enable()
            for _ in range(50):
                ledger.conversation("profile", "agent").messages  # noqa: B018 - the read is the point
            profiler.disable()
        else:
            bulk_load(conversation, total=10_000, active=48)
            for n in range(200):
                profiler.enable()
                conversation.apply_plan(
                    lambda view: ReductionPlan(strategy="sliding_window", evict=tuple(view.ids[:4])),
                    trigger="per_turn",
                )
                profiler.disable()
                conversation.append(*native_turn("profile", 10_000 + n))
        ledger.close()
    pstats.Stats(profiler).strip_dirs().sort_stats(args.sort).print_stats(args.top)


if __name__ == "__main__":
    main()
