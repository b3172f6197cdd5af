"""Key layout of the Redis ledger store.

Every key of one conversation carries the hash tag ``{<prefix>:<session>:<agent>}`` so
that all of them hash to one Cluster slot and a single Lua script can change them
atomically. Session and agent ids are percent-encoded inside the tag: an id holding
``{``, ``}``, ``:`` or ``%`` can neither end the tag early nor make two (session, agent)
pairs collide.

Per conversation (``T`` = the tagged stem):

* ``T:state`` -- hash: version, model_call_count, next_seq, manager_state, agent_state,
  created_at, updated_at.
* ``T:msg`` -- hash: message id -> JSON of the immutable part of the entry (role,
  metadata as appended, seq, tokens, created_at).
* ``T:content`` -- hash: message id -> JSON of the current (latest revision) content.
* ``T:mut`` -- hash of the small mutable facts, one field each: ``p|<id>`` pin flag,
  ``t|<id>`` revised token count, ``r|<id>`` revision count, ``e|<id>`` reduction that
  evicted a message, ``se|<id>`` / ``ss|<id>`` reduction that evicted a summary and the
  summary that superseded it.
* ``T:active`` -- sorted set of the active view: ``m:<id>`` / ``s:<id>`` scored so that
  ``ZRANGE`` yields view order (see :func:`view_score`).
* ``T:sum`` -- hash: summary id -> JSON of the summary as committed.
* ``T:red`` / ``T:rev`` -- lists of reduction and revision rows, in commit order.
* ``T:cs`` -- hash: version -> id of the changeset that produced it (the commit log
  that resolves a lost reply, exactly once), for the last :data:`CHANGESET_LOG_SIZE`
  versions.
* ``T:pins`` -- list of pin events (JSON), in commit order.
* ``T:seq`` -- sorted set: message id scored by its seq, every message in ``T:msg``
  (written by the scripts that write ``T:msg``), so a page of history reads a range of
  it and the page's entries only. A conversation written before the index existed has
  fewer members than messages: its pages read the whole history until
  ``RedisStore.upgrade()`` (``contextledger db upgrade``) fills the index in (see
  :mod:`contextledger.stores.redis.paging`).
* ``T:sumat`` -- sorted set: summary id scored by its ``created_at`` in epoch µs, every
  summary in ``T:sum`` (written by the scripts that write ``T:sum``; a time a score
  cannot hold exactly, before 1685 or after 2255, is left out), so a page of summaries
  reads a range of it; kept and upgraded as the seq index is (see
  :mod:`contextledger.stores.redis.summary_index`).
* ``T:evat`` -- sorted set: each standing eviction (``<seq:020>`` ``m``/``s`` ``<id>``)
  scored by its reduction's ``created_at`` in epoch µs, beside the ``rp|`` / ``rb|`` facts
  in ``T:mut`` and the ``ev_v`` mark in ``T:state``, so a page of evictions reads a range of
  it (see :mod:`contextledger.stores.redis.eviction_index`).
* ``T:evtr`` -- sorted set, every score 0 (ordered by bytes): the same evictions, each as
  ``<trigger>|<time code><evat member>``, beside the ``rt|`` facts in ``T:mut`` and the
  ``et_v`` mark in ``T:state``, so a page of one trigger's evictions reads a range of it.

Indexes (who writes them when: :mod:`~contextledger.stores.redis.writes`, :mod:`~contextledger.stores.redis.index`):

* ``{<prefix>:<session>}:agents`` -- set of the agent ids of a session.
* ``<prefix>:sessions`` -- on a single server: sorted set of session ids scored by
  last update (epoch µs).
* ``<prefix>:sessions:{<tag>}`` -- on Cluster: the same sorted set, one per hash slot,
  for the conversations of that slot; ``<tag>`` is a short string that hashes to the
  slot (:func:`slot_tag`), so the commit script of a conversation can write its slot's
  index atomically with the conversation.
* ``<prefix>:session-slots`` -- on Cluster: set of the slots that have such an index
  (with a ttl it expires with the last of them: every commit sets its expiry again).

Beside a session (same hash tag as its agent set):

* ``{<prefix>:<session>}:expired`` -- hash: agent id -> JSON of the
  :class:`~contextledger.model.records.Expiry` of a conversation removed by ``expire``.
* ``{<prefix>:<session>}:deleted`` -- with a ttl: set by ``delete_session`` (expiring
  with the ttl), so a writer of a deleted conversation is told it was deleted, not expired.
* ``{<prefix>:<session>}:owner`` -- hash: ``app`` and ``user`` of the session (a field
  is absent when not named); see :mod:`contextledger.stores.redis.owners`.

Lineage links live in a conversation's ``mut`` hash as ``l|<link key>`` fields (JSON),
beside its tombstones, so they expire and go with the conversation.

Apps and users:

* ``<prefix>:app:<app>``, ``<prefix>:app:<app>:user:<user>``, ``<prefix>:user:<user>``
  -- sets of the session ids of an app, of one user of an app, of a user (in any app,
  or in none).
* ``<prefix>:scope:<app>`` / ``<prefix>:scope:<app>:<user>`` -- hash: the state of an
  app / of one of its users, key -> JSON text.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, cached_property, lru_cache
from urllib.parse import quote

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from contextledger.errors import ConfigurationError

__all__ = [
    "CHANGESET_LOG_SIZE",
    "SEQ_DIGITS",
    "ConversationKeys",
    "SessionKeys",
    "check_prefix",
    "encode_id",
    "slot_tag",
    "view_score",
]

# Order matters: the Lua scripts address these keys by position.
_CONVERSATION_PARTS = (
    "state",
    "msg",
    "content",
    "mut",
    "active",
    "sum",
    "red",
    "rev",
    "cs",
    "pins",
    "seq",
    "sumat",
    "evat",
    "evtr",
)

SEQ_DIGITS = 20
"""Digits of the seq in an eviction index member: any seq a conversation holds (below 10**20) sorts as a number."""

CHANGESET_LOG_SIZE = 1000
"""Versions whose changeset id the ``cs`` hash keeps (a lost reply is resolved right after)."""


@lru_cache(maxsize=4096)
def encode_id(value: str) -> str:
    """Percent-encode an id so it holds no ``{``, ``}``, ``:`` (or ``%`` unescaped).

    The encoding is injective, so distinct ids always give distinct keys. Remembered for
    the ids in use (every commit names its session and agent; ``quote`` is pure Python).
    """
    return quote(value, safe="")


def check_prefix(prefix: str) -> str:
    """Return ``prefix`` if it is usable as a key prefix.

    Raises:
        ConfigurationError: The prefix is empty or holds ``{`` or ``}`` (which would
            change which part of a key Redis Cluster hashes).
    """
    if not isinstance(prefix, str) or not prefix or "{" in prefix or "}" in prefix:
        raise ConfigurationError(f"key_prefix must be a non-empty string without braces, got {prefix!r}")
    return prefix


def view_score(seq: int, *, summary: bool) -> int:
    """Score of an entry in the active sorted set.

    The view is ordered by ``(seq, kind != "summary")``: a summary sorts before a
    message of the same seq, hence the doubled seq.
    """
    return seq * 2 + (0 if summary else 1)


@cache
def _slot_tags() -> tuple[str, ...]:
    # The first decimal number hashing to each slot (about 110,000 CRC16s, once).
    tags: dict[int, str] = {}
    n = 0
    while len(tags) < REDIS_CLUSTER_HASH_SLOTS:
        tag = str(n)
        tags.setdefault(key_slot(tag.encode()), tag)
        n += 1
    return tuple(tags[slot] for slot in range(REDIS_CLUSTER_HASH_SLOTS))


def slot_tag(slot: int) -> str:
    """A short hash tag that Redis Cluster maps to ``slot`` (0 to 16383).

    Raises:
        ConfigurationError: ``slot`` is not a Cluster hash slot.
    """
    if not 0 <= slot < REDIS_CLUSTER_HASH_SLOTS:
        raise ConfigurationError(f"not a Redis Cluster hash slot: {slot}")
    return _slot_tags()[slot]


@dataclass(frozen=True)
class ConversationKeys:
    """Every key of one (session_id, agent_id), all in one hash slot."""

    state: str
    msg: str
    content: str
    mut: str
    active: str
    sum: str
    red: str
    rev: str
    cs: str
    pins: str
    seq: str
    sumat: str
    evat: str
    evtr: str

    @classmethod
    def of(cls, prefix: str, session_id: str, agent_id: str) -> ConversationKeys:
        """The keys of ``(session_id, agent_id)`` under ``prefix`` (the same object for the conversations in use)."""
        if cls is not ConversationKeys:
            return cls.at(f"{{{prefix}:{encode_id(session_id)}:{encode_id(agent_id)}}}")
        return _conversation_keys(prefix, session_id, agent_id)

    @classmethod
    def at(cls, stem: str) -> ConversationKeys:
        """The keys of the conversation whose tagged stem (``{<prefix>:<session>:<agent>}``) is ``stem``."""
        return cls(*(f"{stem}:{part}" for part in _CONVERSATION_PARTS))

    @staticmethod
    def stems(prefix: str) -> tuple[str, str]:
        """A ``SCAN`` pattern for the ``state`` keys under ``prefix`` (one per conversation), and the suffix to strip.

        The pattern may also match a longer prefix's keys: :meth:`owns` tells them apart.
        """
        escaped = "".join(f"\\{c}" if c in "*?[]\\" else c for c in prefix)
        return f"{{{escaped}:*}}:state", ":state"

    @staticmethod
    def owns(prefix: str, stem: str) -> bool:
        """Whether ``stem`` is a conversation's under ``prefix`` (not under a longer prefix that starts with it).

        Encoded ids hold no ``:``, so the stem holds exactly one after the prefix's.
        """
        head = f"{{{prefix}:"
        return stem.startswith(head) and stem.endswith("}") and stem[len(head) : -1].count(":") == 1

    @cached_property
    def all(self) -> tuple[str, ...]:
        """The keys in the order the Lua scripts expect them."""
        return tuple([getattr(self, part) for part in _CONVERSATION_PARTS])

    @property
    def slot(self) -> int:
        """The Cluster hash slot every key of the conversation lives in."""
        return key_slot(self.state.encode())


@dataclass(frozen=True)
class SessionKeys:
    """The index keys a session is listed under (on a single server; see :meth:`slot_index`), and its owner."""

    agents: str
    sessions: str
    expired: str
    deleted: str
    owner: str

    @classmethod
    def of(cls, prefix: str, session_id: str) -> SessionKeys:
        """The index keys of ``session_id`` under ``prefix``."""
        stem = f"{{{prefix}:{encode_id(session_id)}}}"
        return cls(
            agents=f"{stem}:agents",
            sessions=cls.index(prefix),
            expired=f"{stem}:expired",
            deleted=f"{stem}:deleted",
            owner=f"{stem}:owner",
        )

    @staticmethod
    def owned(prefix: str, app: str | None, user: str | None) -> str:
        """The set of the session ids of ``app`` (and ``user``), or of ``user`` alone; at least one is named."""
        if app is None:
            return f"{prefix}:user:{encode_id(user or '')}"
        if user is None:
            return f"{prefix}:app:{encode_id(app)}"
        return f"{prefix}:app:{encode_id(app)}:user:{encode_id(user)}"

    @staticmethod
    def scope(prefix: str, app: str, user: str | None) -> str:
        """The hash of the state of ``app`` (``user`` ``None``) or of one of its users."""
        stem = f"{prefix}:scope:{encode_id(app)}"
        return stem if user is None else f"{stem}:{encode_id(user)}"

    @staticmethod
    def index(prefix: str) -> str:
        """The sorted set of every session under ``prefix`` (on a single server)."""
        return f"{prefix}:sessions"

    @staticmethod
    def slot_index(prefix: str, slot: int) -> str:
        """On Cluster: the sorted set of the sessions with a conversation in hash slot ``slot``."""
        return f"{prefix}:sessions:{{{slot_tag(slot)}}}"

    @staticmethod
    def slots(prefix: str) -> str:
        """On Cluster: the set of the hash slots that have a :meth:`slot_index`."""
        return f"{prefix}:session-slots"


@lru_cache(maxsize=1024)
def _conversation_keys(prefix: str, session_id: str, agent_id: str) -> ConversationKeys:
    # Remembered: every commit and read names its conversation's keys (immutable).
    return ConversationKeys.at(f"{{{prefix}:{encode_id(session_id)}:{encode_id(agent_id)}}}")
