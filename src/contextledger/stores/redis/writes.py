"""The Redis store's commit path: one script per changeset, exactly once, on one server or Cluster.

A part of :class:`~contextledger.stores.redis.store.RedisStore` over its
:class:`~contextledger.stores.redis.data.RedisData`. A commit claims the session for its
owner when it creates one, lists its agent and slot first on Cluster (see
:mod:`~contextledger.stores.redis.index`), runs the commit script (with ``WAIT`` when
replicated, see :mod:`~contextledger.stores.redis.durability`) and maps its typed error
replies; a lost reply is settled by reading the changeset id back
(:mod:`contextledger.stores.exactly_once`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, cast

from redis.exceptions import RedisClusterException, RedisError, ResponseError

from contextledger.core.changeset import Changeset
from contextledger.errors import (
    CommitOutcomeUnknown,
    ConcurrencyConflict,
    DuplicateEntry,
    EntryNotFound,
    SessionDeleted,
    SessionExpired,
    StoreError,
    StoreUnavailable,
)
from contextledger.model.records import utcnow
from contextledger.stores.exactly_once import ReplyLost, commit_exactly_once
from contextledger.stores.redis import lineage, owners, scripts
from contextledger.stores.redis.codec import text
from contextledger.stores.redis.connect import DRIVER_ERRORS, UNAVAILABLE, one_line, translation
from contextledger.stores.redis.data import RedisData
from contextledger.stores.redis.durability import replicated_commit
from contextledger.stores.redis.encode import commit_args
from contextledger.stores.redis.events import tail_args
from contextledger.stores.redis.keys import ConversationKeys, SessionKeys

__all__ = ["RedisWrites"]

logger = logging.getLogger("contextledger.stores.redis.store")


class RedisWrites:
    """The commit part of the store contract (and why a conversation a writer held is gone)."""

    def __init__(self, data: RedisData) -> None:
        """Write through ``data``."""
        self._d = data

    def commit(self, changeset: Changeset) -> int:
        """Apply ``changeset`` atomically with one script and return the new version.

        Raises:
            ConcurrencyConflict: The stored version is not ``changeset.expected_version``.
            SessionDeleted: The conversation was deleted since the changeset was planned.
            DuplicateEntry: An appended id already exists (or is appended twice).
            EntryNotFound: An evicted, revised or pinned id is not an active entry.
            InvalidMessage: Content cannot be stored as JSON (nothing was sent).
            StoreUnavailable: The server could not be reached; nothing was applied.
            CommitOutcomeUnknown: The connection dropped after sending and the server
                stayed unreachable, so the outcome could not be read back.
            StoreError: Any other failure; nothing was applied.
            LedgerClosed: The store was closed.
        """
        args = self._args(changeset)
        with self._d.gate.call():
            return commit_exactly_once(changeset, lambda cs: self._send(cs, args), lambda cs: self._settle(cs, args))

    def one_script(self, changeset: Changeset) -> tuple[str, list[str], list[str]] | None:
        """The commit of ``changeset`` as the SHA, keys and args of its one ``EVALSHA``; ``None`` when it is more.

        It is more on Cluster, with replicated durability (``WAIT``) and for the commit
        creating a conversation (a claim, an index). A sender of its own (the async API)
        sends exactly this and, on any reply but a version, leaves the write to :meth:`commit`.

        Raises:
            InvalidMessage: Content cannot be stored as JSON.
            LedgerClosed: The store was closed.
        """
        self._d.gate.check()
        if self._d.cluster or self._d.replication is not None or changeset.expected_version == 0:
            return None
        keys = _single_keys(self._d.key_prefix, changeset.session_id, changeset.agent_id)
        return self._d.scripts.commit.sha, list(keys), self._args(changeset)

    def _args(self, changeset: Changeset) -> list[str]:
        now = utcnow()
        args = commit_args(changeset, now)
        args += tail_args(changeset, now, self._d.ttl_ms)
        return args

    def _settle(self, cs: Changeset, args: list[str]) -> int | None:
        """Read a commit back; replicated, an applied one is sent again to wait for its replicas."""
        version = self._read_back(cs)
        if version is None or self._d.replication is None:
            return version
        return self._send(cs, args)

    def _read_back(self, cs: Changeset) -> int | None:
        keys = self._d.conversation(cs.session_id, cs.agent_id)
        with self._d.driver("read back a commit"):
            current, logged = cast(
                list[Any], self._d.scripts.read_back(keys=[keys.state, keys.cs], args=[str(cs.new_version)])
            )
        if logged is not None and text(logged) == cs.changeset_id:
            return cs.new_version
        found = int(current) if current is not None else 0
        if found == 0 and cs.expected_version > 0:
            raise self._gone(cs)
        if found != cs.expected_version:
            raise ConcurrencyConflict(
                f"session_id={cs.session_id} agent_id={cs.agent_id}: "
                f"expected version {cs.expected_version}, found {found}"
            )
        return None

    def _send(self, cs: Changeset, args: list[str]) -> int:
        try:
            return self._send_script(cs, args)
        except CommitOutcomeUnknown:
            raise  # applied on the primary, no replica acknowledged it: not a lost reply
        except StoreUnavailable as exc:
            # Even a refused connection may follow an attempt that was sent: redis-py
            # retries on its own and reports only the last error. Always read back.
            raise ReplyLost(exc) from exc

    def _send_script(self, cs: Changeset, args: list[str]) -> int:
        if cs.expected_version and not self._d.cluster:  # an append, a reduction: the script alone
            try:  # inside commit()'s gate call already; translated() without its generator, on every append
                version = self._run_commit(cs, _single_keys(self._d.key_prefix, cs.session_id, cs.agent_id), args)
            except DRIVER_ERRORS as exc:
                raise translation(exc, self._d.endpoint, "commit") from exc
        else:
            version = self._send_listed(cs, args)
        logger.debug(
            "session_id=<%s>, agent_id=<%s>, version=<%d> | committed changeset", cs.session_id, cs.agent_id, version
        )
        return version

    def _send_listed(self, cs: Changeset, args: list[str]) -> int:
        """A commit creating a conversation (claimed, listed), or any on Cluster (its agent listed in another slot)."""
        keys = self._d.conversation(cs.session_id, cs.agent_id)
        index = SessionKeys.of(self._d.key_prefix, cs.session_id)
        with self._d.driver("commit"):
            if cs.expected_version == 0 and (cs.app is not None or cs.user is not None):
                self._claim(cs, index)
            if not self._d.cluster:
                version = self._run_commit(cs, _single_keys(self._d.key_prefix, cs.session_id, cs.agent_id), args)
            else:
                slot_index = SessionKeys.slot_index(self._d.key_prefix, keys.slot)
                if cs.expected_version == 0:
                    self._register(cs, index, keys.slot)
                version = self._run_commit(cs, [*keys.all, slot_index], args)
        if self._d.cluster and (cs.expected_version == 0 or self._d.ttl_ms):
            try:
                # again after the commit: a deletion of the session may have run in between;
                # with a ttl the agent set (in another slot) outlives the conversation's keys
                pipe = self._d.client.pipeline(transaction=False)
                pipe.sadd(index.agents, cs.agent_id)
                if self._d.ttl_ms:
                    pipe.pexpire(index.agents, self._d.ttl_ms)
                    pipe.pexpire(index.owner, self._d.ttl_ms)
                    # the set of slots with an index expires with the last write too
                    slots = SessionKeys.slots(self._d.key_prefix)
                    pipe.sadd(slots, keys.slot)
                    pipe.pexpire(slots, self._d.ttl_ms)
                pipe.execute()
            except (RedisError, RedisClusterException) as exc:
                # The commit is applied, and listed since before it; only that race is left open.
                logger.warning(
                    "session_id=<%s>, agent_id=<%s>, error=<%s> | created but could not list the agent again",
                    cs.session_id,
                    cs.agent_id,
                    one_line(exc),
                )
        return version

    def _run_commit(self, cs: Changeset, keys: Sequence[str], args: list[str]) -> int:
        rep = self._d.replication
        try:
            if rep is None:
                if self._d.held is not None:
                    return int(self._d.held.evalsha(self._d.scripts.commit, keys, args))
                return int(cast(int, self._d.scripts.commit(keys=keys, args=args)))
            script = self._d.scripts.commit
            reply, acked = replicated_commit(self._d.client, script.sha, scripts.COMMIT, keys, args, rep)
        except ResponseError as exc:
            if isinstance(exc, UNAVAILABLE):
                raise
            code, _, detail = str(exc).partition(" ")
            if code == "CLDELETED":
                raise self._gone(cs) from exc
            if code == "CLCONFLICT":
                raise ConcurrencyConflict(
                    f"session_id={cs.session_id} agent_id={cs.agent_id}: "
                    f"expected version {cs.expected_version}, found {detail}"
                ) from exc
            if code == "CLDUPLICATE":
                raise DuplicateEntry(detail) from exc
            if code == "CLNOTFOUND":
                raise EntryNotFound(detail) from exc
            if code == "CLWRONGTYPE":
                raise StoreError(f"cannot commit to {cs.session_id}/{cs.agent_id}: {detail}") from exc
            raise
        if acked < rep.replicas:
            logger.warning(
                "session_id=<%s>, agent_id=<%s>, changeset_id=<%s>, acked=<%d> | no replica acknowledged the commit",
                cs.session_id,
                cs.agent_id,
                cs.changeset_id,
                acked,
            )
            raise CommitOutcomeUnknown(
                f"changeset {cs.changeset_id} of {cs.session_id}/{cs.agent_id} was applied on the primary but "
                f"{acked} of {rep.replicas} replica(s) acknowledged it within "
                f"{rep.timeout_ms} ms; a failover now could lose it -- the next write settles it",
                cs.changeset_id,
            )
        return int(reply)

    def _claim(self, cs: Changeset, index: SessionKeys) -> None:
        """Before the commit creating a conversation that names an owner: claim the session, list it.

        Raises:
            SessionOwnerConflict: The session belongs to another app or user.
        """
        reply = self._d.scripts.claim(keys=[index.owner, index.agents], args=owners.claim_args(cs))
        owner = owners.check_claim(cs, reply)
        sets = owners.index_sets(self._d.key_prefix, owner)
        if sets:
            pipe = self._d.client.pipeline(transaction=False)
            for key in sets:
                pipe.sadd(key, cs.session_id)
            pipe.execute()

    def _register(self, cs: Changeset, index: SessionKeys, slot: int) -> None:
        """On Cluster, before a conversation's first commit: list its agent and its slot's index."""
        pipe = self._d.client.pipeline(transaction=False)
        pipe.sadd(index.agents, cs.agent_id)
        pipe.sadd(SessionKeys.slots(self._d.key_prefix), slot)
        pipe.execute()

    def _gone(self, cs: Changeset) -> SessionDeleted:
        """Why a conversation a writer held is gone: expired (``expire``, or its ttl) or deleted."""
        index = SessionKeys.of(self._d.key_prefix, cs.session_id)
        with self._d.driver("read why a conversation is gone"):
            pipe = self._d.client.pipeline(transaction=False)
            pipe.hget(index.expired, cs.agent_id)
            pipe.exists(index.deleted)
            expired, deleted = pipe.execute()
        base = _deleted(cs)
        if expired is not None:
            reason = lineage.expiry_from(expired, cs.session_id).reason
            return SessionExpired(f"{base} (it expired: {reason})")
        if self._d.ttl_ms and not int(deleted):
            return SessionExpired(f"{base} (it expired: no write for its ttl of {self._d.ttl_ms / 1000:g}s)")
        return base


@lru_cache(maxsize=1024)
def _single_keys(prefix: str, session_id: str, agent_id: str) -> tuple[str, ...]:
    """The commit script's keys on a single server: the conversation's, the sessions index, the agent set, the owner.

    Remembered for the conversations in use: every commit names them, and they never change.
    """
    index = SessionKeys.of(prefix, session_id)
    return (*ConversationKeys.of(prefix, session_id, agent_id).all, index.sessions, index.agents, index.owner)


def _deleted(cs: Changeset) -> SessionDeleted:
    return SessionDeleted(
        f"session_id={cs.session_id} agent_id={cs.agent_id}: the conversation was deleted "
        f"(expected version {cs.expected_version}); it is not re-created"
    )
