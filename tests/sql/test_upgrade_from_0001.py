"""A ledger written under schema 0001 (version 0.1) reads unchanged after the 0002 upgrade.

0002 adds the commit log (exactly-once commits) and the pin events; it alters nothing,
so rows written before it read exactly as they did, and the conversation goes on.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import MetaData, insert

from contextledger import Message, ViewEntry
from contextledger.conversation.conversation import Conversation
from contextledger.history.travel import view_at
from contextledger.stores.sql import SQLStore, current, head, upgrade
from contextledger.stores.sql.engine import build_engine, parse_url
from contextledger.stores.sql.write.apply import entry_values

WHEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _write_as_0001(url: str) -> list[Message]:
    """Rows as 0.1 wrote them: a conversation at version 3, one message evicted, one pinned."""
    messages = [Message.user("task", message_id="m0"), Message.assistant("a0", message_id="m1")]
    messages.append(Message.user("keep me", message_id="m2").with_pin(True))
    engine = build_engine(parse_url(url))
    try:
        meta = MetaData()
        meta.reflect(engine)  # the 0001 tables as they stand in the database
        assert "cl_changesets" not in meta.tables
        t = meta.tables
        with engine.begin() as conn:
            conn.execute(insert(t["cl_sessions"]).values(session_id="old", created_at=WHEN))
            conversation_id = conn.execute(
                insert(t["cl_conversations"]).values(
                    session_id="old",
                    agent_id="a",
                    version=3,
                    model_call_count=2,
                    next_seq=3,
                    manager_state=None,
                    agent_state={"k": "v"},
                    created_at=WHEN,
                    updated_at=WHEN,
                )
            ).inserted_primary_key[0]  # type: ignore[index]
            for seq, message in enumerate(messages):
                values = entry_values(ViewEntry(entry_id=message.message_id, seq=seq, message=message, tokens=5))
                evicted = seq == 1
                conn.execute(
                    insert(t["cl_entries"]).values(
                        conversation_id=conversation_id,
                        **values,
                        status="evicted" if evicted else "active",
                        evicted_by="r1" if evicted else None,
                        revision_count=0,
                        created_at=WHEN,
                    )
                )
            conn.execute(
                insert(t["cl_reductions"]).values(
                    conversation_id=conversation_id,
                    reduction_id="r1",
                    trigger="manual",
                    strategy="sliding_window",
                    created_at=WHEN,
                    messages_before=3,
                    messages_after=2,
                    tokens_before=15,
                    tokens_after=10,
                    evicted=["m1"],
                    revised=[],
                    summary_id=None,
                    model_call_count=2,
                    error=None,
                    detail=None,
                )
            )
    finally:
        engine.dispose()
    return messages


def test_a_0001_ledger_reads_after_the_upgrade_and_goes_on(empty_url: str) -> None:
    upgrade(empty_url, "0001")
    messages = _write_as_0001(empty_url)
    upgrade(empty_url)
    assert current(empty_url) == head()
    store = SQLStore.from_url(empty_url, auto_upgrade=False)
    try:
        snap = store.load("old", "a")
        assert snap is not None
        assert (snap.state.version, snap.state.model_call_count, snap.state.agent_state) == (3, 2, {"k": "v"})
        assert [e.message for e in snap.entries] == [messages[0], messages[2]]
        assert [e.pinned for e in snap.entries] == [False, True]
        assert [h.status for h in store.history("old", "a")] == ["active", "evicted", "active"]
        assert [r.reduction_id for r in store.reductions("old")] == ["r1"]
        assert [e.entry_id for e in store.evictions("old")] == ["m1"]
        assert store.pin_history("old") == []  # 0.1 kept no pin events
        # 0003 stamps: old entries count as reached at call 0, the old reduction gets the
        # call it reached from its count and trigger; time travel reads the old rows.
        assert [h.from_call for h in store.history("old", "a")] == [0, 0, 0]
        (old,) = store.reductions("old")
        assert old.from_call in (old.model_call_count, old.model_call_count + 1)
        assert old.restored == ()
        past = [e.message.message_id for e in view_at(store, "old", "a", model_call=2)]
        assert set(past) >= {"m0", "m2"} and set(past) <= {"m0", "m1", "m2"}  # noqa: PT018

        # The conversation goes on: commits are logged and pins recorded from now on.
        conversation = Conversation(store, "old", "a")
        conversation.append(Message.user("next"))
        conversation.unpin("m2")
        assert conversation.version == 5
        (event,) = store.pin_history("old", "a")
        assert (event.entry_id, event.pinned, event.source) == ("m2", False, "api")
        restored = Conversation(store, "old", "a")
        assert list(restored.view.entries) == list(conversation.view.entries)
        # 0005: a session written before belongs to no app and no user, and is listed as such.
        assert store.owner("old") == (None, None)
        assert [(i.session_id, i.app, i.user) for i in store.sessions()] == [("old", None, None)]
        assert store.sessions(app="any") == []
    finally:
        store.close()
