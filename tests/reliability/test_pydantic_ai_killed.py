"""Done when: a Pydantic AI agent with tools and an overflow is SIGKILLed mid-tool; a new process continues.

The first process is a real subprocess killed with SIGKILL while a tool runs; the second
starts from the ledger alone. Every model call of both, as the model received it, is
what ``view_at`` gives back; ``contextledger show`` and the web view show the session.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelRequest, ToolReturnPart, UserPromptPart, repair_messages

from contextledger import Ledger
from contextledger.integrations.pydantic_ai import dump, from_view
from tests.pydantic_ai.child import SESSION
from tests.reliability.killed_host import assert_inspectors_show, assert_recorded_reductions, kill_then_resume


@pytest.mark.slow
def test_killed_mid_tool_then_a_new_process_continues_and_every_call_is_on_record(
    tmp_path: Path, sqlite_url: str
) -> None:
    kill_then_resume("tests.pydantic_ai.child", sqlite_url, tmp_path)

    calls = [
        ModelMessagesTypeAdapter.validate_json(line) for line in (tmp_path / "calls.jsonl").read_bytes().splitlines()
    ]
    with Ledger.connect(sqlite_url) as ledger:
        conversation = ledger.conversation(SESSION)
        assert conversation.model_call_count == len(calls) == 6  # 5 in the killed process (one overflowed), 1 after
        for n, received in enumerate(calls, start=1):
            # As Pydantic AI sends a history: the repair's tool return and the new prompt go as one request.
            sent = repair_messages(from_view(ledger.view_at(SESSION, model_call=n)))
            assert dump(sent) == dump(received), f"model request {n}"
        assert_recorded_reductions(ledger, SESSION)
        # The new process's model got the interrupted call answered by the repair, then the new prompt.
        parts = [p for m in calls[-1] if isinstance(m, ModelRequest) for p in m.parts]
        repaired = [p for p in parts if isinstance(p, ToolReturnPart) and p.tool_call_id == "call-b2"]
        assert [p.outcome for p in repaired] == ["failed"]
        assert isinstance(parts[-1], UserPromptPart)
        assert parts[-1].content == "Any news on B-2?"
        final = ModelMessagesTypeAdapter.validate_json((tmp_path / "resumed.json").read_bytes())
        assert dump(final) == dump(from_view(conversation.view))
        assert_inspectors_show(ledger, SESSION, sqlite_url, [e.entry_id for e in conversation.view])
