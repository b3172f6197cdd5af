"""Done when: a LangChain agent with tools and an overflow is SIGKILLed mid-tool; a new process continues.

The first process is a real subprocess killed with SIGKILL while a tool runs; the second
starts from the ledger alone. Every model call of both, as the model received it, is
what ``view_at`` gives back; ``contextledger show`` and the web view show the session.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage, messages_from_dict

from contextledger import Ledger
from contextledger.integrations.langchain import from_view
from tests.langchain.child import SESSION
from tests.reliability.killed_host import assert_inspectors_show, assert_recorded_reductions, kill_then_resume


@pytest.mark.slow
def test_killed_mid_tool_then_a_new_process_continues_and_every_call_is_on_record(
    tmp_path: Path, sqlite_url: str
) -> None:
    kill_then_resume("tests.langchain.child", sqlite_url, tmp_path)

    calls = [messages_from_dict(json.loads(line)) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    with Ledger.connect(sqlite_url) as ledger:
        conversation = ledger.conversation(SESSION)
        assert conversation.model_call_count == len(calls) == 6  # 5 in the killed process (one overflowed), 1 after
        for n, received in enumerate(calls, start=1):
            assert from_view(ledger.view_at(SESSION, model_call=n)) == received, f"model call {n}"
        assert_recorded_reductions(ledger, SESSION)
        # The new process's model got the interrupted call answered by the repair, then the new prompt.
        repaired = [m for m in calls[-1] if isinstance(m, ToolMessage) and m.tool_call_id == "call-b2"]
        assert [m.status for m in repaired] == ["error"]
        assert calls[-1][-1].content == "Any news on B-2?"
        final = messages_from_dict(json.loads((tmp_path / "resumed.json").read_text()))
        assert final == from_view(conversation.view)
        assert_inspectors_show(ledger, SESSION, sqlite_url, [str(m.id) for m in final])
