"""A page of Redis reductions or pin events reads a range of their list, observed with MONITOR.

Each list is in commit order; while its rows' times do not go back (the commit script's
order mark says so) a page of one agent is a range of it, found by bisection and read
with one LRANGE. A list out of order, or written before the marks, is read whole; every
page equals the slice of the whole listing either way.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextledger import Ledger, Message
from contextledger.conversation.conversation import Conversation
from contextledger.core.changeset import Changeset
from contextledger.model.paging import Page, cursor, paged
from contextledger.model.records import Reduction
from contextledger.stores.redis import RedisStore
from contextledger.stores.redis.keys import ConversationKeys
from tests.soak import examples

from .conftest import Backend, raw_client
from .test_hot_path import _from_client, _from_scripts, monitored, monitored_cluster

COUNT = 200
BASE = datetime(2026, 1, 1, tzinfo=UTC)


def _reduce(store: RedisStore, session_id: str, agent_id: str, times: list[datetime]) -> None:
    """One commit per time, each recording a reduction made at that time."""
    version = 0
    state = store.load(session_id, agent_id)
    if state is not None:
        version = state.state.version
    for at in times:
        reduction = Reduction(
            session_id=session_id,
            agent_id=agent_id,
            trigger="manual",
            strategy="w",
            created_at=at,
            messages_before=0,
            messages_after=0,
            tokens_before=0,
            tokens_after=0,
            version=version + 1,
        )
        store.commit(Changeset(session_id=session_id, agent_id=agent_id, expected_version=version, reduction=reduction))
        version += 1


def _pin(store: RedisStore, session_id: str, agent_id: str, count: int) -> None:
    """``count`` pin events, up to three per commit."""
    chat = Conversation(store, session_id, agent_id)
    ids = [m.message_id for m in chat.append(*(Message.user(f"m{i}") for i in range(count)))]
    for start in range(0, count, 3):
        chat.refresh()
        pins = dict.fromkeys(ids[start : start + 3], True)
        store.commit(Changeset(session_id=session_id, agent_id=agent_id, expected_version=chat.version, pins=pins))


def _script_reads(commands: list[dict[str, Any]], key: str) -> tuple[int, list[tuple[int, int]]]:
    """How many rows a script read by LINDEX, and the (start, stop) of each LRANGE, on list ``key``."""
    lindex, ranges = 0, []
    for command in _from_scripts(commands):
        name, target, *args = command.split(" ")
        if target.strip('"') != key:
            continue
        if name == "LINDEX":
            lindex += 1
        elif name == "LRANGE":
            ranges.append((int(args[0].strip('"')), int(args[1].strip('"'))))
    return lindex, ranges


def test_reductions_last_3_of_200_reads_3_rows(backend: Backend) -> None:
    redis_store = backend.store
    _reduce(redis_store, "r", "a", [BASE + timedelta(seconds=i) for i in range(COUNT)])
    key = ConversationKeys.of(redis_store.key_prefix, "r", "a").red
    whole = redis_store.reductions("r", "a")
    assert len(whole) == COUNT
    watch = monitored_cluster if backend.cluster else monitored
    with watch(backend.url) as commands:
        got = redis_store.reductions("r", "a", page=Page(last=3))
    assert got == whole[-3:]
    assert [c for c in _from_client(commands) if c != "PING"] == ["EVALSHA"]
    assert _script_reads(commands, key) == (0, [(COUNT - 3, COUNT - 1)])

    with watch(backend.url) as commands:
        after = redis_store.reductions("r", "a", page=Page(after=cursor(whole[100]), limit=5))
    assert after == whole[101:106]
    lindex, ranges = _script_reads(commands, key)
    assert lindex <= math.ceil(math.log2(COUNT)) + 1  # a bisection, not a walk
    assert ranges == [(101, 105)]


def test_pin_history_reads_a_range(redis_store: RedisStore, redis_url: str) -> None:
    _pin(redis_store, "p", "a", 30)
    key = ConversationKeys.of(redis_store.key_prefix, "p", "a").pins
    whole = redis_store.pin_history("p", "a")
    assert len(whole) == 30
    with monitored(redis_url) as commands:
        got = redis_store.pin_history("p", "a", page=Page(before=cursor(whole[20]), last=4))
    assert got == whole[16:20]
    assert _script_reads(commands, key)[1] == [(16, 19)]
    # a cursor in the middle of one commit's pin events: its position tells them apart
    assert redis_store.pin_history("p", "a", page=Page(after=cursor(whole[10]), limit=3)) == whole[11:14]


def test_many_agents_read_at_most_the_page_each(redis_store: RedisStore, redis_url: str) -> None:
    for n, agent in enumerate(("a", "b", "c")):
        _reduce(redis_store, "m", agent, [BASE + timedelta(seconds=3 * i + n) for i in range(40)])
    whole = redis_store.reductions("m")
    assert len(whole) == 120
    with monitored(redis_url) as commands:
        got = redis_store.reductions("m", page=Page(after=cursor(whole[50]), limit=4))
    assert got == whole[51:55]
    for agent in ("a", "b", "c"):
        _, ranges = _script_reads(commands, ConversationKeys.of(redis_store.key_prefix, "m", agent).red)
        assert all(stop - start + 1 <= 4 for start, stop in ranges)


def test_a_clock_going_back_leaves_the_list_read_whole(redis_store: RedisStore, redis_url: str) -> None:
    times = [BASE + timedelta(seconds=i) for i in range(10)]
    _reduce(redis_store, "skew", "a", [*times, BASE + timedelta(seconds=5, microseconds=1), *times[-3:]])
    keys = ConversationKeys.of(redis_store.key_prefix, "skew", "a")
    client = raw_client(redis_url)
    try:
        assert client.hget(keys.state, "red_unordered") == b"1"
    finally:
        client.close()
    whole = redis_store.reductions("skew", "a")
    assert whole == paged(whole, None)  # in the listing's order, not the list's
    with monitored(redis_url) as commands:
        got = redis_store.reductions("skew", "a", page=Page(last=3))
    assert got == whole[-3:]
    assert _script_reads(commands, keys.red)[1] == [(0, -1)]


def test_upgrade_marks_a_list_written_before_the_marks(backend: Backend) -> None:
    store = backend.store
    _reduce(store, "old", "a", [BASE + timedelta(seconds=i) for i in range(20)])
    keys = ConversationKeys.of(backend.prefix, "old", "a")
    whole = store.reductions("old", "a")
    backend.client.hdel(keys.state, "red_at")
    _reduce(store, "old", "a", [BASE + timedelta(seconds=30)])  # a commit does not mark a list it did not start
    assert backend.client.hget(keys.state, "red_at") is None
    whole = store.reductions("old", "a")
    assert store.reductions("old", "a", page=Page(last=2)) == whole[-2:]  # read whole meanwhile
    assert store.upgrade() == 1
    assert backend.client.hget(keys.state, "red_at") is not None
    assert backend.client.hget(keys.state, "red_unordered") is None
    assert store.upgrade() == 0
    assert store.reductions("old", "a", page=Page(after=cursor(whole[3]), limit=2)) == whole[4:6]


def test_an_import_marks_its_lists(backend: Backend) -> None:
    store = backend.store
    _reduce(store, "src", "a", [BASE + timedelta(seconds=i) for i in range(5)])
    _pin(store, "src", "a", 4)
    (records,) = Ledger(store).export_records("src", "a")
    other = RedisStore.from_url(backend.url, key_prefix=f"{backend.prefix}:copy")
    try:
        assert other.import_conversation(records)
        keys = ConversationKeys.of(other.key_prefix, "src", "a")
        assert backend.client.hget(keys.state, "red_at") is not None
        assert backend.client.hget(keys.state, "pin_at") is not None
        assert other.reductions("src", page=Page(last=2)) == store.reductions("src", page=Page(last=2))
        assert other.pin_history("src", page=Page(limit=2)) == store.pin_history("src", page=Page(limit=2))
    finally:
        other.delete_session("src")
        other.close()


def _session(store: RedisStore) -> tuple[list[Reduction], list[Any]]:
    """Two agents with interleaved, tied and (for one) out-of-order times; built once per store."""
    if store.reductions("prop", "a", page=Page(limit=1)):
        return store.reductions("prop"), store.pin_history("prop")
    _reduce(store, "prop", "a", [BASE + timedelta(seconds=i // 2) for i in range(25)])  # ties by time
    _reduce(store, "prop", "b", [BASE + timedelta(seconds=i) for i in range(12)])
    _reduce(store, "prop", "c", [BASE + timedelta(seconds=(7 * i) % 11) for i in range(11)])  # out of order
    _pin(store, "prop", "a", 10)
    _pin(store, "prop", "b", 7)
    return store.reductions("prop"), store.pin_history("prop")


_index = st.none() | st.integers(min_value=0, max_value=60)
_count = st.none() | st.integers(min_value=0, max_value=60)


@given(
    listing=st.sampled_from(["reductions", "pins"]),
    agent=st.sampled_from([None, "a", "b", "c"]),
    after=_index,
    before=_index,
    count=_count,
    from_end=st.booleans(),
)
@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_page_is_the_slice_of_the_whole_listing(
    redis_store: RedisStore,
    listing: str,
    agent: str | None,
    after: int | None,
    before: int | None,
    count: int | None,
    from_end: bool,
) -> None:
    """Cursors of any agent's records, counts from either end: a page is the whole listing filtered and cut."""
    reductions, pins = _session(redis_store)
    records = reductions if listing == "reductions" else pins
    read = redis_store.reductions if listing == "reductions" else redis_store.pin_history
    page = Page(
        after=None if after is None else cursor(records[after % len(records)]),
        before=None if before is None else cursor(records[before % len(records)]),
        limit=None if from_end else count,
        last=count if from_end else None,
    )
    whole = [r for r in records if agent is None or r.agent_id == agent]
    assert read("prop", agent, page=page) == paged(whole, page)


