"""Checks of the arguments a :class:`~contextledger.Conversation` is opened with and driven by."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from contextledger.errors import ConfigurationError, InvalidMessage
from contextledger.model.jsonvalues import check_plain_json
from contextledger.model.messages import check_id, normalize_json
from contextledger.model.records import TRIGGERS

__all__ = [
    "check_agent_state",
    "check_conversation_options",
    "check_limit",
    "check_owner",
    "check_scope_delta",
    "check_trigger",
]


def check_limit(limit: object) -> None:
    """Raise unless ``limit`` is a positive int or ``None``.

    Raises:
        ConfigurationError: It is not.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigurationError(f"context_window_limit must be a positive int or None, got {limit!r}")


def check_trigger(trigger: object) -> None:
    """Raise unless ``trigger`` is a known trigger.

    Raises:
        ConfigurationError: It is not.
    """
    if trigger not in TRIGGERS:
        raise ConfigurationError(f"unknown trigger {trigger!r}; one of {', '.join(TRIGGERS)}")


def check_conversation_options(
    session_id: object,
    agent_id: object,
    *,
    is_manager: bool,
    manager: object,
    token_counter: object,
    context_window_limit: object,
    max_retries: object,
    overflow_errors: tuple[object, ...],
) -> None:
    """Validate what a conversation is opened with.

    Raises:
        ConfigurationError: An id is not a non-empty string, ``manager`` is not a
            conversation manager, ``token_counter`` has no ``count``,
            ``context_window_limit`` is not a positive int, ``max_retries`` is negative
            or ``overflow_errors`` holds something that is not an exception type.
    """
    if not (isinstance(session_id, str) and session_id and isinstance(agent_id, str) and agent_id):
        raise ConfigurationError(
            f"session_id and agent_id must be non-empty strings, got {session_id!r} and {agent_id!r}"
        )
    check_id(session_id, "session_id")
    check_id(agent_id, "agent_id")
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ConfigurationError(f"max_retries must be an int >= 0, got {max_retries!r}")
    if manager is not None and not is_manager:
        raise ConfigurationError(
            f"manager must be a ConversationManager (e.g. SlidingWindowConversationManager), got {manager!r}"
        )
    if token_counter is not None and not callable(getattr(token_counter, "count", None)):
        raise ConfigurationError(f"token_counter must have a count(message) method, got {token_counter!r}")
    check_limit(context_window_limit)
    if not all(isinstance(e, type) and issubclass(e, BaseException) for e in overflow_errors):
        raise ConfigurationError(f"overflow_errors must be exception types, got {overflow_errors!r}")


def check_owner(app: object, user: object) -> None:
    """Validate the app and user a session is created for (each ``None`` or a non-empty id).

    Raises:
        ConfigurationError: ``app`` or ``user`` is not ``None`` or a non-empty string
            (without a lone surrogate, at most 255 characters).
    """
    for name, value in (("app", app), ("user", user)):
        if value is None:
            continue
        if not isinstance(value, str) or not value:
            raise ConfigurationError(f"{name} must be None or a non-empty string, got {value!r}")
        check_id(value, name)


def check_scope_delta(delta: object, what: str) -> dict[str, Any]:
    """The key/value changes of an app's or a user's state as they will be stored (JSON-normalized).

    Raises:
        InvalidMessage: ``delta`` is not a mapping, has a key that is not a non-empty
            string of at most 255 characters, or holds a value JSON cannot store.
    """
    if not isinstance(delta, Mapping):
        raise InvalidMessage(f"{what} must be a mapping, got {type(delta).__name__}")
    for key in delta:
        if not isinstance(key, str) or not key:
            raise InvalidMessage(f"{what} keys are non-empty strings, got {key!r:.40}")
        try:
            check_id(key, f"{what} key")
        except ConfigurationError as exc:
            raise InvalidMessage(str(exc)) from exc
    snapshot: dict[str, Any] = normalize_json(dict(delta), what)
    try:  # plain JSON only: every store keeps these values as JSON text
        json.dumps(snapshot, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidMessage(f"{what} cannot be stored as JSON: {exc}") from exc
    return snapshot


def check_agent_state(state: object) -> dict[str, Any]:
    """The host key/value ``state`` as it will be stored (JSON-normalized).

    Raises:
        InvalidMessage: ``state`` is not a mapping, has a key that is not a string, or
            holds a value JSON cannot store (bytes included: see
            :func:`~contextledger.model.jsonvalues.check_plain_json`).
    """
    if not isinstance(state, Mapping):
        raise InvalidMessage(f"agent state must be a mapping, got {type(state).__name__}")
    for key in state:
        if not isinstance(key, str):
            raise InvalidMessage(f"agent state keys are strings, got {type(key).__name__} {key!r:.40}")
    snapshot: dict[str, Any] = normalize_json(dict(state), "agent state", coerce_keys=True)
    check_plain_json(snapshot, "agent state")
    return snapshot
