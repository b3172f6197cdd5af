"""PostgreSQL's one-statement append: every guarantee of the transaction it replaces."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.pool import QueuePool

from contextledger import Changeset, Message, ReductionPlan, SummaryDraft, ViewEntry
from contextledger.conversation.conversation import Conversation
from contextledger.errors import ConcurrencyConflict, ConfigurationError, DuplicateEntry, SessionDeleted, StoreError
from contextledger.model.records import utcnow
from contextledger.stores.sql import SQLStore
from contextledger.stores.sql.write.pg_append import apply_append, is_append_only
from tests.sql.helpers import capture, wire


def _entry(message: Message, seq: int, tokens: int = 3) -> ViewEntry:
    return ViewEntry(entry_id=message.message_id, seq=seq, message=message, tokens=tokens)


def _state(store: SQLStore, session_id: str = "s") -> tuple[Any, ...]:
    snap = store.load(session_id, "a")
    assert snap is not None
    return snap.state.version, snap.state.next_seq, snap.entries, tuple(store.history(session_id, "a"))


@pytest.fixture(params=["held", "pooled"])
def path(request: pytest.FixtureRequest, postgres_store: SQLStore) -> Iterator[str]:
    """Where the one statement goes: the store's held connection, or a pooled one.

    An engine with a statement listener sends it through SQLAlchemy (on a pooled
    connection), where the listener sees it.
    """
    if request.param == "held":
        yield "held"
        return

    def listener(*args: Any) -> None:
        pass

    event.listen(postgres_store.engine, "before_cursor_execute", listener)
    try:
        yield "pooled"
    finally:
        event.remove(postgres_store.engine, "before_cursor_execute", listener)


@contextmanager
def sent_as_one_statement(store: SQLStore, path: str, trace: Path) -> Iterator[None]:
    """Check that what the block commits goes as the one statement, on the connection ``path`` names."""
    if path == "pooled":
        with capture(store.engine) as captured:  # a statement listener: the pooled path, where it sees it
            yield
        assert [s.sql.lstrip()[:15] for s in captured.statements] == ["WITH bumped AS "]
        return
    with wire(store, trace) as sent:
        yield
    assert sent.autocommit == []  # no pooled connection taken
    assert sent.round_trips == 1, sent.sent
    assert sent.queries == []  # no BEGIN, no COMMIT
    assert sent.sent in (["Parse", "Bind", "Describe", "Execute", "Sync"], ["Bind", "Describe", "Execute", "Sync"])
    assert all(' "WITH bumped AS ' in text for text in sent.parsed), sent.parsed  # (name, statement, types)


def _one_statement(store: SQLStore, changeset: Changeset, path: str, trace: Path) -> int:
    """Commit ``changeset`` and check it went as the one statement."""
    with sent_as_one_statement(store, path, trace):
        return store.commit(changeset)


def test_which_changesets_take_the_one_statement_path() -> None:
    message = Message.user("m")
    base = {"session_id": "s", "agent_id": "a"}
    assert is_append_only(Changeset(**base, expected_version=3, appends=(_entry(message, 0),), next_seq=1))
    assert is_append_only(Changeset(**base, expected_version=3, model_call_count=4))
    assert not is_append_only(Changeset(**base, expected_version=0, appends=(_entry(message, 0),)))
    assert not is_append_only(Changeset(**base, expected_version=3, pins={message.message_id: True}))


def test_apply_append_refuses_other_changesets(postgres_store: SQLStore) -> None:
    changeset = Changeset(session_id="s", agent_id="a", expected_version=0, appends=(_entry(Message.user("m"), 0),))
    with postgres_store.engine.connect() as conn, pytest.raises(ConfigurationError):
        apply_append(conn, changeset, utcnow())


def test_an_existing_message_id_is_a_duplicate_and_writes_nothing(
    postgres_store: SQLStore, path: str, tmp_path: Path
) -> None:
    conversation = Conversation(postgres_store, "s", "a")
    first = Message.user("first")
    conversation.append(first, Message.user("second"))
    before = _state(postgres_store)
    again = Message.user("again", message_id=first.message_id)
    fresh = Message.user("fresh")
    changeset = Changeset(
        session_id="s",
        agent_id="a",
        expected_version=conversation.version,
        appends=(_entry(fresh, 2), _entry(again, 3)),  # the clash comes second: the first row is undone too
        next_seq=4,
        model_call_count=7,
    )
    with pytest.raises(DuplicateEntry, match="already exists"):
        postgres_store.commit(changeset)
    assert _state(postgres_store) == before
    # the conversation goes on as if nothing happened
    fixed = changeset.model_copy(update={"appends": (_entry(fresh, 2),)})
    _one_statement(postgres_store, fixed, path, tmp_path / "t")
    assert [h.message.message_id for h in postgres_store.history("s", "a")][-1] == fresh.message_id


def test_a_summary_id_cannot_be_appended_as_a_message(postgres_store: SQLStore, path: str) -> None:
    conversation = Conversation(postgres_store, "s", "a")
    conversation.append(Message.user("a"), Message.user("b"), Message.user("c"))
    conversation.apply_plan(
        lambda v: ReductionPlan(
            strategy="summarizing",
            summary=SummaryDraft(content="S", summarizer="t", replaces=(v.ids[0],), summary_id="sum-1"),
        ),
        trigger="manual",
    )
    before = _state(postgres_store)
    clash = Changeset(
        session_id="s",
        agent_id="a",
        expected_version=conversation.version,
        appends=(_entry(Message.user("x", message_id="sum-1"), 9),),
        next_seq=10,
    )
    with pytest.raises(DuplicateEntry, match="sum-1"):
        postgres_store.commit(clash)
    assert _state(postgres_store) == before


def test_a_stale_version_is_a_conflict_and_writes_nothing(postgres_store: SQLStore, path: str) -> None:
    conversation = Conversation(postgres_store, "s", "a")
    conversation.append(Message.user("a"))
    stale = conversation.version
    conversation.append(Message.user("b"))
    before = _state(postgres_store)
    with pytest.raises(ConcurrencyConflict, match=f"expected version {stale}, found {stale + 1}"):
        postgres_store.commit(
            Changeset(
                session_id="s",
                agent_id="a",
                expected_version=stale,
                appends=(_entry(Message.user("late"), 1),),
                next_seq=2,
            )
        )
    with pytest.raises(ConcurrencyConflict):
        postgres_store.commit(Changeset(session_id="s", agent_id="a", expected_version=stale, model_call_count=5))
    assert _state(postgres_store) == before


def test_a_deleted_conversation_is_not_recreated(postgres_store: SQLStore, path: str) -> None:
    conversation = Conversation(postgres_store, "s", "a")
    conversation.append(Message.user("a"))
    assert postgres_store.delete_session("s")
    with pytest.raises(SessionDeleted, match="deleted"):
        postgres_store.commit(
            Changeset(
                session_id="s",
                agent_id="a",
                expected_version=conversation.version,
                appends=(_entry(Message.user("b"), 1),),
            )
        )
    assert postgres_store.load("s", "a") is None


def test_nul_in_an_id_is_stored_exactly(postgres_store: SQLStore, path: str) -> None:
    conversation = Conversation(postgres_store, "s", "a")
    conversation.append(Message.user("a"))
    conversation.append(Message.user("b", message_id="nul\x00id"))
    assert [e.entry_id for e in Conversation(postgres_store, "s", "a").view][1] == "nul\x00id"


def test_an_id_too_long_as_stored_is_refused_not_cut(postgres_store: SQLStore, path: str) -> None:
    # 255 characters, but 257 as PostgreSQL stores them (a NUL counts twice, plus one):
    # the column refuses it, as on the general path; it was once cut to fit and stored.
    conversation = Conversation(postgres_store, "s", "a")
    conversation.append(Message.user("a"))
    with pytest.raises(StoreError, match="too long"):
        conversation.append(Message.user("b", message_id="n\x00" + "i" * 253))
    assert [e.entry_id for e in Conversation(postgres_store, "s", "a").view] == [conversation.view[0].entry_id]
    assert _state(postgres_store)[0] == 1  # the version: nothing was written


TRICKY: list[dict[str, Any]] = [
    {"text": "unicode é ü 雪 \U0001f600, quotes \" ' and \\ backslash, NUL \x00, newline \n"},
    {"text": "numbers", "custom": [1, 2.5, 1e300, -0.0, 12345678901234567890, True, None, {}, []]},
    {"image": {"format": "png", "source": {"bytes": b"\x00\x01\xfe\xff raw"}}},
    {"toolUse": {"toolUseId": "t1", "name": "f", "input": {"nested": [[1, [2, {"k": [3]}]], {"": ""}]}}},
]


def _raw_rows(store: SQLStore, session_id: str) -> list[tuple[Any, ...]]:
    with store.engine.connect() as conn:
        return [
            tuple(row)
            for row in conn.execute(
                text(
                    "SELECT e.seq, e.role, e.content::text, e.metadata::text, e.pinned, e.status, e.evicted_by, "
                    "e.tokens, e.revision_count FROM cl_entries e JOIN cl_conversations c ON c.id = e.conversation_id "
                    "WHERE c.session_id = :s ORDER BY e.id"
                ),
                {"s": session_id},
            )
        ]


def test_stored_json_is_byte_for_byte_the_general_paths(postgres_store: SQLStore, path: str, tmp_path: Path) -> None:
    def messages() -> list[Message]:
        out = [Message(role="user", content=[block]) for block in TRICKY]
        out.append(Message.assistant("pinned", metadata={"custom": {"pinned": True, "k": [{"x": 1}]}}))
        return out

    # the general path: a first commit writes them; the one statement: appended after a first message
    general = Conversation(postgres_store, "general", "a")
    general.append(Message.user("first"), *messages())
    fast = Conversation(postgres_store, "fast", "a")
    fast.append(Message.user("first"))
    with sent_as_one_statement(postgres_store, path, tmp_path / "t"):
        fast.append(*messages())
    assert _raw_rows(postgres_store, "fast") == _raw_rows(postgres_store, "general")
    general_view = postgres_store.load("general", "a")
    fast_view = postgres_store.load("fast", "a")
    assert general_view is not None
    assert fast_view is not None
    assert [e.message.content for e in fast_view.entries] == [e.message.content for e in general_view.entries]
    assert [e.message.metadata for e in fast_view.entries] == [e.message.metadata for e in general_view.entries]
    assert fast_view.entries[-1].pinned
    assert fast_view.entries[3].message.content[0]["image"]["source"]["bytes"] == b"\x00\x01\xfe\xff raw"


def test_state_fields_ride_along(postgres_store: SQLStore, path: str, tmp_path: Path) -> None:
    conversation = Conversation(postgres_store, "s", "a")
    conversation.append(Message.user("first"))
    state = {"nested": {"list": [1, 2, {"x": "é"}], "empty": {}}, "n": 1.5}
    _one_statement(
        postgres_store,
        Changeset(
            session_id="s",
            agent_id="a",
            expected_version=conversation.version,
            appends=(_entry(Message.user("second"), 1),),
            next_seq=2,
            model_call_count=3,
            manager_state={"kind": "window", "state": state},
            agent_state=state,
        ),
        path,
        tmp_path / "t",
    )
    snap = postgres_store.load("s", "a")
    assert snap is not None
    assert (snap.state.next_seq, snap.state.model_call_count) == (2, 3)
    assert snap.state.manager_state == {"kind": "window", "state": state}
    assert snap.state.agent_state == state
    assert snap.state.version == conversation.version + 1


def test_a_large_append_is_one_statement_in_order(postgres_store: SQLStore, path: str, tmp_path: Path) -> None:
    conversation = Conversation(postgres_store, "s", "a")
    conversation.append(Message.user("first"))
    # more rows than one IN list holds, all on one seq, ids against their order: only the
    # order of the appends can give the order they load in
    batch = [Message.user(f"m{i}", message_id=f"id-{9999 - i:05d}") for i in range(1_200)]
    version = _one_statement(
        postgres_store,
        Changeset(
            session_id="s",
            agent_id="a",
            expected_version=conversation.version,
            appends=tuple(_entry(m, 1) for m in batch),
            next_seq=2,
        ),
        path,
        tmp_path / "t",
    )
    snap = postgres_store.load("s", "a")
    assert snap is not None
    assert snap.state.version == version
    assert [e.entry_id for e in snap.entries[1:]] == [m.message_id for m in batch]


def test_pooled_connections_leave_autocommit_behind(postgres_store: SQLStore) -> None:
    postgres_store.engine.pool.dispose()
    conversation = Conversation(postgres_store, "s", "a")
    conversation.append(Message.user("first"))
    with postgres_store._held_appender().driver_connection():  # busy: the one statement goes on a pooled one
        conversation.append(Message.user("second"))  # the one statement, in autocommit
    pool = postgres_store.engine.pool
    assert isinstance(pool, QueuePool)
    assert pool.checkedin() == 1  # the same connection serves every call
    with postgres_store.engine.connect() as conn:
        assert conn.get_isolation_level() == "READ COMMITTED"
        assert conn.connection.driver_connection is not None
        assert conn.connection.driver_connection.autocommit is False
        # a write outside a transaction block would be visible to another connection at once
        conn.execute(text("UPDATE cl_conversations SET model_call_count = 99"))
        with postgres_store.engine.connect() as other:
            assert other.execute(text("SELECT model_call_count FROM cl_conversations")).scalar() == 0
        conn.rollback()
    snap = postgres_store.load("s", "a")
    assert snap is not None
    assert snap.state.model_call_count == 0


def test_racing_appends_one_wins_one_conflicts(postgres_store: SQLStore) -> None:
    conversation = Conversation(postgres_store, "s", "a")
    conversation.append(Message.user("first"))
    version = conversation.version
    barrier = threading.Barrier(2)
    outcomes: dict[str, object] = {}

    def write(name: str) -> None:
        changeset = Changeset(
            session_id="s",
            agent_id="a",
            expected_version=version,
            appends=(_entry(Message.user(name), 1), _entry(Message.assistant(name), 2)),
            next_seq=3,
        )
        barrier.wait(timeout=10)
        try:
            outcomes[name] = postgres_store.commit(changeset)
        except ConcurrencyConflict as exc:
            outcomes[name] = exc

    threads = [threading.Thread(target=write, args=(name,)) for name in ("x", "y")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(type(o).__name__ for o in outcomes.values()) == ["ConcurrencyConflict", "int"]
    (winner,) = [name for name, o in outcomes.items() if isinstance(o, int)]
    snap = postgres_store.load("s", "a")
    assert snap is not None
    assert snap.state.version == version + 1
    assert [e.message.plain_text for e in snap.entries] == ["first", winner, winner]
