"""Pin events a Redis ledger kept before they had a position read with their index within their changeset."""

from __future__ import annotations

import json

from contextledger.conversation.conversation import Conversation
from contextledger.core.changeset import Changeset
from contextledger.model.messages import Message
from contextledger.model.paging import Page, cursor
from contextledger.stores.redis.keys import ConversationKeys
from tests.redis.conftest import Backend


def test_pin_rows_without_a_position_are_numbered_in_commit_order(backend: Backend) -> None:
    store = backend.store
    chat = Conversation(store, "s", "a")
    ids = [m.message_id for m in chat.append(*(Message.user(f"m{i}") for i in range(4)))]
    chat.pin(ids[0])
    store.commit(Changeset(session_id="s", agent_id="a", expected_version=chat.version, pins={ids[0]: False}))
    chat.refresh()
    pins = dict.fromkeys(ids[1:], True)  # three pin changes in one changeset
    store.commit(Changeset(session_id="s", agent_id="a", expected_version=chat.version, pins=pins))
    written = store.pin_history("s")
    assert [e.position for e in written] == [0, 0, 0, 1, 2]

    # The rows as 0.2 wrote them: the same JSON without "position".
    key = ConversationKeys.of(backend.prefix, "s", "a").pins
    rows = [json.loads(raw) for raw in backend.client.lrange(key, 0, -1)]
    assert all("position" in row for row in rows)
    backend.client.delete(key)
    backend.client.rpush(key, *(json.dumps({k: v for k, v in row.items() if k != "position"}) for row in rows))
    # 0.2 kept no order mark of the list either (see stores/redis/listing.py)
    state = ConversationKeys.of(backend.prefix, "s", "a").state
    backend.client.hdel(state, "pin_at", "pin_unordered")

    assert store.pin_history("s") == written
    last_two = store.pin_history("s", page=Page(after=cursor(written[2]), limit=5))
    assert last_two == written[3:]
    # upgrading leaves such a list read whole: a range of it could not number its rows
    store.upgrade()
    assert backend.client.hget(state, "pin_unordered") == b"1"
    assert store.pin_history("s", page=Page(after=cursor(written[2]), limit=5)) == written[3:]
