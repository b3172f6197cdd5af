"""contextledger through LangChain's chat history interface: ``LedgerChatMessageHistory`` on SQLite.

The same turns and the same calls as ``langchain_history`` (``SQLChatMessageHistory``):
a turn is ``add_messages`` of four messages (one commit); a restore is ``.messages`` of a
new history object on the same ledger: it reads the conversation's state, takes the view
the ledger shares when nothing moved (its default) and the renderer kept with it, and
hands out copies of the LangChain messages rendered for that view before (the peer
builds every message from its table each time).
"""

from __future__ import annotations

import warnings
from typing import Any

from _protocol import Contender, NotApplicable, host_workload, start, stop, timed_read
from contenders._files import stored_bytes
from contenders._lc_turns import messages_of
from contextledger import Ledger
from contextledger.integrations.langchain import LedgerChatMessageHistory

warnings.filterwarnings("ignore", message=".*deprecated.*")  # LangChain deprecates the interface it measures


class LedgerChatHistoryContender(Contender):
    """``LedgerChatMessageHistory`` on a SQLite ledger."""

    def __init__(self) -> None:
        self.ledger: Ledger | None = None
        self.history: LedgerChatMessageHistory | None = None
        self.workload = ""
        self.session = ""
        self.path = ""

    def setup(self, workload: str, params: dict[str, Any]) -> dict[str, Any]:
        self.session, self.path = host_workload(workload, params)
        self.workload = workload
        self.ledger = Ledger.connect(str(params["url"]))
        self.history = LedgerChatMessageHistory(self.session, ledger=self.ledger)
        count = int(params["entries"]) // 4 if workload == "restore_wide" else int(params.get("turns", 0))
        for n in range(count):
            self.history.add_messages(messages_of(self.session, n))
        return {}

    def step(self, n: int) -> float:
        assert self.history is not None
        if self.workload == "append":
            messages = messages_of(self.session, n)
            t0 = start()
            self.history.add_messages(messages)
            return stop(t0)
        if self.workload == "restore_wide":
            assert self.ledger is not None
            ledger = self.ledger
            # A history object of its own, as RunnableWithMessageHistory makes per call (the view and
            # the renderer are the ones the ledger keeps, the state read first).
            return timed_read(lambda: LedgerChatMessageHistory(self.session, ledger=ledger).messages)
        raise NotApplicable(f"nothing to time in {self.workload}")

    def measure(self) -> Any:
        return stored_bytes(self.workload, self.close, self.path)

    def close(self) -> None:
        if self.ledger is not None:
            self.ledger.close()
            self.ledger = None
