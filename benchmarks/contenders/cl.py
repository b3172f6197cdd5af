"""contextledger through its public API: ``Ledger``, ``Conversation``, ``Message``."""

from __future__ import annotations

from typing import Any

from _protocol import Contender, NotApplicable, start, stop, turn
from _servers import maintain
from contenders._files import tree_bytes
from contextledger import Ledger, Message, ReductionPlan, SlidingWindowConversationManager
from contextledger.conversation.conversation import Conversation
from contextledger.stores.capabilities import complete

AGENT = "agent"
LOAD_BATCH = 10_000  # messages per commit while bulk loading


def native_turn(session: str, n: int) -> list[Message]:
    """Turn ``n`` as contextledger messages (built outside the timer, like every contender's)."""
    return [Message.from_strands(m) for m in turn(session, n)]


def bulk_load(conversation: Conversation, *, total: int, active: int) -> None:
    """Append ``total`` messages in big commits, then evict all but the newest ``active``.

    Goes through the public API only. ``active`` is a multiple of four, so the window
    starts at a turn's user text and never splits a tool pair.
    """
    session = conversation.session_id
    pending: list[Message] = []
    for n in range(total // 4):
        pending.extend(native_turn(session, n))
        if len(pending) >= LOAD_BATCH:
            conversation.append(*pending)
            pending = []
    if pending:
        conversation.append(*pending)
    if total > active:
        conversation.apply_plan(
            lambda view: ReductionPlan(strategy="bulk_load", evict=tuple(view.ids[: len(view.ids) - active])),
            trigger="manual",
        )
        # What autovacuum does after a bulk eviction in a live PostgreSQL database (the raw
        # driver's contender and restore.py do the same): otherwise the first reads walk
        # the dead index entries of the evicted rows until autovacuum gets to them.
        maintain(complete(conversation.store, "tests"), "VACUUM ANALYZE")


class ContextLedger(Contender):
    """contextledger on the store at the URL the harness gives (SQLite, PostgreSQL, Redis)."""

    def __init__(self) -> None:
        self.ledger: Ledger | None = None
        self.conversation: Conversation | None = None
        self.workload = ""
        self.session = ""
        self.path: str | None = None
        self.batch = 1
        self.defer = False
        self.window = 0

    def _connect(self, workload: str, params: dict[str, Any]) -> Ledger:
        url = str(params["url"])
        options: dict[str, Any] = {"auto_upgrade": True} if url.startswith("postgres") else {}
        if url.startswith("redis"):
            options["key_prefix"] = str(params.get("key_prefix", "clbench"))
        self.path = url.removeprefix("sqlite:///") if url.startswith("sqlite") else None
        if workload.startswith("restore"):
            # A restore reads the store: not the view the ledger's last open of it shared.
            options["shared_views"] = 0
        return Ledger.connect(url, **options)

    def setup(self, workload: str, params: dict[str, Any]) -> dict[str, Any]:
        self.workload = workload
        self.session = str(params["session"])
        self.ledger = ledger = self._connect(workload, params)
        if workload in ("append", "concurrency"):
            self.conversation = ledger.conversation(self.session, AGENT)
            self.window = int(params.get("window", 0))
            return {"window": self.window}
        if workload in ("restore_window", "restore_wide"):
            total, active = int(params["entries"]), int(params["active"])
            conversation = ledger.conversation(self.session, AGENT)
            if len(conversation.view) != active:  # a SQLite file from an earlier run is reused
                bulk_load(conversation, total=total, active=active)
            return {"entries": total, "active": len(ledger.conversation(self.session, AGENT).view)}
        if workload == "reduction":
            total, active = int(params["entries"]), int(params["active"])
            self.conversation = conversation = ledger.conversation(self.session, AGENT)
            if len(conversation.view) != active:  # not loaded by restore_window
                bulk_load(conversation, total=total, active=active)
            return {"entries": total, "active": len(conversation.view)}
        if workload == "storage":
            if self.path is None:
                raise NotApplicable("bytes are counted on SQLite files")
            conversation = ledger.conversation(self.session, AGENT)
            for n in range(int(params["turns"])):
                conversation.append(*native_turn(self.session, n))
            return {}
        if workload == "before_model_call":
            self.batch = int(params.get("batch", 1000))
            self.defer = bool(params.get("defer", False))
            self.conversation = ledger.conversation(
                self.session, AGENT, manager=SlidingWindowConversationManager(window_size=40, per_turn=True)
            )
            self.conversation.append(*native_turn(self.session, 0))
            return {
                "manager": "SlidingWindowConversationManager(window_size=40, per_turn=True)",
                "batch": self.batch,
                "defer_count": self.defer,
            }
        raise NotApplicable(f"no {workload} workload")

    def step(self, n: int) -> float:
        ledger, conversation = self.ledger, self.conversation
        assert ledger is not None
        if self.workload in ("append", "concurrency"):
            assert conversation is not None
            messages = native_turn(self.session, n)
            t0 = start()
            conversation.append(*messages)
            elapsed = stop(t0)
            if self.window and len(conversation.view) > self.window:
                # What a sliding window would do, not timed: the window keeps its size.
                conversation.apply_plan(
                    lambda view: ReductionPlan(strategy="sliding_window", evict=tuple(view.ids[:4])),
                    trigger="per_turn",
                )
            return elapsed
        if self.workload in ("restore_window", "restore_wide"):
            t0 = start()
            messages = ledger.conversation(self.session, AGENT).messages
            elapsed = stop(t0)
            assert messages
            return elapsed
        if self.workload == "reduction":
            assert conversation is not None
            t0 = start()
            conversation.apply_plan(
                lambda view: ReductionPlan(strategy="sliding_window", evict=tuple(view.ids[:4])), trigger="per_turn"
            )
            elapsed = stop(t0)
            conversation.append(*native_turn(self.session, 1_000_000 + n))  # keeps the window's size; not timed
            return elapsed
        if self.workload == "before_model_call":
            assert conversation is not None
            call, defer = conversation.before_model_call, self.defer
            t0 = start()
            for _ in range(self.batch):
                call(defer_count=defer)
            return stop(t0) / self.batch
        raise NotApplicable(f"nothing to time in {self.workload}")

    def measure(self) -> Any:
        if self.workload != "storage" or self.path is None:
            raise NotApplicable("bytes are counted on SQLite files")
        self.close()
        return tree_bytes(self.path)

    def close(self) -> None:
        if self.ledger is not None:
            self.ledger.close()
            self.ledger = None
