"""The SQLite hot paths: a turn, and a turn with an eviction, sent as precompiled statements.

They must write exactly what the general path writes (compared row by row, column by
column), send only the statements they claim (SQLite's own trace, which sees the
driver's cursor), and hand every other changeset to the general path untouched.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from contextledger import Changeset, Message, ReductionPlan, SummaryDraft, ViewEntry
from contextledger.conversation.conversation import Conversation
from contextledger.errors import ConcurrencyConflict, DuplicateEntry, EntryNotFound, InvalidMessage, SessionDeleted
from contextledger.stores.sql import SQLStore
from contextledger.stores.sql.write import sqlite_hot
from contextledger.stores.sql.write.sqlite_writer import HotTransaction
from tests.soak import examples
from tests.sql.helpers import trace_sqlite

# The form a clock is stored in (its value is each commit's own): its type and text shape.
_DIGITS = "[0-9][0-9]"
_SHAPE = f"typeof({{c}}) || ':' || ({{c}} GLOB '{_DIGITS * 2}-{_DIGITS}-{_DIGITS} {_DIGITS}:{_DIGITS}:{_DIGITS}*')"
# Every column but the surrogate keys, and the clocks' form only.
_ENTRIES = (
    "seq, message_id, role, content, metadata, pinned, tokens, status, evicted_by, revision_count, from_call, version, "
    + _SHAPE.format(c="t.created_at")
    + ", typeof(t.pinned)"
)
_REDUCTIONS = (
    'reduction_id, "trigger", strategy, messages_before, messages_after, tokens_before, tokens_after, evicted, '
    "revised, summary_id, model_call_count, error, detail, restored, from_call, version"
)
_CONVERSATIONS = "agent_id, version, model_call_count, next_seq, manager_state, agent_state, " + _SHAPE.format(
    c="updated_at"
)


def _rows(store: SQLStore, session_id: str) -> dict[str, list[tuple[Any, ...]]]:
    where = "JOIN cl_conversations c ON c.id = t.conversation_id WHERE c.session_id = :s ORDER BY t.version, 1"
    with store.engine.connect() as conn:
        return {
            table: [tuple(r) for r in conn.execute(text(f"SELECT {cols} FROM {table} t {where}"), {"s": session_id})]
            for table, cols in (
                ("cl_entries", ", ".join(c if "(" in c else f"t.{c.strip()}" for c in _ENTRIES.split(", "))),
                ("cl_reductions", ", ".join(f"t.{c.strip()}" for c in _REDUCTIONS.split(","))),
                ("cl_changesets", "t.version, " + _SHAPE.format(c="t.created_at")),
            )
        } | {
            "cl_conversations": [
                tuple(r)
                for r in conn.execute(
                    text(f"SELECT {_CONVERSATIONS} FROM cl_conversations WHERE session_id = :s"), {"s": session_id}
                )
            ]
        }


def _named(message: Message, message_id: str) -> Message:
    return message.model_copy(update={"message_id": message_id})


_BIG = {7: sqlite_hot.MULTI_ROW_APPENDS - 3, 8: sqlite_hot.MULTI_ROW_APPENDS - 2}


def _script(conversation: Conversation) -> None:
    """Turns with tool pairs and a pin, a sliding eviction after each (fixed ids, so both runs match)."""
    for n in range(12):
        conversation.append(
            Message.user(f"q{n} \x00 ünïcode", message_id=f"u{n}"),
            _named(Message.tool_use(f"t{n}", "f", {"n": n, "x": [1.5, None, True]}), f"c{n}"),
            _named(Message.tool_result(f"t{n}", f"r{n}"), f"r{n}"),
            *([Message.user(f"p{n}", message_id=f"p{n}", metadata={"custom": {"pinned": True}})] if n == 5 else []),
            # a turn at the multi-row INSERT's bound, and one past it (the executemany)
            *(Message.user(f"b{n}-{i}", message_id=f"b{n}-{i}") for i in range(_BIG.get(n, 0))),
        )
        if n == 3:
            conversation.pin(f"u{n}")
        conversation.before_model_call(defer_count=True)
        if len(conversation.view) > 12:
            conversation.apply_plan(
                lambda v: ReductionPlan(strategy="sliding_window", evict=tuple(i for i in v.ids[:6] if i != "u3")),
                trigger="per_turn",
            )


def _noting_hot_commits(taken: list[bool]) -> Callable[..., int | None]:
    """``sqlite_hot.apply_hot`` that also notes in ``taken`` whether each call committed on the hot path."""
    apply = sqlite_hot.apply_hot

    def counting(*args: Any) -> int | None:
        version = apply(*args)
        taken.append(version is not None)
        return version

    return counting


def test_the_fast_paths_write_what_the_general_path_writes(
    sqlite_store: SQLStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken: list[bool] = []
    counting = _noting_hot_commits(taken)

    monkeypatch.setattr(sqlite_hot, "apply_hot", counting)
    _script(Conversation(sqlite_store, "fast", "a"))
    assert sum(taken) > len(taken) // 2  # the fast paths carried most commits
    monkeypatch.setattr(sqlite_hot, "takes_hot_path", lambda cs: False)
    _script(Conversation(sqlite_store, "general", "a"))
    fast, general = _rows(sqlite_store, "fast"), _rows(sqlite_store, "general")
    # Reduction ids are random per run: compare them by position.
    for rows in (fast, general):
        ids = {r[0]: f"R{i}" for i, r in enumerate(rows["cl_reductions"])}
        rows["cl_reductions"] = [(ids[r[0]], *r[1:]) for r in rows["cl_reductions"]]
        rows["cl_entries"] = [(*r[:8], ids.get(r[8], r[8]), *r[9:]) for r in rows["cl_entries"]]
    assert fast["cl_entries"], "nothing written"
    assert sum(r[7] == "evicted" for r in fast["cl_entries"]) > 0
    assert fast == general
    assert sqlite_store.load("fast", "a") is not None


def test_an_eviction_commit_is_one_read_and_five_writes(sqlite_store: SQLStore) -> None:
    conversation = Conversation(sqlite_store, "s", "a")
    for n in range(4):
        conversation.append(Message.user(f"q{n}"), Message.assistant(f"a{n}"))
    with trace_sqlite(sqlite_store) as captured:
        conversation.append(
            Message.user("new"),
            Message.assistant("answer"),
        )
        conversation.apply_plan(lambda v: ReductionPlan(strategy="sliding_window", evict=v.ids[:2]), trigger="manual")
    kinds = [" ".join(s.sql.split()[:3]) for s in captured.statements]
    second = kinds[kinds.index("COMMIT") + 1 :]
    assert second[0] == "BEGIN IMMEDIATE", kinds
    assert [k.split()[0] for k in second[1:-1]] == ["SELECT", "UPDATE", "INSERT", "INSERT", "UPDATE"], second
    assert second[-1] == "COMMIT"
    assert [" ".join(k.split()[:3]) for k in second[3:5]] == ["INSERT INTO cl_changesets", "INSERT INTO cl_reductions"]
    history = sqlite_store.history("s", "a")
    assert [h.message.message_id for h in history if h.status == "evicted"] == [
        e.message.message_id for e in history[:2]
    ]
    (reduction,) = sqlite_store.reductions("s", "a")
    assert set(reduction.evicted) == {e.message.message_id for e in history[:2]}
    assert all(h.evicted_by == reduction.reduction_id for h in history[:2])


def test_turns_of_one_shape_send_the_same_sql_text_so_the_drivers_statement_cache_serves_them(
    sqlite_store: SQLStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # sqlite3 prepares a statement once per distinct text (its cache, cached_statements=128
    # by default) and reuses it: a text made per commit would be compiled by SQLite every time.
    sent: list[str] = []
    run, run_many = HotTransaction.run, HotTransaction.run_many

    def traced_run(self: HotTransaction, sql: str, params: tuple[Any, ...]) -> Any:
        sent.append(sql)
        return run(self, sql, params)

    def traced_many(self: HotTransaction, sql: str, params: list[tuple[Any, ...]]) -> None:
        sent.append(sql)
        run_many(self, sql, params)

    monkeypatch.setattr(HotTransaction, "run", traced_run)
    monkeypatch.setattr(HotTransaction, "run_many", traced_many)
    conversation = Conversation(sqlite_store, "s", "a")
    conversation.append(Message.user("first"))  # creates the conversation (the general path)
    conversation.append(Message.user("second"))  # the first hot commit: its bump returns the id
    assert "RETURNING" in sent[1], sent
    sent.clear()
    turns = 12
    for n in range(turns):
        conversation.append(Message.user(f"q{n}"), Message.assistant(f"a{n}"), Message.user(f"r{n}"))
    assert len(sent) == 4 * turns, sent[:8]  # BEGIN IMMEDIATE, the version bump, the commit log, the entries
    assert len(set(sent)) == 4, sorted(set(sent))
    assert "RETURNING" not in sent[1]  # the id is known: found by its key, nothing returned
    assert [" ".join(sql.split()[:3]) for sql in sent[:4]] == [
        "BEGIN IMMEDIATE",
        "UPDATE cl_conversations SET",
        "INSERT INTO cl_changesets",
        "INSERT INTO cl_entries",
    ]


def test_a_remembered_conversation_id_never_bumps_another_conversation(sqlite_store: SQLStore) -> None:
    # SQLite gives a new row the largest id plus one: the id of a conversation deleted
    # last goes to the next one made. A stale changeset of the deleted one must not apply.
    stale = Conversation(sqlite_store, "s1", "a")
    for n in range(3):
        stale.append(Message.user(f"s1-{n}"))  # the hot commits remember s1's id
    with sqlite_store.engine.connect() as conn:
        (old_id,) = conn.execute(text("SELECT id FROM cl_conversations WHERE session_id = 's1'")).one()
    assert sqlite_store.delete_session("s1")
    other = Conversation(sqlite_store, "s2", "a")
    for n in range(3):  # the same version as the stale one expects
        other.append(Message.user(f"s2-{n}"))
    with sqlite_store.engine.connect() as conn:
        (new_id,) = conn.execute(text("SELECT id FROM cl_conversations WHERE session_id = 's2'")).one()
    assert new_id == old_id  # the id was reused: the case this test is about
    with pytest.raises(SessionDeleted):
        stale.append(Message.user("late"))
    assert [h.message.message_id for h in sqlite_store.history("s2", "a")] == [
        m.message_id for m in other.view.messages
    ]
    other.append(Message.user("s2-3"))  # s2's own commits still take the hot path and apply
    assert len(sqlite_store.history("s2", "a")) == 4


def test_a_conversation_made_again_is_found_again(sqlite_store: SQLStore) -> None:
    first = Conversation(sqlite_store, "s", "a")
    for n in range(3):
        first.append(Message.user(f"old-{n}"))
    Conversation(sqlite_store, "x", "a").append(Message.user("keeps the old id from being reused"))
    sqlite_store.delete_session("s")
    again = Conversation(sqlite_store, "s", "a")
    for n in range(4):  # made anew (general path), then a miss of the remembered id, then hot again
        again.append(Message.user(f"new-{n}"))
    assert [h.message.message_id for h in sqlite_store.history("s", "a")] == [m.message_id for m in again.view.messages]
    assert len(again.view.messages) == 4
    with sqlite_store.engine.connect() as conn:
        (new_id,) = conn.execute(text("SELECT id FROM cl_conversations WHERE session_id = 's'")).one()
    assert sqlite_store._conversation_ids[("s", "a")] == new_id
    snapshot = sqlite_store.load("s", "a")
    assert snapshot is not None
    assert snapshot.state.version == again.version


def test_other_changesets_take_the_general_path_and_fail_the_same_way(sqlite_store: SQLStore) -> None:
    conversation = Conversation(sqlite_store, "s", "a")
    conversation.append(*(Message.user(f"q{n}") if n % 2 == 0 else Message.assistant(f"a{n}") for n in range(8)))
    # A summary: the general path (its rows are checked by the contract suite).
    conversation.apply_plan(
        lambda v: ReductionPlan(
            strategy="summarizing", summary=SummaryDraft(content="S", summarizer="t", replaces=v.ids[:2])
        ),
        trigger="manual",
    )
    summary_id = conversation.view.ids[0]
    # Evicting that summary: the fast path's check finds no active message, the general path applies it.
    conversation.apply_plan(lambda v: ReductionPlan(strategy="sliding_window", evict=(summary_id,)), trigger="manual")
    assert summary_id not in conversation.view.ids
    assert sqlite_store.summaries("s", "a")[0].status == "evicted"
    # An id that is nowhere: refused by the general path, nothing written.
    before = sqlite_store.load("s", "a")
    with pytest.raises(EntryNotFound):
        conversation.apply_plan(
            lambda v: ReductionPlan(strategy="sliding_window", evict=("missing",)), trigger="manual", as_given=True
        )
    after = sqlite_store.load("s", "a")
    assert before is not None
    assert after == before


@pytest.mark.parametrize(
    "bad",
    [
        lambda c: c.append(Message.user("fine"), Message(role="assistant", content=[{"json": {"x": float("nan")}}])),
        lambda c: c.append(Message(role="user", content=[{"text": "q"}], metadata={"when": {1, 2}})),
        lambda c: c.set_agent_state({"score": float("inf")}),
    ],
    ids=["nan-content", "set-metadata", "inf-state"],
)
def test_a_hot_changeset_json_cannot_hold_is_refused_before_anything_is_sent(sqlite_store: SQLStore, bad: Any) -> None:
    conversation = Conversation(sqlite_store, "s", "a")
    conversation.append(Message.user("q0"), Message.assistant("a0"))  # the next commits are hot ones
    before = _rows(sqlite_store, "s")
    with trace_sqlite(sqlite_store) as captured, pytest.raises(InvalidMessage, match="cannot be stored as JSON"):
        bad(conversation)
    assert captured.statements == []
    assert _rows(sqlite_store, "s") == before
    conversation.append(Message.user("q1"))  # the conversation goes on
    assert [e.message.content[0]["text"] for e in sqlite_store.history("s", "a")] == ["q0", "a0", "q1"]


def test_a_hot_changeset_that_lost_the_race_rolls_back_and_conflicts(
    sqlite_store: SQLStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = Conversation(sqlite_store, "s", "a")
    first.append(Message.user("q0"))
    second = Conversation(sqlite_store, "s", "a", max_retries=0)
    first.append(Message.user("q1"))  # second's view is now one version behind
    taken: list[int | None] = []
    apply = sqlite_hot.apply_hot

    def counting(*args: Any) -> int | None:
        taken.append(apply(*args))
        return taken[-1]

    monkeypatch.setattr(sqlite_hot, "apply_hot", counting)
    with trace_sqlite(sqlite_store) as captured, pytest.raises(ConcurrencyConflict):
        second.append(Message.user("late"))
    assert taken == [None]  # the hot path found no row at the expected version and wrote nothing
    kinds = [s.sql.split()[0] for s in captured.statements]
    assert kinds[:3] == ["BEGIN", "UPDATE", "ROLLBACK"], kinds  # then the general path names the conflict
    assert [e.message.content[0]["text"] for e in sqlite_store.history("s", "a")] == ["q0", "q1"]


def test_hot_commits_check_out_no_pooled_connection(tmp_path: Any) -> None:
    """The hot path commits on the one connection the store holds: no pool checkout per commit."""
    from sqlalchemy import event
    from sqlalchemy.pool import QueuePool

    store = SQLStore.from_url(f"sqlite:///{tmp_path / 'held.db'}")
    conversation = Conversation(store, "s", "a")
    conversation.append(Message.user("creates the conversation (the general path)"))
    conversation.append(Message.user("the first hot commit takes the connection it keeps"))
    checkouts: list[object] = []
    event.listen(store.engine, "checkout", lambda *args: checkouts.append(args))
    for n in range(5):
        conversation.append(Message.user(f"q{n}"), Message.assistant(f"a{n}"))
    assert checkouts == []
    pool = store.engine.pool
    assert isinstance(pool, QueuePool)
    assert pool.checkedout() == 0  # held apart from the pool, idle between commits
    with store._held_writer().driver_connection() as held:
        assert held.in_transaction is False
    store.close()
    with pytest.raises(Exception, match="closed"):
        held.execute("SELECT 1")
    reopened = SQLStore.from_url(f"sqlite:///{tmp_path / 'held.db'}")
    snap = reopened.load("s", "a")
    reopened.close()
    assert snap is not None
    assert len(snap.entries) == 12


def test_a_second_thread_commits_on_a_pooled_connection_while_the_held_one_is_busy(tmp_path: Any) -> None:
    store = SQLStore.from_url(f"sqlite:///{tmp_path / 'busy.db'}")
    Conversation(store, "s", "a").append(Message.user("seed"))
    other = Conversation(store, "t", "a")
    other.append(Message.user("seed"))
    with store._held_writer().driver_connection():  # another commit holds it
        other.append(Message.user("on a pooled connection"))
    assert [e.message.plain_text for e in Conversation(store, "t", "a").view] == ["seed", "on a pooled connection"]
    store.close()


def _append_in_child(store: SQLStore, parent_connection: int) -> None:
    import os

    store.engine.dispose(close=False)  # what SQLAlchemy asks of a forked child for its pool
    Conversation(store, "s", "a").append(Message.user("from the child"))
    with store._held_writer().driver_connection() as held:
        os._exit(0 if id(held) != parent_connection else 3)


def test_a_forked_child_commits_on_a_connection_of_its_own(tmp_path: Any) -> None:
    import multiprocessing
    import sys

    if sys.platform == "win32":  # pragma: no cover - no fork there
        pytest.skip("no fork")
    store = SQLStore.from_url(f"sqlite:///{tmp_path / 'fork.db'}")
    conversation = Conversation(store, "s", "a")
    conversation.append(Message.user("seed"))
    conversation.append(Message.user("held from here on"))
    with store._held_writer().driver_connection() as held:
        parent_connection = id(held)
    child = multiprocessing.get_context("fork").Process(target=_append_in_child, args=(store, parent_connection))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0
    conversation.append(Message.user("the parent again"))  # re-read after the child's commit, then committed
    with store._held_writer().driver_connection() as held:
        assert id(held) == parent_connection  # the parent's own connection still serves it
    texts = [e.message.plain_text for e in Conversation(store, "s", "a").view]
    store.close()
    assert texts == ["seed", "held from here on", "from the child", "the parent again"]


@pytest.mark.parametrize("rows", [2, sqlite_hot.MULTI_ROW_APPENDS, sqlite_hot.MULTI_ROW_APPENDS + 1])
def test_an_appended_id_already_stored_rolls_back_the_turn_in_either_insert_form(
    sqlite_store: SQLStore, rows: int
) -> None:
    conversation = Conversation(sqlite_store, "s", "a")
    first = Message.user("first")
    conversation.append(first, Message.user("second"))
    conversation.append(Message.user("third"))  # a hot commit: the conversation's id is known
    before = sqlite_store.load("s", "a"), sqlite_store.history("s", "a")
    assert before[0] is not None
    fresh = [Message.user(f"fresh {i}") for i in range(rows - 1)]
    again = Message.user("again", message_id=first.message_id)
    state = before[0].state
    changeset = Changeset(
        session_id="s",
        agent_id="a",
        expected_version=state.version,
        # the clash comes last: every row before it is undone too
        appends=tuple(
            ViewEntry(entry_id=m.message_id, seq=state.next_seq + i, message=m, tokens=3)
            for i, m in enumerate([*fresh, again])
        ),
        next_seq=state.next_seq + rows,
    )
    assert sqlite_hot.takes_hot_path(changeset)
    with trace_sqlite(sqlite_store) as captured, pytest.raises(DuplicateEntry, match="already exists"):
        sqlite_store.commit(changeset)
    inserts = [s.sql for s in captured.work if s.sql.startswith("INSERT INTO cl_entries")]
    # one multi-row statement up to the bound; past it one executemany, which SQLite traces per row
    assert len(inserts) == (1 if rows <= sqlite_hot.MULTI_ROW_APPENDS else rows), inserts
    assert (sqlite_store.load("s", "a"), sqlite_store.history("s", "a")) == before
    fixed = changeset.model_copy(update={"appends": changeset.appends[:-1], "next_seq": state.next_seq + rows - 1})
    assert sqlite_store.commit(fixed) == state.version + 1
    assert [h.message.message_id for h in sqlite_store.history("s", "a")][3:] == [m.message_id for m in fresh]


_TURNS = st.lists(
    st.lists(
        st.tuples(
            st.text(st.characters(exclude_categories=["Cs"]), max_size=12),
            st.sampled_from([None, {"k": ["v", 1.5, None]}, {"custom": {"pinned": True}}]),
        ),
        min_size=1,
        max_size=sqlite_hot.MULTI_ROW_APPENDS + 2,
    ),
    min_size=1,
    max_size=3,
)


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=_TURNS)
def test_a_turn_of_any_size_writes_what_the_general_path_writes(
    sqlite_store: SQLStore, turns: list[list[tuple[str, dict[str, Any] | None]]]
) -> None:
    fast, general = uuid.uuid4().hex, uuid.uuid4().hex
    taken: list[bool] = []
    counting = _noting_hot_commits(taken)

    for session, hot in ((fast, True), (general, False)):
        conversation = Conversation(sqlite_store, session, "a")
        conversation.append(Message.user("first", message_id="first"))  # creates it: the general path
        path = (
            patch.object(sqlite_hot, "apply_hot", counting)
            if hot
            else patch.object(sqlite_hot, "takes_hot_path", lambda cs: False)
        )
        with path:
            for n, turn in enumerate(turns):
                conversation.append(
                    *(
                        Message.user(text, message_id=f"m{n}-{i}", **({"metadata": meta} if meta else {}))
                        for i, (text, meta) in enumerate(turn)
                    )
                )
    assert taken == [True] * len(turns)  # every turn of the first conversation took the hot path
    rows = _rows(sqlite_store, fast)
    assert len(rows["cl_entries"]) == 1 + sum(len(turn) for turn in turns)
    assert rows == _rows(sqlite_store, general)
