"""``before_model_call()`` with nothing to do: the count committed at once vs deferred to the next write.

Two conversations per store, each with a sliding window checked before every call
(``per_turn``) that its view never reaches, so the check finds nothing to do. One
counts each call at once (``defer_count=False``, the default: one commit per call, the
count durable before the model is called); the other defers it (``defer_count=True``:
nothing written, the count carried by the next write). Rounds alternate between them in
one run (``--rounds`` rounds of ``--batch`` calls each, the order flipped every round),
on the memory store and on a SQLite file.

Two figures per store, each as the median per call or per turn over the rounds, in
client CPU time (``time.process_time``) and wall time, with the ratio at-once / deferred:

* ``call`` -- ``before_model_call()`` alone;
* ``turn`` -- ``before_model_call()`` then appending the model's answer (the write the
  deferred count rides with): two commits at once, one deferred.

Commits per call and per turn are counted by the store, not inferred from the times.

    python benchmarks/model_call.py
    python benchmarks/model_call.py --rounds 40 --batch 500
    python benchmarks/model_call.py --quick
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from contextledger import Conversation, Message, ReductionPlan, SlidingWindowConversationManager
from contextledger.core.changeset import Changeset
from contextledger.stores.base import LedgerStore
from contextledger.stores.memory import MemoryStore
from contextledger.stores.sql import SQLStore


class Counted:
    """Counts the commits a store is asked for (a wrapper: any store)."""

    def __init__(self, store: LedgerStore) -> None:
        self.store = store
        self.commits = 0
        commit = store.commit

        def counting(changeset: Changeset) -> int:
            self.commits += 1
            return commit(changeset)

        store.commit = counting  # type: ignore[method-assign]  # an instance attribute shadows the method


@dataclass
class Mode:
    name: str
    conversation: Conversation
    counter: Counted
    cpu: dict[str, list[float]] = field(default_factory=lambda: {"call": [], "turn": []})
    wall: dict[str, list[float]] = field(default_factory=lambda: {"call": [], "turn": []})
    commits: dict[str, float] = field(default_factory=dict)


def open_mode(store: LedgerStore, counter: Counted, name: str, defer: bool) -> Mode:
    manager = SlidingWindowConversationManager(window_size=1_000_000, per_turn=True)
    conversation = Conversation(store, f"bmc-{name}", "agent", manager=manager, defer_count=defer)
    for n in range(10):
        conversation.append(Message.user(f"question {n}: " + "words " * 20), Message.assistant(f"answer {n}"))
    return Mode(name, conversation, counter)


def timed(batch: int, step: Callable[[int], object]) -> tuple[float, float]:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for n in range(batch):
        step(n)
    return (time.process_time() - cpu0) / batch, (time.perf_counter() - wall0) / batch


def run_store(label: str, store: LedgerStore, rounds: int, batch: int) -> list[Mode]:
    counter = Counted(store)
    modes = [open_mode(store, counter, "at-once", False), open_mode(store, counter, "deferred", True)]
    answer = Message.assistant("ok")

    def call(mode: Mode) -> Callable[[int], object]:
        return lambda _n: mode.conversation.before_model_call()

    def turn(mode: Mode) -> Callable[[int], object]:
        def step(_n: int) -> None:
            mode.conversation.before_model_call()
            mode.conversation.append(answer.model_copy(update={"message_id": os.urandom(8).hex()}))

        return step

    for mode in modes:  # warm-up, and the commits each step costs
        for kind, make in (("call", call), ("turn", turn)):
            before = counter.commits
            timed(batch, make(mode))
            mode.commits[kind] = (counter.commits - before) / batch
            if kind == "call":
                mode.conversation.append(answer.model_copy(update={"message_id": os.urandom(8).hex()}))
    for r in range(rounds):
        for mode in modes if r % 2 == 0 else reversed(modes):
            for kind, make in (("call", call), ("turn", turn)):
                cpu, wall = timed(batch, make(mode))
                mode.cpu[kind].append(cpu)
                mode.wall[kind].append(wall)
            # Keep the view short, so what is timed stays the same from round to round.
            mode.conversation.apply_plan(
                lambda view: ReductionPlan(strategy="sliding_window", evict=tuple(view.ids[: len(view) - 20])),
                trigger="manual",
            )
    print(f"\n{label}: {rounds} rounds x {batch} per mode, alternating")
    print(
        "| figure | at once: CPU us | wall us | commits | deferred: CPU us | wall us | commits "
        "| ratio CPU | ratio wall |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    at_once, deferred = modes
    for kind in ("call", "turn"):
        a_cpu, a_wall = statistics.median(at_once.cpu[kind]), statistics.median(at_once.wall[kind])
        d_cpu, d_wall = statistics.median(deferred.cpu[kind]), statistics.median(deferred.wall[kind])
        print(
            f"| {kind} | {a_cpu * 1e6:.1f} | {a_wall * 1e6:.1f} | {at_once.commits[kind]:.0f} "
            f"| {d_cpu * 1e6:.1f} | {d_wall * 1e6:.1f} | {deferred.commits[kind]:.0f} "
            f"| {a_cpu / d_cpu:.1f}x | {a_wall / d_wall:.1f}x |"
        )
    return modes


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="3 rounds of 50")
    args = parser.parse_args()
    rounds, batch = (3, 50) if args.quick else (args.rounds, args.batch)
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    run_store("memory", MemoryStore(), rounds, batch)
    with tempfile.TemporaryDirectory() as directory:
        store = SQLStore.from_url(f"sqlite:///{directory}/model_call.db")  # WAL, synchronous=NORMAL: the default
        try:
            run_store("sqlite (file, the store's default durability)", store, rounds, batch)
        finally:
            store.close()
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
