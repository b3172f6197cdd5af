"""What ``view_at`` reads for an early call of a long conversation: about a window of rows, on every backend."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from typing import Any

from contextledger import Ledger, Message
from contextledger.managers import SlidingWindowConversationManager
from contextledger.model.records import HistoryEntry
from contextledger.stores.base import AppendedBy
from contextledger.stores.capabilities import CompleteStore
from contextledger.stores.redis import RedisStore
from contextledger.stores.sql import SQLStore
from tests.sql.helpers import Capture, capture_reads

TURNS = 300  # 600 messages
WINDOW = 10


def _long_conversation(ledger: Ledger) -> list[list[str]]:
    chat = ledger.conversation("long", manager=SlidingWindowConversationManager(window_size=WINDOW, per_turn=True))
    seen = []
    for turn in range(TURNS):
        chat.append(Message.user(f"question {turn}"), Message.assistant(f"answer {turn}"))
        chat.before_model_call()
        if turn < 3:
            seen.append([m.plain_text for m in chat.messages])
    return seen


def test_an_early_call_reads_a_window_not_the_history(store: CompleteStore) -> None:
    ledger = Ledger(store)
    seen = _long_conversation(ledger)
    assert len(ledger.history("long")) == 2 * TURNS
    asked: list[int] = []
    returned: list[int] = []
    entries = store.entries

    def counting(
        session_id: str, agent_id: str, ids: Sequence[str], *, appended_by: AppendedBy | None = None
    ) -> list[HistoryEntry]:
        rows = entries(session_id, agent_id, ids, appended_by=appended_by)
        asked.append(len(ids))
        returned.append(len(rows))
        return rows

    fetched: list[int] = []  # what the database or server sent back, below the store
    if isinstance(store, RedisStore):
        script = store._data.scripts.entries

        def counting_script(*args: Any, **kwargs: Any) -> Any:
            reply = script(*args, **kwargs)
            fetched.append(len(reply[1]))  # records sent back by the server
            return reply

        store._data.scripts.entries = counting_script  # type: ignore[assignment]
    store.entries = counting  # type: ignore[method-assign]
    statements = Capture()
    with ExitStack() as stack:
        if isinstance(store, SQLStore):  # on the SQLite reader or the engine, whichever serves the reads
            statements = stack.enter_context(capture_reads(store))
        for call in (1, 2, 3):
            assert [e.message.plain_text for e in ledger.view_at("long", model_call=call)] == seen[call - 1]
    # One statement per batch of ids; its rows are counted by what entries() returned.
    fetched += [-1 for s in statements.work if "FROM cl_entries" in s.sql and "message_id IN" in s.sql]
    assert asked[0] >= 2 * TURNS - WINDOW  # the ids evicted since: what was read before
    assert max(returned) <= WINDOW + 2, returned
    if isinstance(store, RedisStore):
        assert fetched == returned
    if isinstance(store, SQLStore):
        assert 0 < len(fetched) <= 3 * (asked[0] // 500 + 1)
