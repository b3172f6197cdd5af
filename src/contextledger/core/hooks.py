"""Hook events and the registry that dispatches them.

Conversation managers are hook providers (the seed design): registering a manager
subscribes it to the events it needs; the null manager registers nothing.

An event carries a read-only :class:`ConversationContext` -- the view, the model-call
count, the projected input tokens, the context-window limit, the error -- never the
live conversation. A callback that wants the context reduced *requests* it
(:meth:`HookEvent.request_reduction`); once every callback has run, the
:class:`~contextledger.Conversation` plans each request once and commits it once.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from contextledger.core.changeset import ReductionRequest
from contextledger.core.view import View
from contextledger.errors import ConfigurationError
from contextledger.model.messages import Message
from contextledger.model.records import TRIGGERS, Trigger

__all__ = [
    "AfterInvocationEvent",
    "AfterModelCallEvent",
    "BeforeModelCallEvent",
    "ConversationContext",
    "HookEvent",
    "HookProvider",
    "HookRegistry",
    "MessageAddedEvent",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConversationContext:
    """What a callback may read of the conversation at the time of the event.

    Attributes:
        session_id: The session.
        agent_id: The agent.
        view: The active view (immutable).
        model_call_count: Model calls so far (the one about to be made included).
        projected_input_tokens: Last reported usage plus an estimate of what was added since.
        context_window_limit: The model's context window, when the host knows it.
        error: The model error of an :class:`AfterModelCallEvent`.
        overflow: Whether ``error`` is a context-window overflow for this conversation.
        version: The version the view was read at.
    """

    session_id: str
    agent_id: str
    view: View
    model_call_count: int = 0
    projected_input_tokens: int | None = None
    context_window_limit: int | None = None
    error: BaseException | None = None
    overflow: bool = False
    version: int = 0


@dataclass
class HookEvent:
    """Base of every event: the read-only context, and the reductions callbacks request."""

    context: ConversationContext
    requests: list[ReductionRequest] = field(default_factory=list, init=False, repr=False)

    def request_reduction(self, trigger: Trigger, **options: Any) -> ReductionRequest:
        """Ask the conversation to reduce once every callback has run.

        Args:
            trigger: Why (``per_turn``, ``proactive``, ``reactive``, ...).
            **options: :class:`~contextledger.core.changeset.ReductionRequest` fields that
                override the context's (e.g. ``threshold=0.7``).

        Returns:
            The request as queued; the conversation fills in the rest when it plans.

        Raises:
            ConfigurationError: ``trigger`` is not a known trigger, or an option is not a
                request field.
        """
        if trigger not in TRIGGERS:
            raise ConfigurationError(f"unknown trigger {trigger!r}; one of {', '.join(TRIGGERS)}")
        context = self.context
        values: dict[str, Any] = {
            "trigger": trigger,
            "model_call_count": context.model_call_count,
            "projected_input_tokens": context.projected_input_tokens,
            "context_window_limit": context.context_window_limit,
            "error": None if context.error is None else f"{type(context.error).__name__}: {context.error}",
        }
        unknown = set(options) - set(ReductionRequest.model_fields)
        if unknown:
            raise ConfigurationError(f"unknown reduction request option(s) {sorted(unknown)}")
        request = ReductionRequest(**{**values, **options})
        self.requests.append(request)
        return request


@dataclass
class MessageAddedEvent(HookEvent):
    """Fired after a message was appended and committed."""

    message: Message = field(kw_only=True)


@dataclass
class BeforeModelCallEvent(HookEvent):
    """Fired before each model call, after ``model_call_count`` was incremented."""

    @property
    def projected_input_tokens(self) -> int | None:
        """Last reported usage plus an estimate of what was added since."""
        return self.context.projected_input_tokens

    @property
    def context_window_limit(self) -> int | None:
        """The model's context window, when the host knows it."""
        return self.context.context_window_limit


