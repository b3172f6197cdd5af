"""The Redis ledger store: plain Redis 7 or Redis Cluster, no modules.

:class:`RedisStore` composes its parts, one per group of capabilities, over one
:class:`~.data.RedisData` (the client, key prefix, scripts, ttl and driver boundary):
:class:`~.queries.RedisQueries` (the view, entries, history and listings, paged),
:class:`~.writes.RedisWrites` (commit), :class:`~.sessions.RedisSessions` (sessions,
owners, app/user state, deletion, expiry), :class:`~.lifecycle.RedisLifecycle` (erasure,
pruning, resealing, erased bytes), :class:`~.moving.RedisMoving` (lineage, imports) and
:class:`~.upgrade.RedisUpgrade` (layout upgrades).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from contextledger.core.changeset import Changeset
from contextledger.errors import ConfigurationError
from contextledger.model.bundle import ConversationRecords
from contextledger.model.messages import Message
from contextledger.model.paging import Page
from contextledger.model.records import (
    ConversationState,
    Eviction,
    Expiry,
    HistoryEntry,
    LineageLink,
    PinEvent,
    Reduction,
    Revision,
    SessionInfo,
    SessionOwner,
    Snapshot,
    SummaryEntry,
    Tombstone,
    Trigger,
)
from contextledger.stores.base import AppendedBy
from contextledger.stores.capabilities import Swap
from contextledger.stores.redis.connect import RedisClient, connect, mask_password
from contextledger.stores.redis.data import RedisData, ttl_millis
from contextledger.stores.redis.durability import DEFAULT_REPLICA_TIMEOUT, replication
from contextledger.stores.redis.keys import check_prefix
from contextledger.stores.redis.lifecycle import RedisLifecycle
from contextledger.stores.redis.moving import RedisMoving
from contextledger.stores.redis.queries import RedisQueries
from contextledger.stores.redis.sessions import RedisSessions
from contextledger.stores.redis.upgrade import RedisUpgrade
from contextledger.stores.redis.writes import RedisWrites
from contextledger.stores.urls import parse_redis

__all__ = ["RedisStore", "mask_password", "ttl_millis"]


class RedisStore:
    """A :class:`~contextledger.stores.base.LedgerStore` on Redis 7 or Redis Cluster.

    Layout and atomicity: every key of one conversation shares one hash tag (see
    :mod:`contextledger.stores.redis.keys`), and a changeset is applied by one Lua script
    that checks the version and every referenced id before its first write -- so a
    commit is all-or-nothing and one round trip, on one server and on Cluster alike.
    :meth:`load` is one read-only script that reads the state and the active view only:
    its cost is O(window) whatever the evicted history.

    Session indexes: ``sessions()``, ``agents()``, ``delete_session()`` and the
    cross-agent queries use index keys beside the conversations, updated by the commit
    script itself except when a conversation is created on Cluster; why that is safe is
    told in :mod:`contextledger.stores.redis.index`.

    Errors: connection failures raise :class:`~contextledger.errors.StoreUnavailable`
    naming host:port, every other driver error :class:`~contextledger.errors.StoreError`,
    both chained to the redis-py error.

    Exactly once: the commit script records which changeset produced each version (the
    ``cs`` hash) and returns that version when the same changeset arrives again, so
    redis-py re-sending a script after a reconnect cannot apply it twice; a commit whose
    reply is lost is resolved by reading the id back (see
    :mod:`contextledger.stores.exactly_once`). After :meth:`close` every call raises
    :class:`~contextledger.errors.LedgerClosed` (the client does not reconnect).

    Args:
        client: A ``redis.Redis`` or ``redis.cluster.RedisCluster`` that does not decode
            responses.
        key_prefix: Namespace of every key (no braces), so several ledgers can share a
            database.
        url: The URL the client was opened with (its password is masked in :attr:`url`).
        ttl: Expire each conversation this long after its last commit (seconds or a
            ``timedelta``; ``None``: never). Every key of the conversation gets the
            expiry in the commit itself (the same script), so they expire together; a
            read does not refresh it; the sessions index forgets a session once all of
            its conversations have expired (cleaned by the next commit).
        durability: ``"primary"`` (the default): a commit is acknowledged once the
            primary applied it; Redis replicates asynchronously, so a failover right
            after it may lose it. ``"replicated"``: acknowledged only once ``replicas``
            replicas hold it too (``WAIT``, see
            :mod:`~contextledger.stores.redis.durability`); a commit that no replica
            acknowledged within ``replica_timeout`` seconds raises
            :class:`~contextledger.errors.CommitOutcomeUnknown` (applied on the primary,
            settled by the next write under its changeset id).
        replica_timeout: Seconds a replicated commit waits for its replicas.
        replicas: Replicas a replicated commit waits for.
    """

    def __init__(
        self,
        client: RedisClient,
        *,
        key_prefix: str = "contextledger",
        url: str | None = None,
        ttl: float | timedelta | None = None,
        durability: str = "primary",
        replica_timeout: float = DEFAULT_REPLICA_TIMEOUT,
        replicas: int = 1,
    ) -> None:
        """Wrap ``client``; see the class docstring.

        Raises:
            ConfigurationError: ``client`` decodes responses, ``key_prefix`` is not usable,
                ``ttl`` is not a positive number of seconds or ``timedelta``, a durability
                option is invalid, or ``durability="replicated"`` is asked of a client that
                is not redis-py's sync one.
        """
        self._data = RedisData(
            client,
            key_prefix=key_prefix,
            url=url,
            ttl=ttl,
            durability=durability,
            replica_timeout=replica_timeout,
            replicas=replicas,
        )
        self.url = self._data.url
        self._queries = RedisQueries(self._data)
        self._writes = RedisWrites(self._data)
        self._sessions = RedisSessions(self._data)
        self._lifecycle = RedisLifecycle(self._data)
        self._moving = RedisMoving(self._data)
        self._upgrade = RedisUpgrade(self._data)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        key_prefix: str = "contextledger",
        client_factory: Callable[[str, bool, dict[str, Any]], RedisClient] | None = None,
        ttl: float | timedelta | None = None,
        durability: str | None = None,
        replica_timeout: float = DEFAULT_REPLICA_TIMEOUT,
        replicas: int = 1,
        **options: Any,
    ) -> RedisStore:
        """Connect to ``redis://``, ``rediss://`` or ``redis+cluster://host:port`` and check the server answers.

        ``ttl`` expires each conversation that long after its last commit; ``durability``
        (also ``?durability=replicated`` in the URL), ``replica_timeout`` and ``replicas``
        say when a commit is acknowledged (see the class docstring). Options other than
        these and ``key_prefix`` go to ``redis.Redis.from_url`` or
        ``redis.cluster.RedisCluster.from_url`` (``decode_responses`` is always off: the
        store decodes values itself so bytes stay exact).

        Raises:
            InvalidLedgerURL: The scheme is not a Redis one, or the path is not a database number.
            ConfigurationError: ``key_prefix`` is empty or holds braces; a durability option
                is invalid, or the URL and the keyword name different durabilities.
            StoreUnavailable: The server (or no cluster node) did not answer.

        ``client_factory(driver_url, cluster, options)``, when given, makes the client
        instead of redis-py's sync classes (a client of your own making, e.g. one whose pools you watch).
        """
        check_prefix(key_prefix)
        ttl_millis(ttl)
        named = parse_redis(url).durability
        if durability is not None and named is not None and durability != named:
            raise ConfigurationError(f"the URL names durability={named!r} but durability={durability!r} was passed")
        chosen = durability or named or "primary"
        replication(chosen, replica_timeout, replicas)
        client = connect(url, client_factory=client_factory, **options)
        try:
            return cls(
                client,
                key_prefix=key_prefix,
                url=url,
                ttl=ttl,
                durability=chosen,
                replica_timeout=replica_timeout,
                replicas=replicas,
            )
        except BaseException:
            client.close()
            raise

    def __repr__(self) -> str:
        return f"RedisStore(url={self.url!r}, key_prefix={self.key_prefix!r})"

    @property
    def client(self) -> RedisClient:
        """The redis-py client every command goes through."""
        return self._data.client

    @property
    def key_prefix(self) -> str:
        """The namespace of every key."""
        return self._data.key_prefix

    @property
    def ttl_ms(self) -> int:
        """The expiry of a conversation after its last commit, in milliseconds (0: never)."""
        return self._data.ttl_ms

    @property
    def durability(self) -> str:
        """When a commit is acknowledged: ``"primary"`` or ``"replicated"``."""
        return self._data.durability

    def load(self, session_id: str, agent_id: str) -> Snapshot | None:
        """Return the state and active view (one read-only script), or ``None``."""
        return self._queries.load(session_id, agent_id)

    def history(
        self, session_id: str, agent_id: str, *, include_evicted: bool = True, page: Page | None = None
    ) -> list[HistoryEntry]:
        """The message entries of ``page`` (default: all) in seq order.

        One read-only script walks the conversation's seq index and reads the page's
        entries only (see :mod:`~contextledger.stores.redis.paging`). A conversation
        whose index is incomplete (written before it existed, and not upgraded since)
        is read whole, as before the index, and the page kept: a read never writes.
        """
        return self._queries.history(session_id, agent_id, include_evicted=include_evicted, page=page)

    def entries(
        self, session_id: str, agent_id: str, ids: Sequence[str], *, appended_by: AppendedBy | None = None
    ) -> list[HistoryEntry]:
        """The message entries of ``ids`` (active or evicted) in seq order; unknown ids are skipped.

        One read-only script reads those entries only, whatever the length of the history;
        with ``appended_by`` it returns (and reads the content of) only the entries appended
        by a call or version at or before the cut (a time bound is applied to what it returns).
        """
        return self._queries.entries(session_id, agent_id, ids, appended_by=appended_by)

    def evictions(
        self,
        session_id: str,
        agent_id: str | None = None,
        *,
        trigger: Trigger | None = None,
        since: datetime | None = None,
        page: Page | None = None,
    ) -> list[Eviction]:
        """Evicted entries with when, why and which summary replaced them (or one page, kept from the whole read)."""
        return self._queries.evictions(session_id, agent_id, trigger=trigger, since=since, page=page)

    def reductions(self, session_id: str, agent_id: str | None = None, *, page: Page | None = None) -> list[Reduction]:
        """Reductions in commit order (or one page, kept from the whole read)."""
        return self._queries.reductions(session_id, agent_id, page=page)

    def summaries(
        self, session_id: str, agent_id: str | None = None, *, page: Page | None = None
    ) -> list[SummaryEntry]:
        """All summaries, superseded included, oldest first (or one page: a range of each agent's time index).

        See :mod:`~contextledger.stores.redis.summary_index`; a conversation without a
        complete index is read whole and the page kept.
        """
        return self._queries.summaries(session_id, agent_id, page=page)

    def revisions(self, session_id: str, agent_id: str, message_id: str | None = None) -> list[Revision]:
        """Original contents kept by revisions, oldest first."""
        return self._queries.revisions(session_id, agent_id, message_id)

    def pin_history(self, session_id: str, agent_id: str | None = None, *, page: Page | None = None) -> list[PinEvent]:
        """Every pin and unpin of the session (or one agent), in commit order (or one page, cut from the whole)."""
        return self._queries.pin_history(session_id, agent_id, page=page)

    def agents(self, session_id: str) -> list[str]:
        """Agent ids with a conversation in the session."""
        return self._queries.agents(session_id)

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
        return self._sessions.sessions(limit=limit, offset=offset, app=app, user=user)

    def conversation_state(self, session_id: str, agent_id: str) -> ConversationState | None:
        """The conversation's state alone (one ``HGETALL``, no view), or ``None``."""
        return self._sessions.conversation_state(session_id, agent_id)

    def owner(self, session_id: str) -> SessionOwner | None:
        """The app and user the session was created for, or ``None`` when it does not exist."""
        return self._sessions.owner(session_id)

    def scope_state(self, app: str, user: str | None = None) -> dict[str, Any]:
        """The state of ``app`` (or of one of its users); ``{}`` when none is stored."""
        return self._sessions.scope_state(app, user)

    def merge_scope_state(self, app: str, user: str | None, delta: Mapping[str, Any]) -> None:
        """Set the keys of ``delta`` in the state of ``app`` (or of its ``user``): one ``HSET``."""
        return self._sessions.merge_scope_state(app, user, delta)

    def delete_scope_state(self, app: str, user: str | None) -> bool:
        """Remove the state of ``app`` (or of its ``user``); whether there was any."""
        return self._sessions.delete_scope_state(app, user)

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
        return self._writes.commit(changeset)

    def one_script(self, changeset: Changeset) -> tuple[str, list[str], list[str]] | None:
        """``changeset``'s commit as one ``EVALSHA`` (SHA, keys, args), or ``None`` (see :class:`RedisWrites`)."""
        return self._writes.one_script(changeset)

    def erase(self, tombstone: Tombstone, erased: Message, summaries: Mapping[str, str]) -> None:
        """Overwrite an entry, delete its revisions, rewrite ``summaries``, keep ``tombstone``: one script.

        The old values leave the keys (Redis keeps no old versions); persistence files
        written before (RDB snapshots, AOF) hold them until they are rewritten.

        Raises:
            EntryNotFound: The entry or a summary is not in the conversation (nothing changes).
            ConcurrencyConflict: Its revisions moved while the erase was prepared (retry).
        """
        return self._lifecycle.erase(tombstone, erased, summaries)

    def prune(self, session_id: str, agent_id: str, entry_ids: Sequence[str], tombstones: Sequence[Tombstone]) -> int:
        """Delete the evicted entries among ``entry_ids`` (never an active one) in one script."""
        return self._lifecycle.prune(session_id, agent_id, entry_ids, tombstones)

    def tombstones(self, session_id: str, agent_id: str | None = None) -> list[Tombstone]:
        """Erased and pruned entries of the session (or one agent), oldest first."""
        return self._lifecycle.tombstones(session_id, agent_id)

    def import_conversation(self, records: ConversationRecords) -> bool:
        """Write one conversation's records with one script; ``False`` (nothing written) if it exists.

        With a ``ttl`` the keys get it as a commit would give them.
        """
        return self._moving.import_conversation(records)

    def delete_session(self, session_id: str) -> bool:
        """Remove every key of the session's conversations and its index entries.

        The agents read first are the ones removed; an agent whose conversation exists
        again once its keys and index entries are gone was created meanwhile, and is
        listed again.
        """
        return self._sessions.delete_session(session_id)

    def add_lineage(self, links: Sequence[LineageLink]) -> int:
        """Record each link under its ancestor conversation while it exists (one script per ancestor)."""
        return self._moving.add_lineage(links)

    def lineage(self, session_id: str, agent_id: str | None = None) -> list[LineageLink]:
        """The links kept under the session's conversations (or one agent's), oldest first."""
        return self._moving.lineage(session_id, agent_id)

    def expire_session(self, session_id: str, *, idle_before: datetime, reason: str) -> list[Expiry]:
        """Remove the session's conversations when none was written at or after ``idle_before``.

        Each conversation goes in one script, only while its last write is the one read
        (on Cluster its keys are in its own slot, so a session of several agents is removed
        one conversation at a time; a write racing with it stops the expiry there).
        """
        return self._sessions.expire_session(session_id, idle_before=idle_before, reason=reason)

    def expirations(self, session_id: str) -> list[Expiry]:
        """The expiries kept for the session, oldest first."""
        return self._sessions.expirations(session_id)

    def reseal(self, session_id: str, agent_id: str, swaps: Sequence[Swap]) -> int:
        """Replace sealed tokens where they still are (one script: each value only if unchanged since read)."""
        return self._lifecycle.reseal(session_id, agent_id, swaps)

    def settle_erasure(self, *, timeout: float, vacuum: bool = False) -> str | None:
        """Say whether Redis's persistence files may still hold erased values (the keys never do).

        An append-only file keeps every write until it is rewritten, and an RDB snapshot
        taken before the erase keeps the old values until the next one replaces it; the
        store does not rewrite them itself (``BGREWRITEAOF`` / ``BGSAVE`` are the operator's).
        """
        return self._lifecycle.settle_erasure(timeout=timeout, vacuum=vacuum)

    def upgrade(self) -> int:
        """Bring data written by an earlier version up to this one's layout; how many conversations changed.

        Today that is the seq index of history (see :mod:`~contextledger.stores.redis.paging`):
        every conversation whose index lacks a message gets it; the creation-time index of
        its summaries likewise (:mod:`~contextledger.stores.redis.summary_index`); and the
        order marks of its reductions and pin events lists (:mod:`~contextledger.stores.redis.listing`);
        and its index of standing evictions, rebuilt where it is not marked complete
        (:mod:`~contextledger.stores.redis.eviction_index`). Idempotent, safe while others
        write (each id is added only while its message or summary exists; an eviction index
        is written only while the conversation's version is the one it was planned at); run
        once after upgrading the library (``contextledger db upgrade`` does). Until then such
        a conversation's pages are read whole.

        Raises:
            CorruptRecord: A message record holds no readable ``seq``, or a summary no
                readable ``created_at`` (the key and id are named).
        """
        return self._upgrade.upgrade()

    def close(self) -> None:
        """Refuse further calls, let running ones finish, then release the client's connections."""
        self._data.close()
