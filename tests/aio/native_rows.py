"""What the native-append tests of each store check the same way: the rows stored against the sync API's."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from contextledger import Ledger, Message
from contextledger.aio import AsyncConversation, AsyncLedger
from contextledger.model.records import HistoryEntry


def text(message: Message) -> str:
    """The first text block of ``message``."""
    return str(message.content[0]["text"])


def rows(entries: list[HistoryEntry]) -> list[tuple[int, str, str, int]]:
    """What a history row stores, but the clock."""
    return [(r.seq, r.message.message_id, r.message.model_dump_json(exclude={"created_at"}), r.tokens) for r in entries]


def native_and_sync(
    url: str, options: dict[str, Any], turns: list[list[str]], sent: Callable[[AsyncLedger], int]
) -> tuple[int, list[HistoryEntry], list[HistoryEntry]]:
    """Append ``turns`` natively (async) and with the sync API to two conversations of the store at ``url``.

    Returns:
        How many commits were sent natively (``sent`` reads it from the async ledger),
        and the two conversations' history rows.
    """
    tag = uuid.uuid4().hex[:8]

    def turn_messages(n: int, texts: list[str]) -> list[Message]:
        return [Message.user(t, message_id=f"m-{n}-{k}") for k, t in enumerate(texts)]

    async def native() -> int:
        async with await AsyncLedger.connect(url, native=True, **options) as ledger:
            conversation = await ledger.conversation(f"a-{tag}")
            for n, texts in enumerate(turns):
                await conversation.append(*turn_messages(n, texts))
            return sent(ledger)

    count = asyncio.run(native())
    with Ledger.connect(url, **options) as ledger:
        sync = ledger.conversation(f"s-{tag}")
        for n, texts in enumerate(turns):
            sync.append(*turn_messages(n, texts))
        return count, ledger.history(f"a-{tag}"), ledger.history(f"s-{tag}")


def appends_without_a_hop(
    url: str, options: dict[str, Any], native: bool | None, sent: Callable[[AsyncLedger], int]
) -> None:
    """Five appends after the first each send one commit natively and hand nothing to a worker; all stored."""

    async def main() -> list[Message]:
        async with await AsyncLedger.connect(url, native=native, **options) as ledger:
            conversation = await ledger.conversation("native")
            await conversation.append(Message.user("first"))  # creating the conversation: on a worker
            for n in range(5):
                calls, before = ledger.runner.calls, sent(ledger)
                await conversation.append(Message.user(f"q{n}"), Message.assistant(f"a{n}"))
                assert (ledger.runner.calls, sent(ledger)) == (calls, before + 1)  # one send, no hand-over
            return conversation.messages

    messages = asyncio.run(main())
    with Ledger.connect(url, **options) as ledger:
        assert [text(m) for m in ledger.conversation("native").messages] == [text(m) for m in messages]
        assert len(messages) == 11


def count_postgres_connects(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the native PostgreSQL connections made from now on: one item appended per connection."""
    from contextledger.stores.sql.write.pg_asend import NativeSend

    made: list[int] = []
    connect = NativeSend._connect

    async def counted(self: NativeSend) -> Any:
        made.append(1)
        return await connect(self)

    monkeypatch.setattr(NativeSend, "_connect", counted)
    return made


async def with_a_native_connection(ledger: AsyncLedger, session_id: str) -> AsyncConversation:
    """A conversation of ``ledger`` two appends old ("one", "two"): the loop's native connection exists now."""
    conversation = await ledger.conversation(session_id)
    await conversation.append(Message.user("one"))  # creating the conversation: on a worker
    await conversation.append(Message.user("two"))  # sent natively: the loop's connection is made
    return conversation
