"""Strands' ``FileSessionManager``: one JSON file per message (its public repository API).

What ``FileSessionManager.append_message`` does for an agent's message is
``create_message`` with the message's index; a restore is ``list_messages`` (what the
session manager runs when an agent is initialised) and ``to_message`` of each.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from strands.session.file_session_manager import FileSessionManager
from strands.types.session import SessionAgent, SessionMessage

from _protocol import Contender, NotApplicable, start, stop, turn
from contenders._files import tree_bytes

AGENT = "agent"


class StrandsFile(Contender):
    """``FileSessionManager`` in a directory of its own; files written as Strands writes them."""

    def __init__(self) -> None:
        self.manager: FileSessionManager | None = None
        self.workload = ""
        self.session = ""
        self.directory = ""
        self.index = 0

    def setup(self, workload: str, params: dict[str, Any]) -> dict[str, Any]:
        if workload not in ("append", "restore_wide", "storage"):
            raise NotApplicable(
                "keeps no ledger: a window over a longer history, reductions and hooks are not stored"
                if workload in ("restore_window", "reduction", "before_model_call")
                else f"no {workload} workload"
            )
        self.workload = workload
        self.session = str(params["session"])
        self.directory = str(params["directory"])
        if os.path.exists(self.directory):
            shutil.rmtree(self.directory)
        self.manager = manager = FileSessionManager(session_id=self.session, storage_dir=self.directory)
        manager.create_agent(self.session, SessionAgent(agent_id=AGENT, state={}, conversation_manager_state={}))
        if workload == "restore_wide":
            for n in range(int(params["entries"]) // 4):
                self.write(self.native(n))
        elif workload == "storage":
            for n in range(int(params["turns"])):
                self.write(self.native(n))
        return {"files": "one JSON file per message, no fsync"}

    def native(self, n: int) -> list[SessionMessage]:
        out = []
        for message in turn(self.session, n):
            out.append(SessionMessage.from_message(message, self.index))  # type: ignore[arg-type]
            self.index += 1
        return out

    def write(self, messages: list[SessionMessage]) -> None:
        assert self.manager is not None
        for message in messages:
            self.manager.create_message(self.session, AGENT, message)

    def step(self, n: int) -> float:
        if self.workload == "append":
            messages = self.native(n)
            t0 = start()
            self.write(messages)
            return stop(t0)
        if self.workload == "restore_wide":
            t0 = start()
            manager = FileSessionManager(session_id=self.session, storage_dir=self.directory)
            restored = [m.to_message() for m in manager.list_messages(self.session, AGENT)]
            elapsed = stop(t0)
            assert restored
            return elapsed
        raise NotApplicable(f"nothing to time in {self.workload}")

    def measure(self) -> Any:
        if self.workload != "storage":
            raise NotApplicable("bytes are counted on the storage workload")
        return tree_bytes(self.directory)
