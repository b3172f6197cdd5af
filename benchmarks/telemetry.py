"""What telemetry costs the append hot path: off (no provider), against no instrumentation at all, and on.

One process, one conversation per variant, the variants stepped alternately round after
round (the order rotated each round) so that load on a shared machine hits them alike:

* ``baseline`` -- the conversation's telemetry calls replaced by straight calls
  (``store.commit(changeset)``, ``store.load(...)``): the code as it was before telemetry;
* ``off`` -- as shipped, with no tracer or meter provider configured (the default);
* ``on`` -- an SDK tracer provider and meter provider configured, spans and metrics
  recorded and dropped (no exporter), to show what turning it on costs.

Each append is one turn of four messages (user, assistant toolUse, toolResult,
assistant) as one commit. The script prints per-append medians and the ratios to the
baseline; the target is ``off / baseline`` below 1.02.

    python benchmarks/telemetry.py                         # memory and SQLite
    python benchmarks/telemetry.py --rounds 40 --appends 50
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from contextledger import Conversation, Ledger, Message, telemetry
from contextledger.conversation import modelcalls, reducer, transaction
from contextledger.telemetry import spans


def turn(n: int) -> list[Message]:
    use = {"toolUse": {"toolUseId": f"t{n}", "name": "lookup", "input": {"key": n}}}
    result = {"toolResult": {"toolUseId": f"t{n}", "status": "success", "content": [{"text": f"value {n}"}]}}
    return [
        Message.user(f"question {n} " + "lorem ipsum " * 8),
        Message(role="assistant", content=[use]),
        Message(role="user", content=[result]),
        Message.assistant(f"answer {n} " + "dolor sit amet " * 8),
    ]


# The conversation's telemetry calls as straight calls: what the hot path was before them.
STRAIGHT = SimpleNamespace(
    commit=lambda store, changeset, attempt=0, *, settling=False: store.commit(changeset),
    restore=lambda store, session_id, agent_id: store.load(session_id, agent_id),
    reduction=lambda conversation, request, run, **_: run(),
    summarize=lambda conversation, entries, summarizer, write: write(),
    reduced=lambda done, before: None,
    window=lambda conversation: None,
)


# The conversation's modules that call telemetry (each reads its module attribute).
INSTRUMENTED = (transaction, reducer, modelcalls)


@contextmanager
def variant(name: str) -> Iterator[None]:
    if name == "baseline":
        for module in INSTRUMENTED:
            setattr(module, "telemetry", STRAIGHT)  # noqa: B010 - the call sites read the module attribute
        try:
            yield
        finally:
            for module in INSTRUMENTED:
                setattr(module, "telemetry", spans)  # noqa: B010
    elif name == "on":
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.trace import TracerProvider

        telemetry.configure(tracer_provider=TracerProvider(), meter_provider=MeterProvider())
        try:
            yield
        finally:
            telemetry.configure()
    else:
        yield


def measure(chat: Conversation, name: str, start: int, appends: int) -> list[float]:
    turns = [turn(start + i) for i in range(appends)]
    timings = []
    with variant(name):
        for messages in turns:
            began = time.perf_counter()
            chat.append(*messages)
            timings.append(time.perf_counter() - began)
    return timings


def run(url_of: Callable[[str], str], rounds: int, appends: int) -> dict[str, float]:
    names = ["baseline", "off", "on"]
    samples: dict[str, list[float]] = {name: [] for name in names}
    ledgers = {name: Ledger.connect(url_of(name)) for name in names}
    chats = {name: ledgers[name].conversation(f"bench-{name}") for name in names}
    try:
        for name in names:  # warm up: the first commits create the conversation and fill caches
            measure(chats[name], name, 0, 20)
        for r in range(rounds):
            for name in names[r % 3 :] + names[: r % 3]:
                samples[name] += measure(chats[name], name, 1000 + r * appends, appends)
    finally:
        for ledger in ledgers.values():
            ledger.close()
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--appends", type=int, default=40)
    parser.add_argument("--backends", default="memory,sqlite")
    args = parser.parse_args()
    assert telemetry.active() is None, "a provider is configured in this process: 'off' would not be off"
    with tempfile.TemporaryDirectory() as directory:
        urls: dict[str, Callable[[str], str]] = {
            "memory": lambda _name: "memory://",
            "sqlite": lambda name: f"sqlite:///{Path(directory) / name}.db",
        }
        print("| backend | baseline (us) | off (us) | on (us) | off / baseline | on / baseline |")
        print("|---|---:|---:|---:|---:|---:|")
        for backend in args.backends.split(","):
            medians: dict[str, Any] = run(urls[backend], args.rounds, args.appends)
            base = medians["baseline"]
            print(
                f"| {backend} | {base * 1e6:.1f} | {medians['off'] * 1e6:.1f} | {medians['on'] * 1e6:.1f}"
                f" | {medians['off'] / base:.3f} | {medians['on'] / base:.3f} |"
            )


if __name__ == "__main__":
    main()
