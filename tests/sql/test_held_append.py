"""PostgreSQL's held append connection: what happens to it on errors, lost backends, threads and close."""

from __future__ import annotations

import os
import threading
import time

import pytest
from sqlalchemy import create_engine, text

from contextledger import Message
from contextledger.conversation.conversation import Conversation
from contextledger.errors import DuplicateEntry, LedgerClosed
from contextledger.stores.sql import SQLStore


def _backend(store: SQLStore) -> int:
    """The server process id of the store's held append connection (made if need be)."""
    with store._held_appender().driver_connection() as held:
        return int(held.info.backend_pid)


def _alive(url: str, pid: int) -> bool:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return bool(conn.execute(text("SELECT count(*) FROM pg_stat_activity WHERE pid = :p"), {"p": pid}).scalar())
    finally:
        engine.dispose()


def _ids(store: SQLStore) -> list[str]:
    return [h.message.message_id for h in store.history("s", "a")]


def test_appends_share_one_held_connection(postgres_store: SQLStore) -> None:
    conversation = Conversation(postgres_store, "s", "a")
    conversation.append(Message.user("first"))
    conversation.append(Message.user("second"))
    pid = _backend(postgres_store)
    for n in range(5):
        conversation.append(Message.user(f"m{n}"))
        conversation.before_model_call()
    assert _backend(postgres_store) == pid
    assert len(_ids(postgres_store)) == 7


def test_a_duplicate_keeps_the_held_connection(postgres_store: SQLStore) -> None:
    conversation = Conversation(postgres_store, "s", "a")
    first = Message.user("first")
    conversation.append(first, Message.user("second"))
    pid = _backend(postgres_store)
    with pytest.raises(DuplicateEntry):
        conversation.append(Message.user("again", message_id=first.message_id))
    assert _backend(postgres_store) == pid  # the failed statement left the autocommit connection idle
    conversation.append(Message.user("third"))
    assert _ids(postgres_store)[-1] == conversation.view[-1].entry_id


def test_a_terminated_backend_is_resolved_and_replaced(postgres_store: SQLStore, postgres_ledger_url: str) -> None:
    conversation = Conversation(postgres_store, "s", "a")
    conversation.append(Message.user("first"))
    conversation.append(Message.user("second"))
    pid = _backend(postgres_store)
    admin = create_engine(postgres_ledger_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            assert conn.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid}).scalar()
    finally:
        admin.dispose()
    # The held connection is dead: the append fails on it, the commit log says it was
    # not applied, and it is sent again on a fresh connection -- once.
    message = Message.user("after the kill")
    conversation.append(message)
    assert _ids(postgres_store).count(message.message_id) == 1
    assert conversation.version == 3
    replaced = _backend(postgres_store)
    assert replaced != pid
    conversation.append(Message.user("and on"))
    assert _backend(postgres_store) == replaced
    assert len(_ids(postgres_store)) == 4


