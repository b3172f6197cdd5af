"""The session index of the Redis ledger: listing sessions and agents, and deleting a session.

``sessions()``, ``agents()``, ``delete_session()`` and the
cross-agent queries use index keys beside the conversations. On a single server the
commit script updates them in the same atomic step: the session's agent set and the
sorted set of sessions by last update. On Cluster the ordering index is split by hash
slot: the script updates the sorted set of its *own* slot (a key whose hash tag maps
to the conversation's slot), so an append is still that one script, one round trip,
and the order of sessions is exact; :meth:`sessions` merges the sets of the slots in
use. Only two index keys are written outside the script, and only when a conversation
is created (its first commit costs those extra round trips): the session's agent set,
and the set of slots that hold an ordering index (at most 16,384 slot numbers; never
shrunk). Both get an idempotent ``SADD`` before the first commit, and the agent set
another one after it.

That is safe because an index is never the source of truth for a conversation -- its
keys are. An agent set may at worst list an agent whose creating commit failed
(filtered out on read), and it never misses a conversation that exists, so
``delete_session`` finds every key to remove. Against a deletion racing with the
creation of a new agent's conversation in the same session: the deletion removes
only the agents it read and re-lists any whose conversation exists again after its
keys were removed, and the creator lists its agent again after its commit, so a
conversation that outlives the deletion stays listed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime

from contextledger.errors import CorruptRecord
from contextledger.model.records import SessionInfo
from contextledger.stores.redis.codec import decode_state, epoch_micros, text
from contextledger.stores.redis.connect import RedisClient
from contextledger.stores.redis.keys import ConversationKeys, SessionKeys

__all__ = ["most_recent", "relist_recreated", "session_infos"]

logger = logging.getLogger("contextledger.stores.redis.store")


def most_recent(client: RedisClient, index_keys: Sequence[str], n: int) -> list[str]:
    """The ``n`` most recently updated session ids over sorted sets of sessions.

    A session in several sets (agents in several slots) ranks by its latest score.
    Each set is read from the top, in rounds, until what it has not yet returned
    scores below the ``n``-th best session found: no such entry can change the answer.
    """
    best: dict[bytes, float] = {}
    read = dict.fromkeys(index_keys, 0)
    pending = list(index_keys)
    batch = min(n, max(4, -(-2 * n // max(len(index_keys), 1))))
    ranked: list[tuple[bytes, float]] = []
    while pending:
        pipe = client.pipeline(transaction=False)
        for key in pending:
            pipe.zrevrange(key, read[key], read[key] + batch - 1, withscores=True)
        last: dict[str, float] = {}
        for key, page in zip(pending, pipe.execute(), strict=True):
            read[key] += len(page)
            for member, score in page:
                best[member] = max(best.get(member, score), score)
            if len(page) == batch:  # it may hold more
                last[key] = page[-1][1]
        # ties order as ZREVRANGE orders them: by member, descending
        ranked = sorted(best.items(), key=lambda item: (item[1], item[0]), reverse=True)
        threshold = ranked[n - 1][1] if len(ranked) >= n else float("-inf")
        pending = [key for key, score in last.items() if score >= threshold]
        batch = min(batch * 2, n)
    return [text(member) for member, _ in ranked[:n]]


def session_infos(client: RedisClient, prefix: str, session_ids: list[str]) -> list[SessionInfo]:
    """What :meth:`RedisStore.sessions` lists of ``session_ids``; a damaged conversation is listed, marked."""
    pipe = client.pipeline(transaction=False)
    for sid in session_ids:
        pipe.smembers(SessionKeys.of(prefix, sid).agents)
        pipe.hmget(SessionKeys.of(prefix, sid).owner, ["app", "user"])
    replies = pipe.execute()
    agent_sets = replies[0::2]
    owners = {
        sid: (None if app is None else text(app), None if user is None else text(user))
        for sid, (app, user) in zip(session_ids, replies[1::2], strict=True)
    }
    pairs = [
        (sid, aid)
        for sid, members in zip(session_ids, agent_sets, strict=True)
        for aid in sorted(text(m) for m in members)
    ]
    pipe = client.pipeline(transaction=False)
    for sid, aid in pairs:
        keys = ConversationKeys.of(prefix, sid, aid)
        pipe.hgetall(keys.state)
        pipe.zcard(keys.active)
        pipe.hlen(keys.msg)
        pipe.hlen(keys.sum)
    replies = pipe.execute()
    by_session: dict[str, list[tuple[str, datetime, datetime, int, int, bool]]] = {}
    for n, (sid, aid) in enumerate(pairs):
        state_raw, active, messages, summaries = replies[4 * n : 4 * n + 4]
        if not state_raw:
            continue
        keys = ConversationKeys.of(prefix, sid, aid)
        try:
            state = decode_state(sid, aid, {text(k): v for k, v in state_raw.items()}, keys.state)
            created, updated, damaged = state.created_at, state.updated_at, False
        except CorruptRecord as exc:
            # One damaged conversation must not hide the others: list it, marked.
            logger.warning("session_id=<%s>, agent_id=<%s> | %s", sid, aid, exc)
            created = updated = datetime.fromtimestamp(0, UTC)
            damaged = True
        by_session.setdefault(sid, []).append(
            (aid, created, updated, int(active), int(messages) + int(summaries), damaged)
        )
    return [
        SessionInfo(
            session_id=sid,
            agents=tuple(c[0] for c in convs),
            created_at=min(c[1] for c in convs if not c[5]) if not all(c[5] for c in convs) else convs[0][1],
            updated_at=max(c[2] for c in convs),
            active_entries=sum(c[3] for c in convs),
            total_entries=sum(c[4] for c in convs),
            damaged=tuple(c[0] for c in convs if c[5]),
            app=owners[sid][0],
            user=owners[sid][1],
        )
        for sid in session_ids
        if (convs := by_session.get(sid))
    ]


def relist_recreated(
    client: RedisClient,
    prefix: str,
    cluster: bool,
    session_id: str,
    index: SessionKeys,
    agents: list[str],
    conversations: list[ConversationKeys],
) -> None:
    """After a deletion: list again the agent and session of any conversation that exists again."""
    pipe = client.pipeline(transaction=False)
    for keys in conversations:
        pipe.hget(keys.state, "updated_at")
    recreated = [
        (aid, keys, epoch_micros(datetime.fromisoformat(text(stamp))))
        for aid, keys, stamp in zip(agents, conversations, pipe.execute(), strict=True)
        if stamp is not None
    ]
    if not recreated:
        return
    logger.info(
        "session_id=<%s>, agents=<%d> | listing conversations created during the deletion",
        session_id,
        len(recreated),
    )
    pipe = client.pipeline(transaction=False)
    pipe.sadd(index.agents, *(aid for aid, _, _ in recreated))
    for _, keys, score in recreated:
        key = SessionKeys.slot_index(prefix, keys.slot) if cluster else index.sessions
        pipe.zadd(key, {session_id: score}, gt=True)
    pipe.execute()
