"""Hook events and the registry that dispatches them.

Conversation managers are hook providers (the seed design): registering a manager
subscribes it to the events it needs; the null manager registers nothing.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from contextledger.messages import Message

if TYPE_CHECKING:
    from contextledger.conversation import Conversation

__all__ = [
    "AfterInvocationEvent",
    "AfterModelCallEvent",
    "BeforeModelCallEvent",
    "HookEvent",
    "HookProvider",
    "HookRegistry",
    "MessageAddedEvent",
]

logger = logging.getLogger(__name__)


@dataclass
class HookEvent:
    """Base of every event; carries the conversation it concerns."""

    conversation: Conversation


@dataclass
class MessageAddedEvent(HookEvent):
    """Fired after a message was appended and committed."""

    message: Message


@dataclass
class BeforeModelCallEvent(HookEvent):
    """Fired before each model call, after ``model_call_count`` was incremented.

    Attributes:
        projected_input_tokens: Last reported usage plus an estimate of what was added since.
        context_window_limit: The model's context window, when the host knows it.
    """

    projected_input_tokens: int | None = None
    context_window_limit: int | None = None


@dataclass
class AfterModelCallEvent(HookEvent):
    """Fired after each model call.

    A callback that reduced the context after an ``error`` sets ``retry_model_call = True``
    to ask the host to call the model again. Setting it without an error is refused.
    """

    error: BaseException | None = None
    _retry: bool = field(default=False, repr=False)

    @property
    def retry_model_call(self) -> bool:
        """Whether a callback asked for the model call to be retried."""
        return self._retry

    @retry_model_call.setter
    def retry_model_call(self, value: bool) -> None:
        if value and self.error is None:
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

    def add_callback(self, event_type: type[E], callback: Callable[[E], None]) -> None:
        """Subscribe ``callback`` to ``event_type`` (and its subclasses)."""
        self._callbacks[event_type].append(callback)

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
        found: list[Callback] = []
        for event_type, callbacks in self._callbacks.items():
            if isinstance(event, event_type):
                found.extend(callbacks)
        return found

    def has_callbacks(self, event_type: type[HookEvent]) -> bool:
        """Whether any callback is subscribed to ``event_type``."""
        return any(issubclass(event_type, t) and cbs for t, cbs in self._callbacks.items())

    def invoke(self, event: E) -> E:
        """Run every callback subscribed to the event's type and return the event."""
        for callback in self.callbacks_for(event):
            callback(event)
        return event
