"""The Redis ledger store: plain Redis 7 or Redis Cluster, no modules."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, cast

from redis import Redis
from redis.cluster import RedisCluster
from redis.commands.core import Script
from redis.exceptions import (
    ClusterDownError,
    RedisClusterException,
    RedisError,
    ResponseError,
    SlotNotCoveredError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from contextledger.changeset import Changeset
from contextledger.errors import (
    ConcurrencyConflict,
    ConfigurationError,
    ContextLedgerError,
    CorruptRecord,
    DuplicateEntry,
    EntryNotFound,
    InvalidLedgerURL,
    SessionDeleted,
    StoreError,
    StoreUnavailable,
)
from contextledger.records import (
    Eviction,
    HistoryEntry,
    PinEvent,
    Reduction,
    Revision,
    SessionInfo,
    Snapshot,
    SummaryEntry,
    Trigger,
    ViewEntry,
    utcnow,
)
from contextledger.stores.base import EvictedCandidate, assemble_evictions
from contextledger.stores.exactly_once import ReplyLost, commit_exactly_once
from contextledger.stores.lifecycle import Gate
from contextledger.stores.redis import scripts
from contextledger.stores.redis.codec import (
    MessageRow,
    commit_args,
    decode_state,
    epoch_micros,
    flat_hash,
    reduction_from,
    revision_from,
    summary_from,
    text,
)
from contextledger.stores.redis.events import pin_event_from, tail_args
from contextledger.stores.redis.keys import ConversationKeys, SessionKeys, check_prefix
from contextledger.urls import mask, mask_text, parse_redis

__all__ = ["RedisStore", "mask_password"]

logger = logging.getLogger(__name__)

RedisClient = Redis | RedisCluster

_UNAVAILABLE: tuple[type[BaseException], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    ClusterDownError,
    SlotNotCoveredError,
)


def mask_password(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***`` (see :func:`contextledger.urls.mask`)."""
    return mask(url)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


