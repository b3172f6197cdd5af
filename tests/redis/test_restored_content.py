"""A view restored from Redis holds its messages' content as the stored JSON text until first use.

The same as a SQL restore (see ``tests/sql/test_restored_content.py``): nothing decoded by
opening, nor by the tool-pair rules, nor by a history read; each message reads as the live
one once used.
"""

from __future__ import annotations

from contextledger import Message
from contextledger.conversation.conversation import Conversation
from contextledger.stores.redis import RedisStore
from tests.sql.test_restored_content import decoded, turn


def test_a_redis_restore_decodes_on_first_use(redis_store: RedisStore) -> None:
    sent: list[Message] = [m for n in range(3) for m in turn(n)]
    Conversation(redis_store, "s", "agent").append(*sent)
    Conversation(redis_store, "s", "agent").pin(sent[0].message_id)
    view = Conversation(redis_store, "s", "agent").view
    # The pinned entry was rebuilt with its pin (a copy reads the content); the rest wait.
    assert [decoded(e.message) for e in view] == [True] + [False] * (len(sent) - 1)
    assert view.groups[:3] == [[0], [1, 2], [3]]
    assert view.dangling_tool_uses() == view.orphan_results() == []
    assert not any(decoded(e.message) for e in view.entries[1:])
    assert all(e.entry_id is e.message.message_id for e in view)  # one string for both ids
    assert [e.message for e in view] == [sent[0].with_pin(True), *sent[1:]]
    assert [e.message.model_dump() for e in view][1:] == [m.model_dump() for m in sent[1:]]


def test_redis_history_holds_the_content_as_text_until_read(redis_store: RedisStore) -> None:
    sent: list[Message] = [m for n in range(3) for m in turn(n)]
    Conversation(redis_store, "s", "agent").append(*sent)
    entries = redis_store.history("s", "agent")
    assert not any(decoded(e.message) for e in entries)
    assert [e.message for e in entries] == sent
    assert [e.message.content for e in entries] == [m.content for m in sent]
    assert all(decoded(e.message) for e in entries)
