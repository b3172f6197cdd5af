"""contextledger through its Pydantic AI storage: ``LedgerHistory.extend`` and ``messages()`` on SQLite.

The same turns as ``pydantic_ai_json`` (Pydantic AI's recommended JSON rows): a turn is
``extend(result.new_messages())`` of four messages (one commit); a restore is
``messages()`` of a new history object on the same ledger (it reads the conversation's
state, takes the view the ledger shares when nothing moved, its default, and rebuilds
every message with the adapter, the unchanged ones in one call).
"""

from __future__ import annotations

from typing import Any

from contenders._async_host import AsyncHostContender
from contenders._pai_turns import messages_of
from contextledger.aio import AsyncLedger
from contextledger.integrations.pydantic_ai import LedgerHistory


class LedgerHistoryContender(AsyncHostContender):
    """``LedgerHistory`` on a SQLite ledger (the async API, aiosqlite)."""

    def open(self, ledger: AsyncLedger, session: str) -> LedgerHistory:
        return LedgerHistory(session, ledger=ledger)

    def turn(self, session: str, n: int) -> Any:
        return messages_of(session, n)

    async def add(self, host: Any, turn: Any) -> None:
        await host.extend(turn)

    async def read(self, ledger: AsyncLedger, host: Any) -> Any:
        # A history object of its own, as each request of a server makes: nothing rendered yet.
        return await LedgerHistory(self.session, ledger=ledger).messages()
