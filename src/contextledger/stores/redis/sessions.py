"""The Redis store's sessions: listing, owners, app/user state, deletion and expiry.

A part of :class:`~contextledger.stores.redis.store.RedisStore` over its
:class:`~contextledger.stores.redis.data.RedisData`. The session indexes it reads and
cleans are written by the commit script (and, on Cluster, before it); why that is safe
is told in :mod:`contextledger.stores.redis.index`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any, cast

from contextledger.errors import ConfigurationError
from contextledger.model.records import ConversationState, Expiry, SessionInfo, SessionOwner, utcnow
from contextledger.stores.base import owned
from contextledger.stores.redis import lineage, owners
from contextledger.stores.redis.codec import decode_state, text
from contextledger.stores.redis.data import RedisData
from contextledger.stores.redis.index import most_recent, relist_recreated, session_infos
from contextledger.stores.redis.keys import ConversationKeys, SessionKeys
from contextledger.stores.redis.owners import read_owners

__all__ = ["RedisSessions"]

logger = logging.getLogger("contextledger.stores.redis.store")


class RedisSessions:
    """The SESSIONS, owner, scope-state and expiry parts of the store contract."""

    def __init__(self, data: RedisData) -> None:
        """Work on ``data``."""
        self._d = data

    def sessions(
        self, *, limit: int = 100, offset: int = 0, app: str | None = None, user: str | None = None
    ) -> list[SessionInfo]:
        """Sessions, most recently updated first, paged; only those of ``app`` / ``user`` when given.

        On a single server this reads about ``offset + limit`` sessions of the index; on
        Cluster it merges the indexes of every slot in use, reading from each only as far
        as its sessions can still rank among the first ``offset + limit``. Filtered by app
        or user it reads the sessions of the set that lists them (every one of them).

        Raises:
            ConfigurationError: ``limit`` or ``offset`` is negative.
        """
        if limit < 0 or offset < 0:
            raise ConfigurationError(f"limit and offset must be >= 0, got limit={limit} offset={offset}")
        wanted = offset + limit
        if wanted == 0:
            return []
        if app is not None or user is not None:
            return self._owned_sessions(app, user)[offset:wanted]
        with self._d.driver("sessions"):
            if self._d.cluster:
                slots = cast(set[bytes], self._d.client.smembers(SessionKeys.slots(self._d.key_prefix)))
                index_keys = [SessionKeys.slot_index(self._d.key_prefix, int(slot)) for slot in sorted(slots, key=int)]
            else:
                index_keys = [SessionKeys.index(self._d.key_prefix)]
            depth = wanted
            while True:
                ranked = most_recent(self._d.client, index_keys, depth)
                found = session_infos(self._d.client, self._d.key_prefix, ranked)
                # a listed session without conversations (deleted meanwhile) is skipped:
                # read deeper until the page is full or the indexes are exhausted
                if len(found) >= wanted or len(ranked) < depth:
                    break
                depth += wanted - len(found)
        return found[offset:wanted]

    def _owned_sessions(self, app: str | None, user: str | None) -> list[SessionInfo]:
        """Every session of ``app`` / ``user``, most recently updated first (checked against their owner)."""
        with self._d.driver("sessions"):
            listed = sorted(
                text(m)
                for m in cast(set[bytes], self._d.client.smembers(SessionKeys.owned(self._d.key_prefix, app, user)))
            )
            found = session_infos(self._d.client, self._d.key_prefix, listed) if listed else []
        found = [i for i in found if owned(SessionOwner(i.app, i.user), app, user)]
        return sorted(found, key=lambda i: (i.updated_at, i.session_id), reverse=True)

    def conversation_state(self, session_id: str, agent_id: str) -> ConversationState | None:
        """The conversation's state alone (one ``HGETALL``, no view), or ``None``."""
        keys = self._d.conversation(session_id, agent_id)
        with self._d.driver("conversation_state"):
            raw = cast(dict[bytes, bytes], self._d.client.hgetall(keys.state))
        if not raw:
            return None
        return decode_state(session_id, agent_id, {text(k): v for k, v in raw.items()}, keys.state)

    def owner(self, session_id: str) -> SessionOwner | None:
        """The app and user the session was created for, or ``None`` when it does not exist."""
        if not self._d.agents(session_id):
            return None
        with self._d.driver("owner"):
            (found,) = read_owners(self._d.client, self._d.key_prefix, [session_id])
        return found

    def scope_state(self, app: str, user: str | None = None) -> dict[str, Any]:
        """The state of ``app`` (or of one of its users); ``{}`` when none is stored."""
        key = SessionKeys.scope(self._d.key_prefix, app, user)
        with self._d.driver("scope_state"):
            raw = cast(dict[bytes, bytes], self._d.client.hgetall(key))
        return owners.scope_state(raw, key)

    def merge_scope_state(self, app: str, user: str | None, delta: Mapping[str, Any]) -> None:
        """Set the keys of ``delta`` in the state of ``app`` (or of its ``user``): one ``HSET``."""
        if not delta:
            return
        mapping: dict[Any, Any] = {key: json.dumps(value, allow_nan=False) for key, value in delta.items()}
        with self._d.driver("merge_scope_state"):
            self._d.client.hset(SessionKeys.scope(self._d.key_prefix, app, user), mapping=mapping)

    def delete_scope_state(self, app: str, user: str | None) -> bool:
        """Remove the state of ``app`` (or of its ``user``); whether there was any."""
        with self._d.driver("delete_scope_state"):
            return bool(int(self._d.client.delete(SessionKeys.scope(self._d.key_prefix, app, user))))

    def delete_session(self, session_id: str) -> bool:
        """Remove every key of the session's conversations and its index entries.

        The agents read first are the ones removed; an agent whose conversation exists
        again once its keys and index entries are gone was created meanwhile, and is
        listed again.
        """
        index = SessionKeys.of(self._d.key_prefix, session_id)
        with self._d.driver("delete_session"):
            (owner,) = read_owners(self._d.client, self._d.key_prefix, [session_id])
            agents = sorted(text(a) for a in cast(set[bytes], self._d.client.smembers(index.agents)))
            conversations = [self._d.conversation(session_id, aid) for aid in agents]
            # one DEL per conversation: its keys share a slot (pipelines cannot multi-key DEL on Cluster)
            removed = [self._d.client.delete(*keys.all) for keys in conversations]
            pipe = self._d.client.pipeline(transaction=False)
            if self._d.cluster:
                for slot in sorted({keys.slot for keys in conversations}):
                    pipe.zrem(SessionKeys.slot_index(self._d.key_prefix, slot), session_id)
            else:
                pipe.zrem(index.sessions, session_id)
            if agents:
                pipe.srem(index.agents, *agents)
            pipe.delete(index.owner)
            for key in owners.index_sets(self._d.key_prefix, owner):
                pipe.srem(key, session_id)
            pipe.delete(index.expired)
            if self._d.ttl_ms:  # so a writer still holding it is told it was deleted, not that it expired
                pipe.set(index.deleted, "1", px=self._d.ttl_ms)
            pipe.execute()
            if agents:
                self._relist_recreated(session_id, index, agents, conversations)
        existed = any(int(n) for n in removed)
        logger.info("session_id=<%s>, agents=<%d>, existed=<%s> | deleted session", session_id, len(agents), existed)
        return existed

    def _relist_recreated(
        self, session_id: str, index: SessionKeys, agents: list[str], conversations: list[ConversationKeys]
    ) -> None:
        relist_recreated(self._d.client, self._d.key_prefix, self._d.cluster, session_id, index, agents, conversations)

    def expire_session(self, session_id: str, *, idle_before: datetime, reason: str) -> list[Expiry]:
        """Remove the session's conversations when none was written at or after ``idle_before``.

        Each conversation goes in one script, only while its last write is the one read
        (on Cluster its keys are in its own slot, so a session of several agents is removed
        one conversation at a time; a write racing with it stops the expiry there).
        """
        index = SessionKeys.of(self._d.key_prefix, session_id)
        agents = self._d.agents(session_id)
        with self._d.driver("expire"):
            pipe = self._d.client.pipeline(transaction=False)
            for aid in agents:
                pipe.hget(self._d.conversation(session_id, aid).state, "updated_at")
            stamps = pipe.execute()
        if not agents or any(s is None or datetime.fromisoformat(text(s)) >= idle_before for s in stamps):
            return []
        now = utcnow()
        out: list[Expiry] = []
        for aid, stamp in zip(agents, stamps, strict=True):
            keys = self._d.conversation(session_id, aid)
            with self._d.driver("expire"):
                removed = int(cast(int, self._d.scripts.expire(keys=list(keys.all), args=[stamp])))
            if not removed:
                break
            out.append(
                Expiry(
                    session_id=session_id,
                    agent_id=aid,
                    reason=reason,
                    expired_at=now,
                    last_write=datetime.fromisoformat(text(stamp)),
                )
            )
        if out:
            gone = [e.agent_id for e in out]
            with self._d.driver("expire"):
                (owner,) = (
                    read_owners(self._d.client, self._d.key_prefix, [session_id])
                    if len(gone) == len(agents)
                    else (None,)
                )
                pipe = self._d.client.pipeline(transaction=False)
                pipe.hset(index.expired, mapping={e.agent_id: lineage.expiry_json(e) for e in out})
                if self._d.ttl_ms:
                    pipe.pexpire(index.expired, self._d.ttl_ms)
                pipe.srem(index.agents, *gone)
                if len(gone) == len(agents):
                    if self._d.cluster:
                        for slot in sorted({self._d.conversation(session_id, a).slot for a in gone}):
                            pipe.zrem(SessionKeys.slot_index(self._d.key_prefix, slot), session_id)
                    else:
                        pipe.zrem(index.sessions, session_id)
                    if owner is not None:  # the session is gone whole: so is who it belonged to
                        pipe.delete(index.owner)
                        for key in owners.index_sets(self._d.key_prefix, owner):
                            pipe.srem(key, session_id)
                pipe.execute()
        logger.info("session_id=<%s>, agents=<%d> | expired", session_id, len(out))
        return out

    def expirations(self, session_id: str) -> list[Expiry]:
        """The expiries kept for the session, oldest first."""
        with self._d.driver("expirations"):
            raw = cast(
                dict[bytes, bytes], self._d.client.hgetall(SessionKeys.of(self._d.key_prefix, session_id).expired)
            )
        found = [lineage.expiry_from(v, session_id) for v in raw.values()]
        return sorted(found, key=lambda e: (e.expired_at, e.agent_id))
