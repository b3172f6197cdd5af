"""The conversation layer alone: the Python above the store in each ``Conversation.append``.

``floor.py`` sets an append against the driver; this isolates what every engine shares.
Turns of four prebuilt messages (``contenders.cl.native_turn``: user text, toolUse,
toolResult, answer) are appended to three conversations, stepped alternately in one
process (the order rotated each turn, so drift on a shared machine hits all alike):

* ``memory`` -- ``Conversation.append`` on ``memory://`` (no driver at all);
* ``sqlite`` -- the same on a SQLite file (WAL, ``synchronous=NORMAL``);
* ``layer`` -- the same on ``memory://`` with the store's commit answering at once (the
  version bumped, nothing stored or checked): the conversation layer alone.

Printed: the median client CPU (``thread_time_ns``) per turn of each, with the load
average. ``--manager`` gives every lane's conversation a sliding window too large ever to
evict: the manager's state then rides with every commit, as in a managed agent.
``--stages`` then appends the same turns to one more ``memory://``
conversation with its stages (token counts, view entries, view extension, changeset,
the store's JSON check and commit) timed by wrapping those functions; the wrappers add
their own cost, so read the shares, not the sum.

    python benchmarks/layer.py                 # 1,000 turns
    python benchmarks/layer.py --turns 300 --stages
    python benchmarks/layer.py --manager       # a managed agent's appends: its state rides with each
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from contenders.cl import native_turn
from contextledger import Ledger
from contextledger.conversation.conversation import Conversation
from contextledger.core.changeset import Changeset
from contextledger.managers import SlidingWindowConversationManager

SESSION = "layer"


def _open(url: str, *, answer_at_once: bool = False, managed: bool = False) -> tuple[Ledger, Conversation]:
    ledger = Ledger.connect(url)
    # A window that never fills: nothing is evicted, and the manager's state rides with every commit.
    manager = SlidingWindowConversationManager(window_size=1_000_000) if managed else None
    conversation = ledger.conversation(SESSION, "agent", manager=manager)
    conversation.append(*native_turn(SESSION, 0))  # the creating commit takes another path: not timed
    if answer_at_once:
        # The instance attribute shadows the store's method for this conversation only.
        conversation.transaction.store.commit = _answer_at_once  # type: ignore[method-assign]
    return ledger, conversation


def _answer_at_once(changeset: Changeset) -> int:
    """The version a commit of ``changeset`` would return, with nothing stored."""
    return changeset.expected_version + 1


_SPENT: defaultdict[str, int] = defaultdict(int)


def _wrap(owner: Any, name: str, label: str) -> None:
    """Replace ``owner.name`` with a function adding its CPU time to ``_SPENT[label]``."""
    inner = getattr(owner, name)
    clock = time.thread_time_ns

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = clock()
        try:
            return inner(*args, **kwargs)
        finally:
            _SPENT[label] += clock() - start

    setattr(owner, name, timed)


def _stages() -> None:
    from contextledger.conversation import transaction
    from contextledger.core import building
    from contextledger.core.view import View
    from contextledger.model.tokens import CharTokenCounter
    from contextledger.stores.memory import writes
    from contextledger.telemetry import spans

    _wrap(CharTokenCounter, "counts", "token counts")
    _wrap(building, "_appended_entries", "view entries (token counts included)")
    _wrap(View, "appended", "view extension")
    _wrap(building, "_trusted_changeset", "changeset record")
    _wrap(transaction, "build_changeset", "build_changeset (the three above and more)")
    _wrap(writes, "check_storable", "store: JSON check")
    _wrap(spans, "commit", "store: commit (JSON check included)")
    _wrap(transaction.Transaction, "finish", "after the commit")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--stages", action="store_true", help="also time the memory lane's stages")
    parser.add_argument(
        "--manager", action="store_true", help="every lane's conversation has a sliding window (that never evicts)"
    )
    args = parser.parse_args()
    load = os.getloadavg()[0]
    managed = args.manager
    with tempfile.TemporaryDirectory() as directory:
        lanes: dict[str, tuple[Ledger, Conversation]] = {
            "memory": _open("memory://", managed=managed),
            "sqlite": _open(f"sqlite:///{directory}/layer.db", managed=managed),
            "layer": _open("memory://", answer_at_once=True, managed=managed),
        }
        turns = [native_turn(SESSION, n) for n in range(1, args.turns + 1)]
        samples: dict[str, list[int]] = {name: [] for name in lanes}
        steps: list[tuple[str, Callable[..., Any]]] = [(name, c.append) for name, (_, c) in lanes.items()]
        clock = time.thread_time_ns
        for n, messages in enumerate(turns):
            shift = n % len(steps)
            for name, append in steps[shift:] + steps[:shift]:
                start = clock()
                append(*messages)
                samples[name].append(clock() - start)
        if managed:  # what the option is for: the manager's state stored with the turns
            for name in ("memory", "sqlite"):
                snapshot = lanes[name][0].store.load(SESSION, "agent")
                if snapshot is None or snapshot.state.manager_state is None:
                    sys.exit(f"the {name} lane stored no manager state")
        for ledger, _ in lanes.values():
            ledger.close()
    if args.stages:  # after the timed run, on a conversation of its own: the wrappers cost too
        _stages()
        ledger, conversation = _open("memory://", managed=managed)
        _SPENT.clear()
        for messages in turns:
            conversation.append(*messages)
        ledger.close()
    managing = ", a sliding window managing each conversation" if managed else ""
    print(f"Conversation.append of a 4-message turn{managing}, median client CPU of {args.turns} turns per lane")
    print(f"(load average {load:.2f} before, {os.getloadavg()[0]:.2f} after, {os.cpu_count()} CPUs)")
    for name, spent in samples.items():
        print(f"  {name:8s} {statistics.median(spent) / 1000:8.1f} us")
    if args.stages:
        print("stages of the memory lane (mean CPU per turn, wrappers included: read the shares):")
        for label, total in _SPENT.items():
            print(f"  {label:44s} {total / len(turns) / 1000:8.1f} us")


if __name__ == "__main__":
    main()
