"""A summary says what it covers, and keeps the newest facts, however long the conversation."""

from __future__ import annotations

import pytest

from contextledger import Conversation, Message, SummarizingConversationManager
from contextledger.stores.base import LedgerStore
from tests.managers.helpers import backend_store, model_call
from tests.managers.truth import covered, stated


def support_turn(conv: Conversation, n: int) -> None:
    """One support-desk turn: a prompt, a tool call and its result, an answer (two model calls)."""
    order = f"A-{1040 + n}"
    conv.append(Message.user(f"[turn {n}] Order {order} is also damaged: two of the six lamps have cracked shades."))
    model_call(conv)
    conv.append(Message.tool_use(f"t{n}", "lookup_order", {"order": order}, text=f"Calling lookup_order for turn {n}."))
    items = ", ".join(f'{{"sku": "LMP-{200 + i}", "qty": 1, "status": "delivered"}}' for i in range(6))
    conv.append(Message.tool_result(f"t{n}", f'{{"order": "{order}", "carrier": "DHL", "items": [{items}]}}'))
    model_call(conv)
    conv.append(Message.assistant(f"I see order {order}: six lamps. Replacement ticket RMA-{7000 + n} is open."))


def support_manager() -> SummarizingConversationManager:
    """The demo's support desk: proactive summaries by the offline summarizer, the first message protected."""
    return SummarizingConversationManager(
        summary_ratio=0.5,
        preserve_recent_messages=4,
        proactive_compression={"compression_threshold": 0.6},
        protected_messages={"first": 1},
    )


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_after_250_turns_the_summary_tells_what_it_covers_and_keeps_the_newest_facts(
    request: pytest.FixtureRequest, backend: str
) -> None:
    store: LedgerStore = backend_store(request, backend)
    conv = Conversation(store, "desk", "support", manager=support_manager(), context_window_limit=2000)
    for n in range(1, 251):
        support_turn(conv, n)
    (summary,) = [s for s in store.summaries("desk", "support") if s.status == "active"]
    truth = covered(store, "desk", "support", summary.summary_id)
    assert truth.messages > 900  # nearly the whole conversation sits behind the one summary
    assert truth.last_turn is not None
    assert truth.last_turn > 240
    # The header states exactly what the ledger says it covers.
    assert stated(summary.content) == truth, summary.content[:300]
    # The newest covered turn is in the text, not only the oldest ones.
    newest = truth.last_turn
    assert f"- turn {newest}, " in summary.content, summary.content
    assert f"A-{1040 + newest}" in summary.content
    assert len(summary.content) <= 2000