@pytest.mark.parametrize("listing", ["reductions", "pins"])
def test_a_page_of_an_empty_list_is_empty(redis_store: RedisStore, listing: str) -> None:
    Conversation(redis_store, "empty", "a").append(Message.user("hi"))
    read = redis_store.reductions if listing == "reductions" else redis_store.pin_history
    assert read("empty", "a", page=Page(last=3)) == []
    assert read("empty", page=Page(after=(BASE, "a", 1, 0)[: 3 if listing == "reductions" else 4], limit=2)) == []


def test_reductions_at_naive_or_other_zone_times_page_like_the_rest(redis_store: RedisStore) -> None:
    """A naive time means UTC; a time in another zone is stored as given, and its list is read whole."""
    naive = [datetime(2026, 1, 1, 0, 0, i) for i in range(6)]
    _reduce(redis_store, "naive", "a", naive)
    whole = redis_store.reductions("naive", "a")
    assert len(whole) == 6
    assert redis_store.reductions("naive", "a", page=Page(after=cursor(whole[1]), last=2)) == whole[4:6]
    zone = timezone(timedelta(hours=2))
    _reduce(redis_store, "zoned", "a", [datetime(2026, 1, 1, 2, 0, i, tzinfo=zone) for i in range(6)])
    whole = redis_store.reductions("zoned", "a")
    assert redis_store.reductions("zoned", "a", page=Page(after=cursor(whole[1]), last=2)) == whole[4:6]
    (records,) = Ledger(redis_store).export_records("zoned", "a")
    copy = RedisStore.from_url(redis_store.url, key_prefix=f"{redis_store.key_prefix}:zoned")
    try:
        assert copy.import_conversation(records)
        assert copy.reductions("zoned", page=Page(limit=3)) == whole[:3]
    finally:
        copy.delete_session("zoned")
        copy.close()