@dataclass
class AfterModelCallEvent(HookEvent):
    """Fired after each model call.

    A callback sets ``retry_model_call = True`` to ask the host to call the model again
    after an ``error``; setting it without an error is refused. A reactive reduction
    a callback requested sets it itself once the reduction is committed.
    """

    _retry: bool = field(default=False, init=False, repr=False)

    @property
    def error(self) -> BaseException | None:
        """The model call's error, if it failed."""
        return self.context.error

    @property
    def retry_model_call(self) -> bool:
        """Whether a callback asked for the model call to be retried."""
        return self._retry

    @retry_model_call.setter
    def retry_model_call(self, value: bool) -> None:
        if value and self.context.error is None:
            raise ValueError("retry_model_call is only valid when the model call failed (error is set)")
        self._retry = bool(value)


@dataclass
class AfterInvocationEvent(HookEvent):
    """Fired when the host finished one invocation (one user request)."""


E = TypeVar("E", bound=HookEvent)
Callback = Callable[[Any], None]


@runtime_checkable
class HookProvider(Protocol):
    """Anything that subscribes callbacks to a :class:`HookRegistry`."""

    def register_hooks(self, registry: HookRegistry) -> None:
        """Add this provider's callbacks to ``registry``."""
        ...


class HookRegistry:
    """Ordered callbacks per event type; callbacks run in registration order."""

    def __init__(self) -> None:
        """Create an empty registry."""
        self._callbacks: defaultdict[type[HookEvent], list[Callback]] = defaultdict(list)
        # has_callbacks' answers, per event type, until the next subscription (asked on every append).
        self._has: dict[type[HookEvent], bool] = {}

    def add_callback(self, event_type: type[E], callback: Callable[[E], None]) -> None:
        """Subscribe ``callback`` to ``event_type`` (and its subclasses)."""
        self._callbacks[event_type].append(callback)
        # A new dict, not clear(): an answer worked out meanwhile (before this callback was
        # in) lands in the old one, so it is never remembered past this subscription.
        self._has = {}

    def add_hook(self, provider: HookProvider) -> None:
        """Let ``provider`` register its callbacks.

        Raises:
            TypeError: ``provider`` is not a :class:`HookProvider`.
        """
        if not isinstance(provider, HookProvider):
            raise TypeError(f"{provider!r} is not a HookProvider (no register_hooks)")
        provider.register_hooks(self)

    def callbacks_for(self, event: HookEvent) -> list[Callback]:
        """The callbacks an event of this type triggers, in order."""
        return self.subscribers(type(event))

    def subscribers(self, event_type: type[HookEvent]) -> list[Callback]:
        """The callbacks an event of ``event_type`` triggers, in order (without an event at hand)."""
        found: list[Callback] = []
        for subscribed, callbacks in self._callbacks.items():
            if issubclass(event_type, subscribed):
                found.extend(callbacks)
        return found

    def has_callbacks(self, event_type: type[HookEvent]) -> bool:
        """Whether any callback is subscribed to ``event_type``."""
        has = self._has  # read before the callbacks are: see add_callback
        known = has.get(event_type)
        if known is None:
            known = has[event_type] = any(
                [callbacks and issubclass(event_type, subscribed) for subscribed, callbacks in self._callbacks.items()]
            )
        return known

    def heard_only_by(self, event_type: type[HookEvent], *owners: object) -> bool:
        """Whether every callback ``event_type`` triggers is a method of one of ``owners`` (or none is subscribed).

        The async API runs a call inline when only the conversation's manager hears the
        event it fires: a manager's callbacks request reductions and never block.
        """
        if not self.has_callbacks(event_type):
            return True
        known = [owner for owner in owners if owner is not None]
        return all(
            [
                any(getattr(callback, "__self__", None) is owner for owner in known)
                for callback in self.subscribers(event_type)
            ]
        )

    def invoke(self, event: E) -> E:
        """Run every callback subscribed to the event's type and return the event."""
        for callback in self.callbacks_for(event):
            callback(event)
        return event
