"""The commit script sent on a pooled connection: what ``Script.__call__`` and the client did, still done.

A flushed script cache is refilled and the commit sent once more; a connection the
server dropped is replaced under the connection's retry policy and the commit applies
once; clients that hold a connection of their own, or are not a plain ``Redis``, keep
the ``Script`` path and still commit.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from collections.abc import Iterator

import pytest
from redis import Redis
from redis.asyncio import Connection as AsyncConnection

from contextledger.conversation.conversation import Conversation
from contextledger.core.seam import Lost
from contextledger.model.messages import Message
from contextledger.stores.redis import RedisStore
from contextledger.stores.redis.asend import NativeSend
from contextledger.stores.redis.send import pack_in_c, pooled
from tests.plugins.redis import purge
from tests.redis.test_hot_path import monitored


def _from_client(commands: list[dict[str, object]]) -> list[str]:
    return [str(c["command"]).split(" ", 1)[0].upper() for c in commands if c["client_type"] != "lua"]


def test_a_flushed_script_cache_is_refilled_and_the_commit_applies_once(
    redis_store: RedisStore, redis_url: str
) -> None:
    conv = Conversation(redis_store, "flushed", "a")
    conv.append(Message.user("first"))
    admin = Redis.from_url(redis_url)
    try:
        admin.script_flush()
        with monitored(redis_url) as commands:
            conv.append(Message.user("second"), Message.assistant("answer"))
    finally:
        admin.close()
    assert _from_client(commands) == ["EVALSHA", "SCRIPT", "EVALSHA"]  # refused unknown, loaded, applied
    snap = redis_store.load("flushed", "a")
    assert snap is not None
    assert [e.message.plain_text for e in snap.entries] == ["first", "second", "answer"]
    assert snap.state.version == conv.version == 2


def test_a_dropped_connection_is_replaced_and_the_commit_applies_once(
    redis_store: RedisStore, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="contextledger.stores.exactly_once")
    conv = Conversation(redis_store, "dropped", "a")
    conv.append(Message.user("first"))
    admin = Redis.from_url(redis_url)
    try:
        killed = admin.client_kill_filter(_type="normal", skipme=True)  # the store's idle pooled connection too
        assert killed >= 1
        conv.append(Message.user("after the drop"))
    finally:
        admin.close()
    snap = redis_store.load("dropped", "a")
    assert snap is not None
    assert [e.message.plain_text for e in snap.entries] == ["first", "after the drop"]
    assert snap.state.version == 2
    # replaced before the send (the pool checks an idle connection), as the client's own call would: no lost reply
    assert "reply lost" not in caplog.text


def test_only_a_plain_pooled_client_takes_the_path(redis_url: str) -> None:
    class Wrapped(Redis):
        pass

    plain = Redis.from_url(redis_url)
    held = Redis.from_url(redis_url, single_connection_client=True)
    sub = Wrapped.from_url(redis_url)
    try:
        assert pooled(plain) is not None
        assert pooled(held) is None
        assert pooled(sub) is None
        assert pooled(object()) is None
    finally:
        for client in (plain, held, sub):
            client.close()


@pytest.fixture
def held_store(redis_url: str, redis_key_prefix: str) -> Iterator[RedisStore]:
    store = RedisStore(Redis.from_url(redis_url, single_connection_client=True), key_prefix=redis_key_prefix)
    try:
        yield store
    finally:
        store.close()
        purge(redis_url, redis_key_prefix)


def test_a_client_holding_its_connection_commits_through_the_script(held_store: RedisStore, redis_url: str) -> None:
    conv = Conversation(held_store, "held", "a")
    conv.append(Message.user("first"))
    with monitored(redis_url) as commands:
        conv.append(Message.user("second"))
    assert _from_client(commands) == ["EVALSHA"]
    snap = held_store.load("held", "a")
    assert snap is not None
    assert [e.message.plain_text for e in snap.entries] == ["first", "second"]


def test_a_command_packed_by_the_store_is_the_bytes_the_connection_packs(redis_url: str) -> None:
    client = Redis.from_url(redis_url)
    pack = pooled(client)
    assert pack is not None
    connection = client.connection_pool.get_connection()
    try:
        command = ("EVALSHA", "a" * 40, 2, "{k}:state", "{é}:msg", "", '😀 \x00 \\ "', "x" * 100_000, "1")
        expected = b"".join(connection.pack_command(*command))  # type: ignore[no-untyped-call]
        assert b"".join(pack(connection, command)) == expected
        if pack_in_c is not None:  # what the native async send packs, against redis.asyncio's own packer
            assert pack_in_c(command) == b"".join(AsyncConnection().pack_command(*command)) == expected
    finally:
        client.connection_pool.release(connection)
        client.close()


def test_a_native_send_without_a_reply_is_lost_after_the_clients_socket_timeout(redis_store: RedisStore) -> None:
    # a loopback listener that accepts and never answers: the send waits the timeout, no longer
    silent = socket.create_server(("127.0.0.1", 0))
    port = silent.getsockname()[1]
    sender = NativeSend(redis_store, {"host": "127.0.0.1", "port": port, "socket_timeout": 0.2})

    async def send() -> None:
        try:
            await sender.send(("0" * 40, ["k"], ["a"]))
        finally:
            await sender.aclose()

    try:
        started = time.monotonic()
        with pytest.raises(Lost):
            asyncio.run(asyncio.wait_for(send(), 10))
        assert time.monotonic() - started < 5  # bounded by the timeout, not the outer guard
    finally:
        silent.close()


def test_appends_go_out_on_one_held_connection_that_the_store_closes(redis_url: str, redis_key_prefix: str) -> None:
    name = f"cl-held-{uuid.uuid4().hex[:8]}"
    client = Redis.from_url(redis_url, client_name=name)
    store = RedisStore(client, key_prefix=redis_key_prefix)
    admin = Redis.from_url(redis_url)
    try:
        conv = Conversation(store, "held-conn", "a")
        conv.append(Message.user("first"))  # the creating commit: the client's own calls
        with monitored(redis_url) as commands:
            for n in range(3):
                conv.append(Message.user(f"m{n}"))
        sent = [(c["client_address"], c["client_port"]) for c in commands if c["client_type"] != "lua"]
        assert len(sent) == 3
        assert len(set(sent)) == 1  # one connection for every append
        in_use = sum(
            count
            for count, attributes in client.connection_pool.get_connection_count()
            if attributes.get("db.client.connection.state") == "used"
        )
        assert in_use == 0  # held outside the pool: no checkout left open
        assert len([c for c in admin.client_list() if c["name"] == name]) >= 1
        snap = store.load("held-conn", "a")
        assert snap is not None
        assert [e.message.plain_text for e in snap.entries] == ["first", "m0", "m1", "m2"]
        store.close()
        assert [c for c in admin.client_list() if c["name"] == name] == []  # the held one closed too
    finally:
        store.close()
        admin.close()
        purge(redis_url, redis_key_prefix)


def test_a_forked_child_commits_on_a_connection_of_its_own_and_leaves_the_parents_open(
    redis_store: RedisStore, redis_url: str
) -> None:
    conv = Conversation(redis_store, "forked", "parent")
    conv.append(Message.user("first"))
    conv.append(Message.user("second"))  # the held connection is made and used
    with monitored(redis_url) as commands:
        pid = os.fork()
        if pid == 0:  # the child: its own conversation, then its store's close, then out
            code = 1
            try:
                child = Conversation(redis_store, "forked", "child")
                child.append(Message.user("from the child"))
                child.append(Message.user("again"))  # on the child's held connection
                redis_store.close()
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        conv.append(Message.user("after the fork"))  # the parent's held connection still answers
    sent = [
        (c["client_address"], c["client_port"])
        for c in commands
        if c["client_type"] != "lua" and str(c["command"]).upper().startswith("EVALSHA")
    ]
    assert len(sent) >= 3  # the child's scripts (its creating commit's too), then the parent's append
    assert sent[-1] not in sent[:-1]  # the child never sent on its parent's held connection
    parent = redis_store.load("forked", "parent")
    child_snap = redis_store.load("forked", "child")
    assert parent is not None
    assert child_snap is not None
    assert [e.message.plain_text for e in parent.entries] == ["first", "second", "after the fork"]
    assert [e.message.plain_text for e in child_snap.entries] == ["from the child", "again"]