def test_rows_pushed_by_a_writer_without_marks_are_not_ranged(backend: Backend) -> None:
    """During a rolling upgrade an older version pushes rows and no mark: the list is read whole until upgraded."""
    store = backend.store
    _reduce(store, "roll", "a", [BASE + timedelta(seconds=i) for i in range(10)])
    keys = ConversationKeys.of(backend.prefix, "roll", "a")
    # an older writer's row, later than the mark knows, then a newer writer's earlier one
    (row,) = backend.client.lrange(keys.red, -1, -1)
    older = Reduction.model_validate_json(row).model_copy(
        update={"reduction_id": "older-writer", "created_at": BASE + timedelta(seconds=30), "version": 11}
    )
    backend.client.rpush(keys.red, older.model_dump_json())
    backend.client.hincrby(keys.state, "version", 1)
    whole = store.reductions("roll", "a")
    assert [r.reduction_id for r in whole][-1] == "older-writer"
    assert store.reductions("roll", "a", page=Page(last=2)) == whole[-2:]
    _reduce(store, "roll", "a", [BASE + timedelta(seconds=20)])  # before the older writer's row
    assert backend.client.hget(keys.state, "red_at") is None  # the mark went: order unknown
    whole = store.reductions("roll", "a")
    assert [r.created_at for r in whole] == sorted(r.created_at for r in whole)
    assert store.reductions("roll", "a", page=Page(last=2)) == whole[-2:]
    assert store.upgrade() == 1
    assert backend.client.hget(keys.state, "red_unordered") == b"1"  # checked whole: out of order
    assert store.reductions("roll", "a", page=Page(after=cursor(whole[9]), limit=3)) == whole[10:13]
