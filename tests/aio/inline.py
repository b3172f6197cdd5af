"""What the inline tests share: which backends append inline, and a ledger with a question asked."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from contextledger import Message
from contextledger.aio import AsyncConversation, AsyncLedger

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
