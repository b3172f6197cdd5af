"""contextledger's ``LedgerSessionService`` for Google ADK, through ADK's public API (``contenders/adk.py``'s steps).

The service is opened from the URL the harness gives, on the asyncio drivers, as an ADK
application opens it; each turn is four ``append_event`` (four commits, as ADK makes
them) and a restore ``get_session`` (every event; the service's ledger shares the view
its conversations last held, its default, taken when the stored state says nothing moved).
"""

from __future__ import annotations

from typing import Any

from contenders.adk import SessionServiceContender
from contextledger.integrations.adk import LedgerSessionService


class LedgerSessionContender(SessionServiceContender):
    """``LedgerSessionService`` on SQLite, PostgreSQL or Redis."""

    def make(self, params: dict[str, Any]) -> Any:
        url = str(params["url"])
        options: dict[str, Any] = {"auto_upgrade": True} if url.startswith("postgres") else {}
        if url.startswith("redis"):
            options["key_prefix"] = str(params.get("key_prefix", "clbench"))
        return LedgerSessionService(url, **options)

    def close(self) -> None:
        if self.service is not None:
            self.run(self.service.close())
            self.service = None
