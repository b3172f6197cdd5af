"""What encryption at rest costs: a turn's commit and a restore, sealed and clear, side by side.

Two SQLite ledgers (and, with ``--redis URL``, two Redis key prefixes), one opened with
a keyring, one without, stepped alternately so drift on a shared machine hits both:

* ``append``: one turn of four messages (user text, toolUse, toolResult, answer) as one commit;
* ``restore``: opening a conversation of 40 active messages (a new ``Conversation`` each time);
* ``rotate``: re-sealing a 400-message conversation under a new key (batches of 200).

Reported as medians in milliseconds and the sealed/clear ratio (CPU and wall).

    python benchmarks/encryption.py               # about a minute on 2 cores
    python benchmarks/encryption.py --rounds 50 --redis redis://127.0.0.1:6379/0
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from contextledger import Ledger, Message
from contextledger.encryption import Keyring, new_key
from contextledger.history.rotation import rotate


def turn(n: int) -> list[Message]:
    """One turn of four messages, about 1 KB of text."""
    return [
        Message.user(f"[turn {n}] what does the log of service {n % 17} say? " * 4),
        Message.tool_use(f"c{n}", "read_logs", {"service": n % 17}),
        Message.tool_result(f"c{n}", f"log line {n}: pool wait 3 ms. " * 20),
        Message.assistant(f"Service {n % 17} looks fine at turn {n}. " * 3),
    ]


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall, cpu) seconds of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def run(clear: Ledger, sealed: Ledger, rounds: int) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """Alternate the two ledgers over every workload; the samples per workload and ledger."""
    samples: dict[str, dict[str, list[tuple[float, float]]]] = {}
    pairs = {"clear": clear, "sealed": sealed}
    chats = {name: ledger.conversation("bench-append") for name, ledger in pairs.items()}
    for ledger in pairs.values():
        window = ledger.conversation("bench-restore")
        for n in range(10):
            window.append(*turn(n))
    for r in range(rounds):
        order = list(pairs) if r % 2 == 0 else list(reversed(pairs))
        for name in order:
            samples.setdefault("append", {}).setdefault(name, []).append(
                timed(lambda name=name, r=r: chats[name].append(*turn(r)))  # type: ignore[misc]
            )
            samples.setdefault("restore", {}).setdefault(name, []).append(
                timed(lambda name=name: pairs[name].conversation("bench-restore").view)  # type: ignore[misc]
            )
    return samples


def main() -> None:
    """Run and print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--redis", default=None, help="also measure on this Redis (two fresh key prefixes)")
    args = parser.parse_args()
    old, new = new_key(), new_key()
    with tempfile.TemporaryDirectory() as folder:
        targets: list[tuple[str, str, str, dict[str, str]]] = [
            ("SQLite", f"sqlite:///{Path(folder) / 'clear.db'}", f"sqlite:///{Path(folder) / 'sealed.db'}", {})
        ]
        if args.redis:
            stamp = str(int(time.time()))
            targets.append(("Redis", args.redis, args.redis, {"clear": f"bc{stamp}", "sealed": f"bs{stamp}"}))
        print(f"{'backend':8} {'workload':8} {'clear ms':>10} {'sealed ms':>10} {'wall x':>7} {'cpu x':>7}")
        for backend, clear_url, sealed_url, prefixes in targets:
            clear_opts = {"key_prefix": prefixes["clear"]} if prefixes else {}
            sealed_opts = {"key_prefix": prefixes["sealed"]} if prefixes else {}
            with (
                # shared_views=0: each restore reads (and unseals) the store's rows.
                Ledger.connect(clear_url, shared_views=0, **clear_opts) as clear,
                Ledger.connect(sealed_url, encryption=Keyring([("old", old)]), shared_views=0, **sealed_opts) as sealed,
            ):
                for workload, by_name in run(clear, sealed, args.rounds).items():
                    c = [statistics.median(s[i] for s in by_name["clear"]) for i in (0, 1)]
                    e = [statistics.median(s[i] for s in by_name["sealed"]) for i in (0, 1)]
                    print(
                        f"{backend:8} {workload:8} {c[0] * 1000:10.3f} {e[0] * 1000:10.3f} "
                        f"{e[0] / c[0]:7.2f} {e[1] / max(c[1], 1e-9):7.2f}"
                    )
                big = sealed.conversation("bench-rotate")
                for n in range(100):
                    big.append(*turn(n))
            with Ledger.connect(sealed_url, encryption=Keyring([("new", new), ("old", old)]), **sealed_opts) as both:
                wall, cpu = timed(lambda both=both: rotate(both.store, session_ids=["bench-rotate"]))  # type: ignore[misc]
                took = f"{wall * 1000:.0f} ms wall, {cpu * 1000:.0f} ms CPU"
                print(f"{backend:8} rotate   400 messages re-sealed in {took}")


if __name__ == "__main__":
    main()
