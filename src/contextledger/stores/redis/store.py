"""The Redis ledger store: plain Redis 7 or Redis Cluster, no modules."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any, cast

from redis import Redis
from redis.cluster import RedisCluster
from redis.commands.core import Script
from redis.exceptions import (
    RedisClusterException,
    RedisError,
    ResponseError,
)

from contextledger.core.changeset import Changeset
from contextledger.errors import (
    CommitOutcomeUnknown,
    ConcurrencyConflict,
    ConfigurationError,
    DuplicateEntry,
    EntryNotFound,
    InvalidLedgerURL,
    SessionDeleted,
    SessionExpired,
    StoreError,
    StoreUnavailable,
)
from contextledger.model.bundle import ConversationRecords, check_records
from contextledger.model.messages import Message
from contextledger.model.records import (
    ConversationState,
    Expiry,
    HistoryEntry,
    LineageLink,
    SessionInfo,
    SessionOwner,
    Snapshot,
    SummaryEntry,
    Tombstone,
    ViewEntry,
    utcnow,
    view_entry,
)
from contextledger.model.trusted import trusted
from contextledger.stores.base import AppendedBy, owned
from contextledger.stores.capabilities import Swap
from contextledger.stores.exactly_once import ReplyLost, commit_exactly_once
from contextledger.stores.lifecycle import Gate
from contextledger.stores.redis import erasure, lineage, listing, owners, paging, scripts, transfer, travel
from contextledger.stores.redis.codec import (
    commit_args,
    decode_state,
    flat_hash,
    loads,
    revision_from,
    summary_from,
    text,
    view_entry_of,
)
from contextledger.stores.redis.connect import UNAVAILABLE, RedisClient, connect, mask_password, one_line, translated
from contextledger.stores.redis.durability import (
    DEFAULT_REPLICA_TIMEOUT,
    check_client,
    replicated_commit,
    replication,
)
from contextledger.stores.redis.events import tail_args
from contextledger.stores.redis.index import most_recent, relist_recreated, session_infos
from contextledger.stores.redis.keys import ConversationKeys, SessionKeys, check_prefix
from contextledger.stores.redis.owners import read_owners
from contextledger.stores.redis.queries import RedisQueries
from contextledger.stores.urls import mask, parse_redis

__all__ = ["RedisStore", "mask_password"]

logger = logging.getLogger(__name__)


class RedisStore(RedisQueries):
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
        self.ttl_ms = ttl_millis(ttl)
        self._replication = replication(durability, replica_timeout, replicas)
        if self._replication is not None:
            check_client(client)
        self.durability = "replicated" if self._replication else "primary"
        if getattr(client.get_encoder(), "decode_responses", False):
            raise ConfigurationError("the Redis ledger store needs a client with decode_responses=False")
        self._client = client
        # A client adapter of your own (a client_factory's) may say it is a cluster client itself.
        self._cluster = isinstance(client, RedisCluster) or getattr(client, "is_cluster", False) is True
        self.key_prefix = check_prefix(key_prefix)
        if url is None:
            kwargs = client.get_connection_kwargs() if isinstance(client, Redis) else {}
            url = f"redis://{kwargs.get('host', '127.0.0.1')}:{kwargs.get('port', 6379)}"
        self.url = mask(url)
        try:
            self._endpoint = parse_redis(url).endpoint
        except InvalidLedgerURL:  # a URL given for display only; the client is connected
            self._endpoint = self.url
        self._commit_script: Script = client.register_script(scripts.COMMIT)
        self._load_script: Script = client.register_script(scripts.LOAD)
        self._snapshot_script: Script = client.register_script(scripts.SNAPSHOT)
        self._read_back_script: Script = client.register_script(scripts.READ_BACK)
        self._entries_script: Script = client.register_script(travel.ENTRIES)
        self._page_script: Script = client.register_script(paging.PAGE)
        self._reindex_script: Script = client.register_script(paging.REINDEX)
        self._unstray_script: Script = client.register_script(paging.UNSTRAY)
        self._range_script: Script = client.register_script(listing.RANGE)
        self._mark_script: Script = client.register_script(listing.MARK)
        self._erase_script: Script = client.register_script(erasure.ERASE)
        self._prune_script: Script = client.register_script(erasure.PRUNE)
        self._import_script: Script = client.register_script(transfer.IMPORT)
        self._align_ttl_script: Script = client.register_script(scripts.ALIGN_TTL)
        self._claim_script: Script = client.register_script(owners.CLAIM)
        self._link_script: Script = client.register_script(lineage.LINK)
        self._expire_script: Script = client.register_script(lineage.EXPIRE)
        self._reseal_script: Script = client.register_script(lineage.RESEAL)
        self._gate = Gate(self.url)

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

    # -- driver boundary -------------------------------------------------------------------

    @contextmanager
    def _driver(self, action: str) -> Iterator[None]:
        with self._gate.call(), translated(self._endpoint, action):
            yield

    def _conversation(self, session_id: str, agent_id: str) -> ConversationKeys:
        return ConversationKeys.of(self.key_prefix, session_id, agent_id)

    def _snapshot(self, keys: Sequence[str], ops: Sequence[str]) -> list[Any]:
        return cast(list[Any], self._snapshot_script(keys=list(keys), args=list(ops)))

    def _read_page(self, keys: ConversationKeys, args: list[str]) -> list[Any] | None:
        reply = self._page_script(keys=[keys.msg, keys.content, keys.mut, keys.seq], args=args)
        return None if reply is None else cast(list[Any], reply)

    def _read_range(self, keys: ConversationKeys, key: str, args: list[str]) -> tuple[bool, list[bytes]]:
        ranged, rows = cast(list[Any], self._range_script(keys=[keys.state, key], args=args))
        return bool(ranged), cast(list[bytes], rows)

    def _mark_lists(self, keys: ConversationKeys) -> int:
        """Mark the order of a conversation's reductions and pin events lists (see :mod:`.listing`); how many."""
        marked = 0
        for kind, key in ((listing.REDUCTIONS, keys.red), (listing.PINS, keys.pins)):
            pipe = self._client.pipeline(transaction=False)
            pipe.hmget(keys.state, [kind.mark, kind.unordered])
            pipe.lrange(key, 0, -1)
            (mark, unordered), rows = pipe.execute()
            if mark is not None or unordered is not None or not rows:
                continue
            at, ordered = listing.order_mark(kind, rows, key)
            args = [kind.mark, kind.unordered, str(len(rows)), str(at), "1" if ordered else "0", kind.length]
            done = int(cast(int, self._mark_script(keys=[keys.state, key], args=args)))
            if done < 0:
                logger.info("list=<%s> | written while being marked; the next upgrade marks it", key)
            marked += max(done, 0)
        return marked

    def upgrade(self) -> int:
        """Bring data written by an earlier version up to this one's layout; how many conversations changed.

        Today that is the seq index of history (see :mod:`~contextledger.stores.redis.paging`):
        every conversation whose index lacks a message gets it; and the order marks of its
        reductions and pin events lists (see :mod:`~contextledger.stores.redis.listing`). Idempotent, safe while others
        write (each id is added only while its message exists); run once after upgrading
        the library (``contextledger db upgrade`` does). Until then such a conversation's
        history pages are read whole.

        Raises:
            CorruptRecord: A message record holds no readable ``seq`` (the key and id are named).
        """
        pattern, suffix = ConversationKeys.stems(self.key_prefix)
        changed = 0
        with self._driver("upgrade"):
            for raw in self._client.scan_iter(match=pattern, count=1000):
                stem = text(raw).removesuffix(suffix)
                if not ConversationKeys.owns(self.key_prefix, stem):
                    continue
                keys = ConversationKeys.at(stem)
                if self._reindex(keys) + self._mark_lists(keys):
                    changed += 1
        logger.info("prefix=<%s>, conversations=<%d> | indexed history by seq", self.key_prefix, changed)
        return changed

    def _reindex(self, keys: ConversationKeys) -> int:
        """Make a conversation's seq index hold exactly its messages (scripts of a chunk each); how many changed."""
        pipe = self._client.pipeline(transaction=False)
        pipe.zcard(keys.seq)
        pipe.hlen(keys.msg)
        indexed, messages = pipe.execute()
        if int(indexed) == int(messages):  # the scripts keep the index a subset: equal sizes, equal sets
            return 0
        records = cast(Iterator[tuple[bytes, bytes]], self._client.hscan_iter(keys.msg, count=paging.REINDEX_CHUNK))
        changed = 0
        for args in paging.reindex_args(records, keys.msg):
            changed += int(cast(int, self._reindex_script(keys=[keys.state, keys.msg, keys.seq], args=args)))
        if int(self._client.zcard(keys.seq)) > int(self._client.hlen(keys.msg)):
            members = [text(m) for m, _ in self._client.zscan_iter(keys.seq, count=paging.REINDEX_CHUNK)]
            for start in range(0, len(members), paging.REINDEX_CHUNK):
                chunk = members[start : start + paging.REINDEX_CHUNK]
                changed += int(cast(int, self._unstray_script(keys=[keys.msg, keys.seq], args=chunk)))
        return changed

    # -- reads -----------------------------------------------------------------------------

    def load(self, session_id: str, agent_id: str) -> Snapshot | None:
        """Return the state and active view (one read-only script), or ``None``."""
        keys = self._conversation(session_id, agent_id)
        with self._driver("load"):
            reply = self._load_script(keys=[keys.state, keys.msg, keys.content, keys.mut, keys.active, keys.sum])
        if reply is None:
            return None
        state_raw, members, records, contents, muts, summaries = cast(list[list[Any]], reply)
        state = decode_state(session_id, agent_id, flat_hash(state_raw), keys.state)
        entries: list[ViewEntry] = []
        message_index = summary_index = 0
        for member in members:
            entry_id = text(member[2:])
            if member[:1] == b"m":
                i = message_index
                message_index += 1
                record, content = records[i], contents[i]
                if record is None or content is None:
                    raise StoreError(f"active entry {entry_id} of {session_id}/{agent_id} has no stored record")
                entries.append(view_entry_of(entry_id, record, content, muts[2 * i], muts[2 * i + 1], keys.msg))
            else:
                raw = summaries[summary_index]
                summary_index += 1
                if raw is None:
                    raise StoreError(f"active summary {entry_id} of {session_id}/{agent_id} has no stored record")
                summary = summary_from(raw, {}, keys.sum)
                entries.append(
                    view_entry(summary.summary_id, "summary", summary.seq, summary.to_message(), summary.tokens)
                )
        # Every part is a record already: the snapshot is not validated again.
        return trusted(Snapshot, {"state": state, "entries": tuple(entries)})

    def entries(
        self, session_id: str, agent_id: str, ids: Sequence[str], *, appended_by: AppendedBy | None = None
    ) -> list[HistoryEntry]:
        """The message entries of ``ids`` (active or evicted) in seq order; unknown ids are skipped.

        One read-only script reads those entries only, whatever the length of the history;
        with ``appended_by`` it returns (and reads the content of) only the entries appended
        by a call or version at or before the cut (a time bound is applied to what it returns).
        """
        keys = self._conversation(session_id, agent_id)
        args = travel.entries_args(sorted(set(ids)), appended_by)
        with self._driver("entries"):
            reply = self._entries_script(keys=[keys.msg, keys.content, keys.mut], args=args)
        return travel.decode_entries(session_id, agent_id, cast(list[Any], reply), keys.msg, appended_by)

    def erase(self, tombstone: Tombstone, erased: Message, summaries: Mapping[str, str]) -> None:
        """Overwrite an entry, delete its revisions, rewrite ``summaries``, keep ``tombstone``: one script.

        The old values leave the keys (Redis keeps no old versions); persistence files
        written before (RDB snapshots, AOF) hold them until they are rewritten.

        Raises:
            EntryNotFound: The entry or a summary is not in the conversation (nothing changes).
            ConcurrencyConflict: Its revisions moved while the erase was prepared (retry).
        """
        keys = self._conversation(tombstone.session_id, tombstone.agent_id)
        entry_id = tombstone.entry_id
        with self._driver("erase"):
            record = self._client.hget(keys.msg, entry_id)
            revisions = cast(list[bytes], self._client.lrange(keys.rev, 0, -1))
            stored = cast(list[bytes | None], self._client.hmget(keys.sum, list(summaries))) if summaries else []
        if record is None:
            raise EntryNotFound(f"no message {entry_id} in this conversation")
        if any(raw is None for raw in stored):
            raise EntryNotFound("a summary to redact is not in this conversation")
        positions = [i for i, raw in enumerate(revisions) if revision_from(raw, keys.rev).message_id == entry_id]
        rewritten = {
            summary_id: SummaryEntry.model_validate_json(raw).model_copy(update={"content": summaries[summary_id]})
            for summary_id, raw in zip(summaries, stored, strict=True)
            if raw is not None
        }
        args = erasure.erase_args(entry_id, loads(record), erased, tombstone, positions, rewritten)
        with self._driver("erase"), _script_errors():
            self._erase_script(keys=[keys.msg, keys.content, keys.mut, keys.rev, keys.sum, keys.state], args=args)
        self._align_ttl(keys)

    def prune(self, session_id: str, agent_id: str, entry_ids: Sequence[str], tombstones: Sequence[Tombstone]) -> int:
        """Delete the evicted entries among ``entry_ids`` (never an active one) in one script."""
        keys = self._conversation(session_id, agent_id)
        wanted = set(entry_ids)
        with self._driver("prune"):
            revisions = cast(list[bytes], self._client.lrange(keys.rev, 0, -1))
            messages = [
                i
                for i, known in zip(sorted(wanted), self._client.hmget(keys.msg, sorted(wanted)), strict=True)
                if known
            ]
        summaries = sorted(wanted - set(messages))
        positions = [i for i, raw in enumerate(revisions) if revision_from(raw, keys.rev).message_id in set(messages)]
        args = [str(len(messages)), *messages, str(len(summaries)), *summaries, str(len(positions))]
        args += [str(p) for p in positions]
        args.append(str(len(tombstones)))
        for t in tombstones:
            args += [t.entry_id, erasure.tombstone_json(t)]
        with self._driver("prune"), _script_errors():
            count = self._prune_script(
                keys=[keys.msg, keys.content, keys.mut, keys.rev, keys.sum, keys.active, keys.seq], args=args
            )
        self._align_ttl(keys)
        return int(count)

    def _align_ttl(self, keys: ConversationKeys) -> None:
        """With a ttl: a key an erase or prune created gets the conversation's expiry."""
        if self.ttl_ms:
            with self._driver("expire"):
                self._align_ttl_script(keys=list(keys.all))

    def tombstones(self, session_id: str, agent_id: str | None = None) -> list[Tombstone]:
        """Erased and pruned entries of the session (or one agent), oldest first."""
        out: list[Tombstone] = []
        for aid in self._agent_ids(session_id, agent_id):
            keys = self._conversation(session_id, aid)
            with self._driver("tombstones"):
                (mut,) = self._snapshot([keys.mut], ["h"])
            out += [
                erasure.tombstone_from(raw, session_id, aid)
                for field, raw in flat_hash(mut).items()
                if field.startswith("x|")
            ]
        return sorted(out, key=lambda t: t.erased_at)

    def import_conversation(self, records: ConversationRecords) -> bool:
        """Write one conversation's records with one script; ``False`` (nothing written) if it exists.

        With a ``ttl`` the keys get it as a commit would give them.
        """
        check_records(records)
        args = transfer.import_args(records, self.ttl_ms)
        keys = self._conversation(records.session_id, records.agent_id)
        index = SessionKeys.of(self.key_prefix, records.session_id)
        with self._driver("import"), _script_errors():
            if not self._cluster:
                written = self._import_script(keys=[*keys.all, index.sessions, index.agents], args=args)
            else:
                pipe = self._client.pipeline(transaction=False)
                pipe.sadd(index.agents, records.agent_id)
                pipe.sadd(SessionKeys.slots(self.key_prefix), keys.slot)
                pipe.execute()
                slot_index = SessionKeys.slot_index(self.key_prefix, keys.slot)
                written = self._import_script(keys=[*keys.all, slot_index], args=args)
                if self.ttl_ms:
                    pipe = self._client.pipeline(transaction=False)
                    pipe.pexpire(index.agents, self.ttl_ms)
                    pipe.pexpire(SessionKeys.slots(self.key_prefix), self.ttl_ms)
                    pipe.execute()
        return bool(int(cast(int, written)))

    def agents(self, session_id: str) -> list[str]:
        """Agent ids with a conversation in the session (index entries checked against the data)."""
        with self._driver("agents"):
            candidates = sorted(
                text(a)
                for a in cast(set[bytes], self._client.smembers(SessionKeys.of(self.key_prefix, session_id).agents))
            )
            if not candidates:
                return []
            pipe = self._client.pipeline(transaction=False)
            for aid in candidates:
                pipe.exists(self._conversation(session_id, aid).state)
            exists = pipe.execute()
        return [aid for aid, found in zip(candidates, exists, strict=True) if found]

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
        with self._driver("sessions"):
            if self._cluster:
                slots = cast(set[bytes], self._client.smembers(SessionKeys.slots(self.key_prefix)))
                index_keys = [SessionKeys.slot_index(self.key_prefix, int(slot)) for slot in sorted(slots, key=int)]
            else:
                index_keys = [SessionKeys.index(self.key_prefix)]
            depth = wanted
            while True:
                ranked = most_recent(self._client, index_keys, depth)
                found = session_infos(self._client, self.key_prefix, ranked)
                # a listed session without conversations (deleted meanwhile) is skipped:
                # read deeper until the page is full or the indexes are exhausted
                if len(found) >= wanted or len(ranked) < depth:
                    break
                depth += wanted - len(found)
        return found[offset:wanted]

    def _owned_sessions(self, app: str | None, user: str | None) -> list[SessionInfo]:
        """Every session of ``app`` / ``user``, most recently updated first (checked against their owner)."""
        with self._driver("sessions"):
            listed = sorted(
                text(m) for m in cast(set[bytes], self._client.smembers(SessionKeys.owned(self.key_prefix, app, user)))
            )
            found = session_infos(self._client, self.key_prefix, listed) if listed else []
        found = [i for i in found if owned(SessionOwner(i.app, i.user), app, user)]
        return sorted(found, key=lambda i: (i.updated_at, i.session_id), reverse=True)

    def conversation_state(self, session_id: str, agent_id: str) -> ConversationState | None:
        """The conversation's state alone (one ``HGETALL``, no view), or ``None``."""
        keys = self._conversation(session_id, agent_id)
        with self._driver("conversation_state"):
            raw = cast(dict[bytes, bytes], self._client.hgetall(keys.state))
        if not raw:
            return None
        return decode_state(session_id, agent_id, {text(k): v for k, v in raw.items()}, keys.state)

    def owner(self, session_id: str) -> SessionOwner | None:
        """The app and user the session was created for, or ``None`` when it does not exist."""
        if not self.agents(session_id):
            return None
        with self._driver("owner"):
            (found,) = read_owners(self._client, self.key_prefix, [session_id])
        return found

    def scope_state(self, app: str, user: str | None = None) -> dict[str, Any]:
        """The state of ``app`` (or of one of its users); ``{}`` when none is stored."""
        key = SessionKeys.scope(self.key_prefix, app, user)
        with self._driver("scope_state"):
            raw = cast(dict[bytes, bytes], self._client.hgetall(key))
        return owners.scope_state(raw, key)

    def merge_scope_state(self, app: str, user: str | None, delta: Mapping[str, Any]) -> None:
        """Set the keys of ``delta`` in the state of ``app`` (or of its ``user``): one ``HSET``."""
        if not delta:
            return
        mapping: dict[Any, Any] = {key: json.dumps(value, allow_nan=False) for key, value in delta.items()}
        with self._driver("merge_scope_state"):
            self._client.hset(SessionKeys.scope(self.key_prefix, app, user), mapping=mapping)

    def delete_scope_state(self, app: str, user: str | None) -> bool:
        """Remove the state of ``app`` (or of its ``user``); whether there was any."""
        with self._driver("delete_scope_state"):
            return bool(int(self._client.delete(SessionKeys.scope(self.key_prefix, app, user))))

    # -- writes ----------------------------------------------------------------------------

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
        now = utcnow()
        args = [*commit_args(changeset, now), *tail_args(changeset, now, self.ttl_ms)]
        with self._gate.call():
            return commit_exactly_once(changeset, lambda cs: self._send(cs, args), lambda cs: self._settle(cs, args))

    def _settle(self, cs: Changeset, args: list[str]) -> int | None:
        """Read a commit back; replicated, an applied one is sent again to wait for its replicas."""
        version = self._read_back(cs)
        if version is None or self._replication is None:
            return version
        return self._send(cs, args)

    def _read_back(self, cs: Changeset) -> int | None:
        keys = self._conversation(cs.session_id, cs.agent_id)
        with self._driver("read back a commit"):
            current, logged = cast(
                list[Any], self._read_back_script(keys=[keys.state, keys.cs], args=[str(cs.new_version)])
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
        keys = self._conversation(cs.session_id, cs.agent_id)
        index = SessionKeys.of(self.key_prefix, cs.session_id)
        try:
            return self._send_script(cs, keys, index, args)
        except CommitOutcomeUnknown:
            raise  # applied on the primary, no replica acknowledged it: not a lost reply
        except StoreUnavailable as exc:
            # Even a refused connection may follow an attempt that was sent: redis-py
            # retries on its own and reports only the last error. Always read back.
            raise ReplyLost(exc) from exc

    def _send_script(self, cs: Changeset, keys: ConversationKeys, index: SessionKeys, args: list[str]) -> int:
        with self._driver("commit"):
            if cs.expected_version == 0 and (cs.app is not None or cs.user is not None):
                self._claim(cs, index)
            if not self._cluster:
                version = self._run_commit(cs, [*keys.all, index.sessions, index.agents, index.owner], args)
            else:
                slot_index = SessionKeys.slot_index(self.key_prefix, keys.slot)
                if cs.expected_version == 0:
                    self._register(cs, index, keys.slot)
                version = self._run_commit(cs, [*keys.all, slot_index], args)
        if self._cluster and (cs.expected_version == 0 or self.ttl_ms):
            try:
                # again after the commit: a deletion of the session may have run in between;
                # with a ttl the agent set (in another slot) outlives the conversation's keys
                pipe = self._client.pipeline(transaction=False)
                pipe.sadd(index.agents, cs.agent_id)
                if self.ttl_ms:
                    pipe.pexpire(index.agents, self.ttl_ms)
                    pipe.pexpire(index.owner, self.ttl_ms)
                    # the set of slots with an index expires with the last write too
                    slots = SessionKeys.slots(self.key_prefix)
                    pipe.sadd(slots, keys.slot)
                    pipe.pexpire(slots, self.ttl_ms)
                pipe.execute()
            except (RedisError, RedisClusterException) as exc:
                # The commit is applied, and listed since before it; only that race is left open.
                logger.warning(
                    "session_id=<%s>, agent_id=<%s>, error=<%s> | created but could not list the agent again",
                    cs.session_id,
                    cs.agent_id,
                    one_line(exc),
                )
        logger.debug(
            "session_id=<%s>, agent_id=<%s>, version=<%d> | committed changeset", cs.session_id, cs.agent_id, version
        )
        return version

    def _run_commit(self, cs: Changeset, keys: list[str], args: list[str]) -> int:
        rep = self._replication
        try:
            if rep is None:
                return int(cast(int, self._commit_script(keys=keys, args=args)))
            reply, acked = replicated_commit(self._client, self._commit_script.sha, scripts.COMMIT, keys, args, rep)
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
        reply = self._claim_script(keys=[index.owner, index.agents], args=owners.claim_args(cs))
        owner = owners.check_claim(cs, reply)
        sets = owners.index_sets(self.key_prefix, owner)
        if sets:
            pipe = self._client.pipeline(transaction=False)
            for key in sets:
                pipe.sadd(key, cs.session_id)
            pipe.execute()

    def _register(self, cs: Changeset, index: SessionKeys, slot: int) -> None:
        """On Cluster, before a conversation's first commit: list its agent and its slot's index."""
        pipe = self._client.pipeline(transaction=False)
        pipe.sadd(index.agents, cs.agent_id)
        pipe.sadd(SessionKeys.slots(self.key_prefix), slot)
        pipe.execute()

    def delete_session(self, session_id: str) -> bool:
        """Remove every key of the session's conversations and its index entries.

        The agents read first are the ones removed; an agent whose conversation exists
        again once its keys and index entries are gone was created meanwhile, and is
        listed again.
        """
        index = SessionKeys.of(self.key_prefix, session_id)
        with self._driver("delete_session"):
            (owner,) = read_owners(self._client, self.key_prefix, [session_id])
            agents = sorted(text(a) for a in cast(set[bytes], self._client.smembers(index.agents)))
            conversations = [self._conversation(session_id, aid) for aid in agents]
            # one DEL per conversation: its keys share a slot (pipelines cannot multi-key DEL on Cluster)
            removed = [self._client.delete(*keys.all) for keys in conversations]
            pipe = self._client.pipeline(transaction=False)
            if self._cluster:
                for slot in sorted({keys.slot for keys in conversations}):
                    pipe.zrem(SessionKeys.slot_index(self.key_prefix, slot), session_id)
            else:
                pipe.zrem(index.sessions, session_id)
            if agents:
                pipe.srem(index.agents, *agents)
            pipe.delete(index.owner)
            for key in owners.index_sets(self.key_prefix, owner):
                pipe.srem(key, session_id)
            pipe.delete(index.expired)
            if self.ttl_ms:  # so a writer still holding it is told it was deleted, not that it expired
                pipe.set(index.deleted, "1", px=self.ttl_ms)
            pipe.execute()
            if agents:
                self._relist_recreated(session_id, index, agents, conversations)
        existed = any(int(n) for n in removed)
        logger.info("session_id=<%s>, agents=<%d>, existed=<%s> | deleted session", session_id, len(agents), existed)
        return existed

    def _relist_recreated(
        self, session_id: str, index: SessionKeys, agents: list[str], conversations: list[ConversationKeys]
    ) -> None:
        relist_recreated(self._client, self.key_prefix, self._cluster, session_id, index, agents, conversations)

    def _gone(self, cs: Changeset) -> SessionDeleted:
        """Why a conversation a writer held is gone: expired (``expire``, or its ttl) or deleted."""
        index = SessionKeys.of(self.key_prefix, cs.session_id)
        with self._driver("read why a conversation is gone"):
            pipe = self._client.pipeline(transaction=False)
            pipe.hget(index.expired, cs.agent_id)
            pipe.exists(index.deleted)
            expired, deleted = pipe.execute()
        base = _deleted(cs)
        if expired is not None:
            reason = lineage.expiry_from(expired, cs.session_id).reason
            return SessionExpired(f"{base} (it expired: {reason})")
        if self.ttl_ms and not int(deleted):
            return SessionExpired(f"{base} (it expired: no write for its ttl of {self.ttl_ms / 1000:g}s)")
        return base

    # -- lineage, expiry, erased bytes --------------------------------------------------------

    def add_lineage(self, links: Sequence[LineageLink]) -> int:
        """Record each link under its ancestor conversation while it exists (one script per ancestor)."""
        by_ancestor: dict[tuple[str, str], list[str]] = {}
        for link in links:
            by_ancestor.setdefault((link.session_id, link.agent_id), []).extend(
                [lineage.link_field(link), lineage.link_json(link)]
            )
        added = 0
        for (session_id, agent_id), args in by_ancestor.items():
            keys = self._conversation(session_id, agent_id)
            with self._driver("add lineage"):
                added += int(cast(int, self._link_script(keys=[keys.state, keys.mut], args=args)))
        return added

    def lineage(self, session_id: str, agent_id: str | None = None) -> list[LineageLink]:
        """The links kept under the session's conversations (or one agent's), oldest first."""
        out: list[LineageLink] = []
        for aid in self._agent_ids(session_id, agent_id):
            keys = self._conversation(session_id, aid)
            with self._driver("lineage"):
                (mut,) = self._snapshot([keys.mut], ["h"])
            out += [
                lineage.link_from(raw, session_id, aid)
                for field, raw in flat_hash(mut).items()
                if field.startswith("l|")
            ]
        return sorted(out, key=lambda link: (link.created_at, link.depth, link.key))

    def expire_session(self, session_id: str, *, idle_before: datetime, reason: str) -> list[Expiry]:
        """Remove the session's conversations when none was written at or after ``idle_before``.

        Each conversation goes in one script, only while its last write is the one read
        (on Cluster its keys are in its own slot, so a session of several agents is removed
        one conversation at a time; a write racing with it stops the expiry there).
        """
        index = SessionKeys.of(self.key_prefix, session_id)
        agents = self.agents(session_id)
        with self._driver("expire"):
            pipe = self._client.pipeline(transaction=False)
            for aid in agents:
                pipe.hget(self._conversation(session_id, aid).state, "updated_at")
            stamps = pipe.execute()
        if not agents or any(s is None or datetime.fromisoformat(text(s)) >= idle_before for s in stamps):
            return []
        now = utcnow()
        out: list[Expiry] = []
        for aid, stamp in zip(agents, stamps, strict=True):
            keys = self._conversation(session_id, aid)
            with self._driver("expire"):
                removed = int(cast(int, self._expire_script(keys=list(keys.all), args=[stamp])))
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
            with self._driver("expire"):
                (owner,) = (
                    read_owners(self._client, self.key_prefix, [session_id]) if len(gone) == len(agents) else (None,)
                )
                pipe = self._client.pipeline(transaction=False)
                pipe.hset(index.expired, mapping={e.agent_id: lineage.expiry_json(e) for e in out})
                if self.ttl_ms:
                    pipe.pexpire(index.expired, self.ttl_ms)
                pipe.srem(index.agents, *gone)
                if len(gone) == len(agents):
                    if self._cluster:
                        for slot in sorted({self._conversation(session_id, a).slot for a in gone}):
                            pipe.zrem(SessionKeys.slot_index(self.key_prefix, slot), session_id)
                    else:
                        pipe.zrem(index.sessions, session_id)
                    if owner is not None:  # the session is gone whole: so is who it belonged to
                        pipe.delete(index.owner)
                        for key in owners.index_sets(self.key_prefix, owner):
                            pipe.srem(key, session_id)
                pipe.execute()
        logger.info("session_id=<%s>, agents=<%d> | expired", session_id, len(out))
        return out

    def expirations(self, session_id: str) -> list[Expiry]:
        """The expiries kept for the session, oldest first."""
        with self._driver("expirations"):
            raw = cast(dict[bytes, bytes], self._client.hgetall(SessionKeys.of(self.key_prefix, session_id).expired))
        found = [lineage.expiry_from(v, session_id) for v in raw.values()]
        return sorted(found, key=lambda e: (e.expired_at, e.agent_id))

    def reseal(self, session_id: str, agent_id: str, swaps: Sequence[Swap]) -> int:
        """Replace sealed tokens where they still are (one script: each value only if unchanged since read)."""
        if not swaps:
            return 0
        keys = self._conversation(session_id, agent_id)
        order = list(keys.all)
        places: list[tuple[str, str, str]] = []  # key, h|l, field (list positions filled below)
        with self._driver("reseal"):
            wanted = any(s.where == "revision" for s in swaps)
            revisions = cast(list[bytes], self._client.lrange(keys.rev, 0, -1)) if wanted else []
            pipe = self._client.pipeline(transaction=False)
            for sw in swaps:
                if sw.where == "revision":
                    index = next((i for i, raw in enumerate(revisions) if sw.old.encode() in raw), -1)
                    places.append((keys.rev, "l", str(index)))
                    pipe.lindex(keys.rev, index)
                    continue
                key, field_name = {
                    "content": (keys.content, sw.ident),
                    "meta": (keys.msg, sw.ident),
                    "summary": (keys.sum, sw.ident),
                    "manager_state": (keys.state, "manager_state"),
                    "agent_state": (keys.state, "agent_state"),
                }[sw.where]
                places.append((key, "h", field_name))
                pipe.hget(key, field_name)
            current = pipe.execute()
        args: list[str] = []
        for sw, (key, kind, field_name), raw in zip(swaps, places, current, strict=True):
            if raw is None or field_name == "-1":
                continue
            old = text(raw)
            if sw.old not in old:
                continue
            args += [str(order.index(key) + 1), kind, field_name, old, old.replace(sw.old, sw.new)]
        if not args:
            return 0
        with self._driver("reseal"):
            return int(cast(int, self._reseal_script(keys=order, args=args)))

    def settle_erasure(self, *, timeout: float, vacuum: bool = False) -> str | None:
        """Say whether Redis's persistence files may still hold erased values (the keys never do).

        An append-only file keeps every write until it is rewritten, and an RDB snapshot
        taken before the erase keeps the old values until the next one replaces it; the
        store does not rewrite them itself (``BGREWRITEAOF`` / ``BGSAVE`` are the operator's).
        """
        with self._driver("persistence info"):
            info: dict[str, Any] = self._client.info("persistence")
        if self._cluster and info and all(isinstance(v, dict) for v in info.values()):
            nodes = list(info.values())  # one reply per node
        else:
            nodes = [info]
        notes = []
        if any(int(n.get("aof_enabled", 0)) for n in nodes):
            notes.append("the append-only file keeps the erased values until it is rewritten (BGREWRITEAOF)")
        if any(int(n.get("rdb_saves", 0)) or int(n.get("rdb_changes_since_last_save", 0)) < 0 for n in nodes):
            notes.append("an RDB snapshot taken before the erase keeps them until the next one replaces it (BGSAVE)")
        if not notes:
            return None
        return f"Redis at {self.url}: " + "; ".join(notes)

    def close(self) -> None:
        """Refuse further calls, let running ones finish, then release the client's connections."""
        self._gate.close(self._release)

    def _release(self) -> None:
        try:
            self._client.close()
        except (RedisError, RedisClusterException) as exc:
            logger.warning("url=<%s>, error=<%s> | closing the Redis client failed", self.url, one_line(exc))


def ttl_millis(ttl: float | timedelta | None) -> int:
    """``ttl`` (seconds or a ``timedelta``) in whole milliseconds, at least 1; 0 for ``None``.

    Raises:
        ConfigurationError: ``ttl`` is not a positive number of seconds or ``timedelta``.
    """
    if ttl is None:
        return 0
    if isinstance(ttl, timedelta):
        seconds = ttl.total_seconds()
    elif isinstance(ttl, int | float) and not isinstance(ttl, bool):
        seconds = float(ttl)
    else:
        raise ConfigurationError(f"ttl must be a number of seconds or a timedelta, got {type(ttl).__name__}")
    if not seconds > 0 or seconds == float("inf"):
        raise ConfigurationError(f"ttl must be positive and finite, got {ttl!r}")
    return max(1, round(seconds * 1000))


@contextmanager
def _script_errors() -> Iterator[None]:
    """Map the typed error replies of the erase and prune scripts."""
    try:
        yield
    except ResponseError as exc:
        message = str(exc)
        if message.startswith("CLNOTFOUND"):
            raise EntryNotFound(message.removeprefix("CLNOTFOUND ")) from exc
        if message.startswith("CLCONFLICT"):
            raise ConcurrencyConflict(message.removeprefix("CLCONFLICT ")) from exc
        raise


def _deleted(cs: Changeset) -> SessionDeleted:
    return SessionDeleted(
        f"session_id={cs.session_id} agent_id={cs.agent_id}: the conversation was deleted "
        f"(expected version {cs.expected_version}); it is not re-created"
    )
