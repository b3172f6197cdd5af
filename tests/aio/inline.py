"""What the inline tests share: which backends append inline, and a ledger with a question asked."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import pytest

from contextledger import Message
from contextledger.aio import AsyncConversation, AsyncLedger

T = TypeVar("T")

INLINE_BACKENDS = ("memory", "sqlite")
"""The ``backend_url`` parameters whose stores commit without waiting on a network."""


def inline_capable(request: pytest.FixtureRequest) -> bool:
    """Whether the test runs on a backend of :data:`INLINE_BACKENDS` (its ``backend_url`` parameter)."""
    return str(request.node.callspec.params["backend_url"]) in INLINE_BACKENDS


@asynccontextmanager
async def asked(
    url: str, options: dict[str, Any], session: str
) -> AsyncIterator[tuple[AsyncLedger, AsyncConversation]]:
    """A ledger at ``url`` (inline where it may be, its default) and ``session``'s conversation, ``q0`` appended."""
    ledger = await AsyncLedger.connect(url, **options)
    try:
        conversation = await ledger.conversation(session)
        await conversation.append(Message.user("q0"))
        yield ledger, conversation
    finally:
        await ledger.close()


async def hops(ledger: AsyncLedger, call: Awaitable[T]) -> tuple[T, tuple[int, int]]:
    """Await ``call``: its result, and how the ledger ran it (calls handed to a worker, calls run inline)."""
    calls, inline = ledger.runner.calls, ledger.runner.inline
    result = await call
    return result, (ledger.runner.calls - calls, ledger.runner.inline - inline)


def one_call(inline_store: bool) -> tuple[int, int]:
    """What :func:`hops` gives for one call: inline where the store commits without waiting, else one worker call."""
    return (0, 1) if inline_store else (1, 0)