class RedisStore:
    """A :class:`~contextledger.stores.base.LedgerStore` on Redis 7 or Redis Cluster.

    Layout and atomicity: every key of one conversation shares one hash tag (see
    :mod:`contextledger.stores.redis.keys`), and a changeset is applied by one Lua script
    that checks the version and every referenced id before its first write -- so a
    commit is all-or-nothing and one round trip, on one server and on Cluster alike.
    :meth:`load` is one read-only script that reads the state and the active view only:
    its cost is O(window) whatever the evicted history.

    Session indexes: ``sessions()``, ``agents()``, ``delete_session()`` and the
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
    """

    def __init__(self, client: RedisClient, *, key_prefix: str = "contextledger", url: str | None = None) -> None:
        """Wrap ``client``; see the class docstring.

        Raises:
            ConfigurationError: ``client`` decodes responses, or ``key_prefix`` is not usable.
        """
        if getattr(client.get_encoder(), "decode_responses", False):
            raise ConfigurationError("the Redis ledger store needs a client with decode_responses=False")
        self._client = client
        self._cluster = isinstance(client, RedisCluster)
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
        self._gate = Gate(self.url)

    @classmethod
    def from_url(cls, url: str, *, key_prefix: str = "contextledger", **options: Any) -> RedisStore:
        """Connect to ``redis://``, ``rediss://`` or ``redis+cluster://host:port`` and check the server answers.

        Options other than ``key_prefix`` go to ``redis.Redis.from_url`` or
        ``redis.cluster.RedisCluster.from_url`` (``decode_responses`` is always off: the
        store decodes values itself so bytes stay exact).

        Raises:
            InvalidLedgerURL: The scheme is not a Redis one, or the path is not a database number.
            ConfigurationError: ``key_prefix`` is empty or holds braces.
            StoreUnavailable: The server (or no cluster node) did not answer.
        """
        parsed = parse_redis(url)
        check_prefix(key_prefix)
        driver_url = parsed.driver_url
        options["decode_responses"] = False
        options.setdefault("socket_connect_timeout", 5.0)
        endpoint = parsed.endpoint
        try:
            client: RedisClient
            if parsed.cluster:
                client = RedisCluster.from_url(driver_url, **options)
            else:
                client = Redis.from_url(driver_url, **options)
            client.ping()
        except (RedisError, RedisClusterException) as exc:
            raise StoreUnavailable(f"cannot reach Redis at {endpoint}: {mask_text(_one_line(exc), url)}") from exc
        except ValueError as exc:  # redis-py rejects malformed URLs this way
            raise InvalidLedgerURL(f"invalid Redis URL {parsed.masked!r}: {mask_text(str(exc), url)}") from None
        except TypeError as exc:  # an option the client does not know
            raise ConfigurationError(f"unsupported Redis store option: {exc}") from exc
        logger.info(
            "url=<%s>, cluster=<%s> | connected redis ledger store",
            parsed.masked,
            isinstance(client, RedisCluster),
        )
        try:
            return cls(client, key_prefix=key_prefix, url=url)
        except BaseException:
            client.close()
            raise

    def __repr__(self) -> str:
        return f"RedisStore(url={self.url!r}, key_prefix={self.key_prefix!r})"

    # -- driver boundary -------------------------------------------------------------------

    @contextmanager
    def _driver(self, action: str) -> Iterator[None]:
        try:
            with self._gate.call():
                yield
        except ContextLedgerError:
            raise
        except _UNAVAILABLE as exc:
            raise StoreUnavailable(f"Redis at {self._endpoint} is unavailable ({action}): {_one_line(exc)}") from exc
        except RedisClusterException as exc:
            if "cannot be connected" in str(exc):  # no node answered while rediscovering the cluster
                raise StoreUnavailable(
                    f"Redis at {self._endpoint} is unavailable ({action}): {_one_line(exc)}"
                ) from exc
            raise StoreError(f"Redis at {self._endpoint} failed ({action}): {_one_line(exc)}") from exc
        except RedisError as exc:
            raise StoreError(f"Redis at {self._endpoint} failed ({action}): {_one_line(exc)}") from exc

    def _conversation(self, session_id: str, agent_id: str) -> ConversationKeys:
        return ConversationKeys.of(self.key_prefix, session_id, agent_id)

    def _snapshot(self, keys: Sequence[str], ops: Sequence[str]) -> list[Any]:
        return cast(list[Any], self._snapshot_script(keys=list(keys), args=list(ops)))

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
                mut = {f"p|{entry_id}": muts[2 * i], f"t|{entry_id}": muts[2 * i + 1]}
                present = {k: v for k, v in mut.items() if v is not None}
                row = MessageRow.decode(entry_id, record, content, present, keys.msg)
                entries.append(row.view_entry())
            else:
                raw = summaries[summary_index]
                summary_index += 1
                if raw is None:
                    raise StoreError(f"active summary {entry_id} of {session_id}/{agent_id} has no stored record")
                summary = summary_from(raw, {}, keys.sum)
                entries.append(
                    ViewEntry(
                        entry_id=summary.summary_id,
                        kind="summary",
                        seq=summary.seq,
                        message=summary.to_message(),
                        tokens=summary.tokens,
                    )
                )
        return Snapshot(state=state, entries=tuple(entries))

    def _rows(
        self, records: dict[str, bytes], contents: dict[str, bytes], mut: dict[str, bytes], where: str
    ) -> list[MessageRow]:
        rows = []
        for entry_id, record in records.items():
            content = contents.get(entry_id)
            if content is None:
                raise StoreError(f"entry {entry_id} has no stored content")
            rows.append(MessageRow.decode(entry_id, record, content, mut, where))
        return sorted(rows, key=lambda r: r.seq)

    def history(self, session_id: str, agent_id: str, *, include_evicted: bool = True) -> list[HistoryEntry]:
        """Every message entry in seq order (reads the whole ledger: O(history))."""
        keys = self._conversation(session_id, agent_id)
        with self._driver("history"):
            records, contents, mut = self._snapshot([keys.msg, keys.content, keys.mut], ["h", "h", "h"])
        rows = self._rows(flat_hash(records), flat_hash(contents), flat_hash(mut), keys.msg)
        return [r.history_entry(session_id, agent_id) for r in rows if include_evicted or r.evicted_by is None]

    def _agent_ids(self, session_id: str, agent_id: str | None) -> list[str]:
        return [agent_id] if agent_id is not None else self.agents(session_id)

    def evictions(
        self,
        session_id: str,
        agent_id: str | None = None,
        *,
        trigger: Trigger | None = None,
        since: datetime | None = None,
    ) -> list[Eviction]:
        """Evicted entries with when, why and which summary replaced them."""
        out: list[Eviction] = []
        for aid in self._agent_ids(session_id, agent_id):
            keys = self._conversation(session_id, aid)
            with self._driver("evictions"):
                records, contents, mut_raw, sums, reds = self._snapshot(
                    [keys.msg, keys.content, keys.mut, keys.sum, keys.red], ["h", "h", "h", "h", "l"]
                )
            mut = flat_hash(mut_raw)
            reductions = {r.reduction_id: r for r in (reduction_from(raw, keys.red) for raw in reds)}
            summaries = _by_creation(summary_from(raw, mut, keys.sum) for raw in flat_hash(sums).values())
            evicted_records = {mid: rec for mid, rec in flat_hash(records).items() if f"e|{mid}" in mut}
            candidates = [
                EvictedCandidate(r.entry_id, "message", r.seq, r.message.role, r.message.plain_text, r.evicted_by)
                for r in self._rows(evicted_records, flat_hash(contents), mut, keys.msg)
            ]
            candidates += [
                EvictedCandidate(s.summary_id, "summary", s.seq, "user", s.content, s.evicted_by)
                for s in summaries
                if s.status == "evicted"
            ]
            out += assemble_evictions(session_id, aid, candidates, reductions, summaries, trigger=trigger, since=since)
        return sorted(out, key=lambda e: (e.evicted_at, e.agent_id, e.seq))

    def reductions(self, session_id: str, agent_id: str | None = None) -> list[Reduction]:
        """Reductions in commit order."""
        out: list[Reduction] = []
        for aid in self._agent_ids(session_id, agent_id):
            keys = self._conversation(session_id, aid)
            with self._driver("reductions"):
                (reds,) = self._snapshot([keys.red], ["l"])
            out += [reduction_from(raw, keys.red) for raw in reds]
        return sorted(out, key=lambda r: r.created_at)

    def summaries(self, session_id: str, agent_id: str | None = None) -> list[SummaryEntry]:
        """All summaries, superseded included, oldest first."""
        out: list[SummaryEntry] = []
        for aid in self._agent_ids(session_id, agent_id):
            keys = self._conversation(session_id, aid)
            with self._driver("summaries"):
                sums, mut_raw = self._snapshot([keys.sum, keys.mut], ["h", "h"])
            mut = flat_hash(mut_raw)
            out += _by_creation(summary_from(raw, mut, keys.sum) for raw in flat_hash(sums).values())
        return sorted(out, key=lambda s: s.created_at)

    def revisions(self, session_id: str, agent_id: str, message_id: str | None = None) -> list[Revision]:
        """Original contents kept by revisions, oldest first."""
        keys = self._conversation(session_id, agent_id)
        with self._driver("revisions"):
            (rows,) = self._snapshot([keys.rev], ["l"])
        revisions = [revision_from(raw, keys.rev) for raw in rows]
        return [r for r in revisions if message_id is None or r.message_id == message_id]

    def pin_history(self, session_id: str, agent_id: str | None = None) -> list[PinEvent]:
        """Every pin and unpin of the session (or one agent), in commit order."""
        events: list[tuple[datetime, str, int, PinEvent]] = []
        for aid in self._agent_ids(session_id, agent_id):
            keys = self._conversation(session_id, aid)
            with self._driver("pin_history"):
                (rows,) = self._snapshot([keys.pins], ["l"])
            for n, raw in enumerate(rows):
                event = pin_event_from(raw, session_id, aid)
                events.append((event.at, aid, n, event))
        return [e for *_, e in sorted(events, key=lambda t: t[:3])]

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

    def sessions(self, *, limit: int = 100, offset: int = 0) -> list[SessionInfo]:
        """Sessions, most recently updated first, paged.

        On a single server this reads about ``offset + limit`` sessions of the index; on
        Cluster it merges the indexes of every slot in use, reading from each only as far
        as its sessions can still rank among the first ``offset + limit``.

        Raises:
            ConfigurationError: ``limit`` or ``offset`` is negative.
        """
        if limit < 0 or offset < 0:
            raise ConfigurationError(f"limit and offset must be >= 0, got limit={limit} offset={offset}")
        wanted = offset + limit
        if wanted == 0:
            return []
        with self._driver("sessions"):
            if self._cluster:
                slots = cast(set[bytes], self._client.smembers(SessionKeys.slots(self.key_prefix)))
                index_keys = [SessionKeys.slot_index(self.key_prefix, int(slot)) for slot in sorted(slots, key=int)]
            else:
                index_keys = [SessionKeys.index(self.key_prefix)]
            depth = wanted
            while True:
                ranked = self._most_recent(index_keys, depth)
                found = self._session_infos(ranked)
                # a listed session without conversations (deleted meanwhile) is skipped:
                # read deeper until the page is full or the indexes are exhausted
                if len(found) >= wanted or len(ranked) < depth:
                    break
                depth += wanted - len(found)
        return found[offset:wanted]

    def _most_recent(self, index_keys: Sequence[str], n: int) -> list[str]:
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
            pipe = self._client.pipeline(transaction=False)
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

    def _session_infos(self, session_ids: list[str]) -> list[SessionInfo]:
        pipe = self._client.pipeline(transaction=False)
        for sid in session_ids:
            pipe.smembers(SessionKeys.of(self.key_prefix, sid).agents)
        agent_sets = pipe.execute()
        pairs = [
            (sid, aid)
            for sid, members in zip(session_ids, agent_sets, strict=True)
            for aid in sorted(text(m) for m in members)
        ]
        pipe = self._client.pipeline(transaction=False)
        for sid, aid in pairs:
            keys = self._conversation(sid, aid)
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
            keys = self._conversation(sid, aid)
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
            )
            for sid in session_ids
            if (convs := by_session.get(sid))
        ]

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
        args = [*commit_args(changeset, now), *tail_args(changeset, now)]
        with self._gate.call():
            return commit_exactly_once(changeset, lambda cs: self._send(cs, args), self._read_back)

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
            raise _deleted(cs)
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
        except StoreUnavailable as exc:
            # Even a refused connection may follow an attempt that was sent: redis-py
            # retries on its own and reports only the last error. Always read back.
            raise ReplyLost(exc) from exc

    def _send_script(self, cs: Changeset, keys: ConversationKeys, index: SessionKeys, args: list[str]) -> int:
        with self._driver("commit"):
            if not self._cluster:
                version = self._run_commit(cs, [*keys.all, index.sessions, index.agents], args)
            else:
                slot_index = SessionKeys.slot_index(self.key_prefix, keys.slot)
                if cs.expected_version == 0:
                    self._register(cs, index, keys.slot)
                version = self._run_commit(cs, [*keys.all, slot_index], args)
        if self._cluster and cs.expected_version == 0:
            try:
                # again after the commit: a deletion of the session may have run in between
                self._client.sadd(index.agents, cs.agent_id)
            except (RedisError, RedisClusterException) as exc:
                # The commit is applied, and listed since before it; only that race is left open.
                logger.warning(
                    "session_id=<%s>, agent_id=<%s>, error=<%s> | created but could not list the agent again",
                    cs.session_id,
                    cs.agent_id,
                    _one_line(exc),
                )
        logger.debug(
            "session_id=<%s>, agent_id=<%s>, version=<%d> | committed changeset", cs.session_id, cs.agent_id, version
        )
        return version

    def _run_commit(self, cs: Changeset, keys: list[str], args: list[str]) -> int:
        try:
            return int(cast(int, self._commit_script(keys=keys, args=args)))
        except ResponseError as exc:
            if isinstance(exc, _UNAVAILABLE):
                raise
            code, _, detail = str(exc).partition(" ")
            if code == "CLDELETED":
                raise _deleted(cs) from exc
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
            pipe.execute()
            if agents:
                self._relist_recreated(session_id, index, agents, conversations)
        existed = any(int(n) for n in removed)
        logger.info("session_id=<%s>, agents=<%d>, existed=<%s> | deleted session", session_id, len(agents), existed)
        return existed

    def _relist_recreated(
        self, session_id: str, index: SessionKeys, agents: list[str], conversations: list[ConversationKeys]
    ) -> None:
        """After a deletion: list again the agent and session of any conversation that exists again."""
        pipe = self._client.pipeline(transaction=False)
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
        pipe = self._client.pipeline(transaction=False)
        pipe.sadd(index.agents, *(aid for aid, _, _ in recreated))
        for _, keys, score in recreated:
            key = SessionKeys.slot_index(self.key_prefix, keys.slot) if self._cluster else index.sessions
            pipe.zadd(key, {session_id: score}, gt=True)
        pipe.execute()

    def close(self) -> None:
        """Refuse further calls, let running ones finish, then release the client's connections."""
        self._gate.close(self._release)

    def _release(self) -> None:
        try:
            self._client.close()
        except (RedisError, RedisClusterException) as exc:
            logger.warning("url=<%s>, error=<%s> | closing the Redis client failed", self.url, _one_line(exc))


def _deleted(cs: Changeset) -> SessionDeleted:
    return SessionDeleted(
        f"session_id={cs.session_id} agent_id={cs.agent_id}: the conversation was deleted "
        f"(expected version {cs.expected_version}); it is not re-created"
    )


def _by_creation(summaries: Iterator[SummaryEntry] | Sequence[SummaryEntry]) -> list[SummaryEntry]:
    return sorted(summaries, key=lambda s: (s.created_at, s.seq))
