"""0007 numbers the pin events written before it: a ledger's pin history reads the same after the upgrade.

Pin events are written under the current schema, the schema is taken down to 0006 (which
drops ``position``) and up again: the upgrade must give every event its index within its
changeset back, so the history -- and every page of it -- is what it was.
"""

from __future__ import annotations

from sqlalchemy import inspect

from contextledger import Message
from contextledger.conversation.conversation import Conversation
from contextledger.core.changeset import Changeset
from contextledger.model.paging import Page, cursor
from contextledger.stores.sql import SQLStore, current, downgrade, head, upgrade
from contextledger.stores.sql.engine import build_engine, parse_url


def _pin_columns(url: str) -> set[str]:
    engine = build_engine(parse_url(url))
    try:
        return {column["name"] for column in inspect(engine).get_columns("cl_pin_events")}
    finally:
        engine.dispose()


def _write_pins(store: SQLStore) -> None:
    """Two agents; each pins one entry alone, then three in one changeset, then unpins two of them together."""
    for agent in ("a", "b"):
        chat = Conversation(store, "s", agent)
        ids = [m.message_id for m in chat.append(*(Message.user(f"{agent}{i}") for i in range(5)))]
        chat.pin(ids[0])
        for pins in (dict.fromkeys(ids[1:4], True), dict.fromkeys(ids[2:4], False)):
            store.commit(Changeset(session_id="s", agent_id=agent, expected_version=chat.version, pins=pins))
            chat.refresh()


def test_pin_events_written_before_0007_get_their_positions(empty_url: str) -> None:
    upgrade(empty_url)
    store = SQLStore.from_url(empty_url, auto_upgrade=False)
    try:
        _write_pins(store)
        before = store.pin_history("s")
    finally:
        store.close()
    assert [e.position for e in before if e.agent_id == "a"] == [0, 0, 1, 2, 0, 1]

    downgrade(empty_url, "0006")
    assert "position" not in _pin_columns(empty_url)
    upgrade(empty_url)
    assert current(empty_url) == head()
    store = SQLStore.from_url(empty_url, auto_upgrade=False)
    try:
        assert store.pin_history("s") == before
        keys = [cursor(e) for e in before]
        assert len(set(keys)) == len(keys)
        # Paged from the cursor of each event in turn, two at a time: the same events, once.
        read = []
        page = Page(limit=2)
        while found := store.pin_history("s", page=page):
            read += found
            page = Page(after=cursor(found[-1]), limit=2)
        assert read == before
    finally:
        store.close()