def test_a_busy_held_connection_sends_on_a_pooled_one(postgres_store: SQLStore) -> None:
    conversation = Conversation(postgres_store, "s", "a")
    conversation.append(Message.user("first"))
    taken = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with postgres_store._held_appender().driver_connection():
            taken.set()
            release.wait(timeout=30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert taken.wait(timeout=30)
        conversation.append(Message.user("while busy"))  # does not wait for the other thread
    finally:
        release.set()
        holder.join(timeout=30)
    assert [m.plain_text for m in (h.message for h in postgres_store.history("s", "a"))] == ["first", "while busy"]


def test_close_closes_the_held_connection(postgres_ledger_url: str) -> None:
    store = SQLStore.from_url(postgres_ledger_url)
    conversation = Conversation(store, "s", "a")
    conversation.append(Message.user("first"))
    conversation.append(Message.user("second"))
    pid = _backend(store)
    assert _alive(postgres_ledger_url, pid)
    store.close()
    deadline = time.monotonic() + 10  # the server process ends soon after its client closed
    while _alive(postgres_ledger_url, pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(postgres_ledger_url, pid)
    with pytest.raises(LedgerClosed):
        conversation.append(Message.user("too late"))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_leaves_its_parents_held_connection_alone(postgres_store: SQLStore) -> None:
    conversation = Conversation(postgres_store, "s", "a")
    conversation.append(Message.user("first"))
    conversation.append(Message.user("second"))
    pid = _backend(postgres_store)
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's exit status is the check
        code = 1
        try:
            postgres_store.close()  # must not end the parent's session through the shared socket
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    conversation.append(Message.user("third"))
    assert _backend(postgres_store) == pid  # the same session: the child did not close it
    assert len(_ids(postgres_store)) == 3


def test_an_invalidated_pooled_connection_replaces_the_held_one(postgres_store: SQLStore) -> None:
    # What SQLAlchemy does when it sees a disconnect on a pooled connection (a restarted
    # server): the idle held connection is replaced before its next statement, not found
    # dead by it (which would spend one of that commit's two exactly-once attempts).
    conversation = Conversation(postgres_store, "s", "a")
    conversation.append(Message.user("first"))
    conversation.append(Message.user("second"))
    pid = _backend(postgres_store)
    with postgres_store.engine.connect() as conn:
        conn.invalidate()
    conversation.append(Message.user("third"))
    replaced = _backend(postgres_store)
    assert replaced != pid
    conversation.append(Message.user("fourth"))
    assert _backend(postgres_store) == replaced  # replaced once, then kept
    assert len(_ids(postgres_store)) == 4


def test_an_async_engines_sync_face_appends_on_its_pooled_connections(postgres_ledger_url: str) -> None:
    """``create_async_engine(...).sync_engine`` (driven in a greenlet) holds nothing: appends go through SQLAlchemy."""
    import asyncio

    from sqlalchemy.engine import make_url
    from sqlalchemy.ext.asyncio import create_async_engine
    from sqlalchemy.util import greenlet_spawn

    async def run() -> list[str]:
        engine = create_async_engine(make_url(postgres_ledger_url).set(drivername="postgresql+psycopg_async"))
        store = SQLStore(engine.sync_engine)

        def work() -> list[str]:
            conversation = Conversation(store, "s", "a")
            conversation.append(Message.user("first"), Message.assistant("second"))
            conversation.append(Message.user("third"))
            assert store._appender is None or store._appender._connection is None
            return [m.plain_text for m in conversation.messages]

        try:
            return await greenlet_spawn(work)
        finally:
            await greenlet_spawn(store.close)
            await engine.dispose()

    assert asyncio.run(run()) == ["first", "second", "third"]


def test_a_lock_timeout_on_the_held_connection_is_a_timeout_and_writes_nothing(postgres_ledger_url: str) -> None:
    from contextledger.errors import StoreTimeout

    store = SQLStore.from_url(postgres_ledger_url, lock_timeout=0.2)
    try:
        conversation = Conversation(store, "s", "a")
        conversation.append(Message.user("first"))
        conversation.append(Message.user("second"))  # on the held connection, made now
        holder = create_engine(postgres_ledger_url).connect()
        try:
            holder.execute(text("SELECT id FROM cl_conversations WHERE session_id = 's' FOR UPDATE"))
            with pytest.raises(StoreTimeout):
                conversation.append(Message.user("late"))
        finally:
            holder.rollback()
            holder.close()
            holder.engine.dispose()
        assert _ids(store) == [e.entry_id for e in conversation.view.entries]  # nothing of "late" was written
        conversation.append(Message.user("third"))
        assert [h.message.content[0]["text"] for h in store.history("s", "a")] == ["first", "second", "third"]
    finally:
        store.close()


def test_an_interrupted_held_append_is_cancelled_on_the_server(
    postgres_store: SQLStore, postgres_ledger_url: str
) -> None:
    import signal

    conversation = Conversation(postgres_store, "s", "a")
    conversation.append(Message.user("first"))
    conversation.append(Message.user("second"))  # on the held connection, made now
    pid = _backend(postgres_store)
    holder = create_engine(postgres_ledger_url).connect()

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        holder.execute(text("SELECT id FROM cl_conversations WHERE session_id = 's' FOR UPDATE"))
        signal.setitimer(signal.ITIMER_REAL, 0.5)  # while the append waits for the row lock
        with pytest.raises(KeyboardInterrupt):
            conversation.append(Message.user("interrupted"))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        holder.rollback()  # the lock goes: a statement still waiting for it would run now
        holder.close()
        holder.engine.dispose()
    deadline = time.monotonic() + 10
    while _alive(postgres_ledger_url, pid) and time.monotonic() < deadline:
        time.sleep(0.05)  # the dropped connection's backend ends
    assert not _alive(postgres_ledger_url, pid)
    texts = [h.message.content[0]["text"] for h in postgres_store.history("s", "a")]
    assert texts == ["first", "second"]  # cancelled: not written after the interrupt
