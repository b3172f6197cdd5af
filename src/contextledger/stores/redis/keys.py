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

Indexes (outside any conversation's slot, see :mod:`contextledger.stores.redis.store`):

* ``{<prefix>:<session>}:agents`` -- set of the agent ids of a session.
* ``<prefix>:sessions`` -- sorted set of session ids scored by last update (epoch µs).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from contextledger.errors import ConfigurationError

__all__ = [
    "ConversationKeys",
    "SessionKeys",
    "check_prefix",
    "encode_id",
    "view_score",
]

# Order matters: the Lua scripts address these keys by position.
_CONVERSATION_PARTS = ("state", "msg", "content", "mut", "active", "sum", "red", "rev")


def encode_id(value: str) -> str:
    """Percent-encode an id so it holds no ``{``, ``}``, ``:`` (or ``%`` unescaped).

    The encoding is injective, so distinct ids always give distinct keys.
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

    @classmethod
    def of(cls, prefix: str, session_id: str, agent_id: str) -> ConversationKeys:
        """The keys of ``(session_id, agent_id)`` under ``prefix``."""
        stem = f"{{{prefix}:{encode_id(session_id)}:{encode_id(agent_id)}}}"
        return cls(*(f"{stem}:{part}" for part in _CONVERSATION_PARTS))

    @property
    def all(self) -> tuple[str, ...]:
        """The keys in the order the Lua scripts expect them."""
        return tuple(getattr(self, part) for part in _CONVERSATION_PARTS)


@dataclass(frozen=True)
class SessionKeys:
    """The index keys a session is listed under."""

    agents: str
    sessions: str

    @classmethod
    def of(cls, prefix: str, session_id: str) -> SessionKeys:
        """The index keys of ``session_id`` under ``prefix``."""
        return cls(agents=f"{{{prefix}:{encode_id(session_id)}}}:agents", sessions=cls.index(prefix))

    @staticmethod
    def index(prefix: str) -> str:
        """The sorted set of every session under ``prefix``."""
        return f"{prefix}:sessions"
