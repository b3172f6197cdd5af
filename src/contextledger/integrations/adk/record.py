"""What the ledger keeps of an ADK session besides its events, and how ADK's state deltas split.

The conversation's host state (``agent_state["adk"]``) is the session's record: its ADK
ids, its session-scoped state, the time and event of its last update (ADK's stale-session
check), and the time ranges of the ADK compactions whose summaries are in the view. It
moves with every event in the same commit, so an event and the state change it carries
are stored together or not at all.

ADK's state keys are scoped by prefix: ``app:`` keys are shared by every session of the
app and ``user:`` keys by every session of a user (both live in the ledger's app and user
state, see :meth:`~contextledger.Ledger.app_state`), ``temp:`` keys are never stored, and
the rest belong to the session.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from google.adk.sessions import State
from pydantic_core import to_jsonable_python

from contextledger.errors import CorruptRecord, InvalidMessage

__all__ = ["RECORD_KEY", "SessionRecord", "StateDeltas", "merged_state", "split_state"]

RECORD_KEY = "adk"
"""``agent_state[RECORD_KEY]`` holds the :class:`SessionRecord`."""


@dataclass(frozen=True)
class StateDeltas:
    """A state (or state delta) split by scope; ``temp:`` keys are dropped."""

    app: dict[str, Any] = field(default_factory=dict)
    user: dict[str, Any] = field(default_factory=dict)
    session: dict[str, Any] = field(default_factory=dict)


def split_state(state: Mapping[str, Any] | None) -> StateDeltas:
    """Split ADK state by its key prefixes, as JSON (a value JSON has no form for becomes its JSON form).

    Values are coerced the way ADK's own database service coerces them before storing
    (``to_jsonable_python``; a value with no JSON form at all becomes its ``str``).

    Raises:
        InvalidMessage: A value cannot be made JSON even so (it holds itself).
    """
    deltas = StateDeltas()
    for key, value in (state or {}).items():
        if key.startswith(State.TEMP_PREFIX):
            continue
        stored = _json(key, value)
        if key.startswith(State.APP_PREFIX):
            deltas.app[key.removeprefix(State.APP_PREFIX)] = stored
        elif key.startswith(State.USER_PREFIX):
            deltas.user[key.removeprefix(State.USER_PREFIX)] = stored
        else:
            deltas.session[key] = stored
    return deltas


def _json(key: str, value: Any) -> Any:
    try:
        return to_jsonable_python(value, inf_nan_mode="null")
    except Exception:  # pydantic_core raises its own errors; the fallback below decides
        pass
    try:
        return to_jsonable_python(value, inf_nan_mode="null", fallback=str)
    except ValueError as exc:  # a value holding itself has no JSON form, not even through str
        raise InvalidMessage(f"ADK state key {key!r} cannot be stored as JSON: {exc}") from exc


def merged_state(app: Mapping[str, Any], user: Mapping[str, Any], session: Mapping[str, Any]) -> dict[str, Any]:
    """The state an ADK session shows: its own keys, then ``app:`` and ``user:`` keys (copies)."""
    out = copy.deepcopy(dict(session))
    out.update({State.APP_PREFIX + k: copy.deepcopy(v) for k, v in app.items()})
    out.update({State.USER_PREFIX + k: copy.deepcopy(v) for k, v in user.items()})
    return out


@dataclass(frozen=True)
class SessionRecord:
    """The ADK facts of one session the ledger keeps in its conversation's host state.

    Attributes:
        app_name: The ADK app.
        user_id: The ADK user.
        session_id: The ADK session id.
        state: The session-scoped state (no ``app:``, ``user:`` or ``temp:`` keys).
        last_update_time: When the session was last updated, as ADK counts it (the
            timestamp of its last event, or its creation).
        last_event_id: The id of its last event (``None`` before the first).
        compactions: Summary id -> ``[start, end]`` timestamps of each ADK compaction
            whose summary is in the view (a later compaction covering that range
            supersedes it, as ADK's own rendering does).
    """

    app_name: str
    user_id: str
    session_id: str
    state: dict[str, Any]
    last_update_time: float
    last_event_id: str | None = None
    compactions: dict[str, list[float]] = field(default_factory=dict)

    def dump(self) -> dict[str, Any]:
        """The host state to commit."""
        return {
            RECORD_KEY: {
                "app_name": self.app_name,
                "user_id": self.user_id,
                "session_id": self.session_id,
                "state": copy.deepcopy(self.state),
                "last_update_time": self.last_update_time,
                "last_event_id": self.last_event_id,
                "compactions": copy.deepcopy(self.compactions),
            }
        }

    @classmethod
    def of(cls, agent_state: Mapping[str, Any] | None, where: str) -> SessionRecord | None:
        """The record in a conversation's host state, or ``None`` when it holds none.

        Raises:
            CorruptRecord: The host state holds a record that is not one.
        """
        raw = (agent_state or {}).get(RECORD_KEY)
        if raw is None:
            return None
        try:
            return cls(
                app_name=str(raw["app_name"]),
                user_id=str(raw["user_id"]),
                session_id=str(raw["session_id"]),
                state=copy.deepcopy(dict(raw["state"])),
                last_update_time=float(raw["last_update_time"]),
                last_event_id=raw.get("last_event_id"),
                compactions={str(k): [float(v[0]), float(v[1])] for k, v in dict(raw.get("compactions") or {}).items()},
            )
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise CorruptRecord(f"not an ADK session record: {exc}", where=where) from exc
