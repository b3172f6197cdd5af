"""A summary says what it covers, and keeps the newest facts, however long the conversation."""

from __future__ import annotations

import asyncio

import pytest

from contextledger import (
    Conversation,
    MemoryStore,
    Message,
    SlidingWindowConversationManager,
    SummarizingConversationManager,
)
from contextledger.aio import AsyncLedger
from contextledger.core.changeset import ReductionPlan, SummaryDraft
from contextledger.errors import ConfigurationError
from contextledger.managers.coverage import is_summary, stamp_of, summary_coverage
from contextledger.managers.summarizers import ExtractiveSummarizer, coverage_of
from contextledger.model.records import SummaryEntry
from contextledger.stores.capabilities import CompleteStore
from tests.managers.helpers import backend_store, chat, ids, model_call, tool_turn, view_ids
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
    store: CompleteStore = backend_store(request, backend)
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


def host_summary(conv: Conversation, count: int, text: str) -> None:
    """A summary of the first ``count`` entries written by someone else (no record of what it covers)."""
    replaces = tuple(e.entry_id for e in list(conv.view)[:count])
    conv.apply_plan(
        lambda _view: ReductionPlan(
            strategy="host", summary=SummaryDraft(content=text, summarizer="host", replaces=replaces)
        ),
        trigger="manual",
    )


def only_active_summary(store: CompleteStore) -> SummaryEntry:
    (summary,) = [s for s in store.summaries("s", "default") if s.status == "active"]
    return summary


def test_a_chain_of_summaries_counts_what_every_link_covered(memory_store: CompleteStore) -> None:
    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2)
    conv = Conversation(memory_store, "s", manager=manager)
    for n in range(1, 4):
        conv.append(*tool_turn(f"job{n}"))
    conv.reduce("manual")
    first = only_active_summary(memory_store)
    # Turn 1 (4 messages) and turn 2 up to its tool result; two model calls answered in turn 1.
    assert first.content.splitlines()[0] == "Summary of 7 messages from turns 1-2 (2 user prompts, 3 model calls):"
    for n in range(4, 7):
        conv.append(*tool_turn(f"job{n}"))
    conv.reduce("manual")
    second = only_active_summary(memory_store)
    assert second.supersedes == first.summary_id
    truth = covered(memory_store, "s", "default", second.summary_id)
    assert stated(second.content) == truth
    assert truth.first_turn == 1
    assert truth.messages == 7 + sum(1 for r in second.replaces if r != first.summary_id)
    assert "folding in 1 earlier summary" in second.content.splitlines()[0]
    # The first summary's lines are carried forward.
    assert "- turn 1, user: Please do job1." in second.content


def test_lines_beside_a_pinned_message_outlast_older_ones(memory_store: CompleteStore) -> None:
    summarizer = ExtractiveSummarizer(max_chars=400, sentence_chars=60)
    manager = SummarizingConversationManager(summary_ratio=1.0, preserve_recent_messages=2, summarizer=summarizer)
    conv = Conversation(memory_store, "s", manager=manager)
    messages = chat(40)
    conv.append(*messages)
    conv.pin(messages[4].message_id)  # "m4. Question number 4." -- the question and its answer's neighbours
    conv.reduce("manual")
    summary = only_active_summary(memory_store)
    lines = summary.content.splitlines()
    assert stated(summary.content) == covered(memory_store, "s", "default", summary.summary_id)
    # 40 messages, the 2 newest preserved and the pinned m4 kept (the prompt of turn 3).
    assert lines[0] == "Summary of 37 messages from turns 1-19 (18 user prompts, 19 model calls):"
    # m3 and m5 sat beside the pinned m4: kept (and marked) although far older than the rest shown.
    assert lines[1] == "- ... 28 lines dropped (turns 1-16)"
    assert lines[2] == "- turn 2, assistant (beside a pinned message): m3."
    assert lines[3] == "- turn 3, assistant (beside a pinned message): m5."
    assert lines[4] == "- turn 16, assistant: m31."  # then the newest, back to where the budget ran out
    assert lines[-1] == "- turn 19, assistant: m37."  # the newest covered message
    assert len(summary.content) <= 400
    # Every covered message is either shown or counted as dropped.
    assert 28 + len(lines) - 2 == 37


def test_what_earlier_summaries_dropped_is_carried_into_the_dropped_line(memory_store: CompleteStore) -> None:
    summarizer = ExtractiveSummarizer(max_chars=300, sentence_chars=40)
    manager = SummarizingConversationManager(summary_ratio=1.0, preserve_recent_messages=2, summarizer=summarizer)
    conv = Conversation(memory_store, "s", manager=manager)
    conv.append(*chat(20))
    conv.reduce("manual")
    conv.append(*chat(20, prefix="n"))
    conv.reduce("manual")
    summary = only_active_summary(memory_store)
    truth = covered(memory_store, "s", "default", summary.summary_id)
    assert truth.messages == 38
    assert stated(summary.content) == truth
    lines = summary.content.splitlines()
    (dropped_line,) = [ln for ln in lines if ln.startswith("- ... ")]
    dropped = int(dropped_line.split()[2].replace(",", ""))
    assert dropped + len(lines) - 2 == 38
    first_shown = int(lines[2].split()[2].rstrip(","))
    assert dropped_line.endswith(f" lines dropped (turns 1-{first_shown - 1})")
    assert lines[-1].startswith(f"- turn {truth.last_turn}, ")


def test_a_summary_written_elsewhere_is_counted_as_unknown_never_guessed(memory_store: CompleteStore) -> None:
    manager = SummarizingConversationManager(summary_ratio=1.0, preserve_recent_messages=2)
    conv = Conversation(memory_store, "s", manager=manager)
    conv.append(*chat(6))
    host_summary(conv, 4, "The user asked four questions about tea.")
    conv.append(*chat(4, prefix="n"))
    conv.reduce("manual")
    summary = only_active_summary(memory_store)
    header, *lines = summary.content.splitlines()
    truth = covered(memory_store, "s", "default", summary.summary_id)
    # 2 + 2 messages it wrote lines for, and a summary of 4 whose extent it has no record of:
    # a lower bound, no turn range (the turns after the unknown summary cannot be numbered).
    assert truth.messages == 8
    assert header == (
        "Summary of at least 4 messages"
        " (2 user prompts, 2 model calls, folding in 1 earlier summary, 1 of unknown extent):"
    )
    assert lines[0] == "- earlier summary: The user asked four questions about tea."
    assert all(not ln.startswith("- turn ") for ln in lines)


def test_an_earlier_format_summary_is_carried_with_what_it_omitted(memory_store: CompleteStore) -> None:
    manager = SummarizingConversationManager(summary_ratio=1.0, preserve_recent_messages=2)
    conv = Conversation(memory_store, "s", manager=manager)
    conv.append(*chat(8))
    host_summary(
        conv,
        6,
        "Summary of 6 earlier message(s):\n- user: m0. Question.\n- assistant: m1. Answer.\n"
        "- ... (4 more lines omitted)",
    )
    conv.append(*chat(2, prefix="n"))
    conv.reduce("manual")
    lines = only_active_summary(memory_store).content.splitlines()
    assert lines[1:4] == ["- user: m0. Question.", "- assistant: m1. Answer.", "- ... 4 lines dropped"]


def test_undo_brings_a_summary_back_and_the_next_one_still_knows_what_it_covered(memory_store: CompleteStore) -> None:
    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2)
    conv = Conversation(memory_store, "s", manager=manager)
    conv.append(*chat(10))
    conv.reduce("manual")
    first = only_active_summary(memory_store)
    conv.append(*chat(6, prefix="n"))
    second = conv.reduce("manual")
    assert second is not None
    conv.undo(second.reduction_id)
    assert only_active_summary(memory_store).summary_id == first.summary_id
    conv.append(*chat(2, prefix="o"))
    conv.reduce("manual")
    third = only_active_summary(memory_store)
    assert third.supersedes == first.summary_id
    assert stated(third.content) == covered(memory_store, "s", "default", third.summary_id)


def test_the_records_ride_with_the_commit_and_are_read_back(memory_store: CompleteStore) -> None:
    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2)
    conv = Conversation(memory_store, "s", manager=manager)
    conv.append(*chat(10))
    conv.reduce("manual")
    summary = only_active_summary(memory_store)
    (record,) = manager.state.records.values()
    assert set(manager.state.records) == {summary.summary_id}
    assert record.coverage.messages == len(summary.replaces)
    assert record.first_seq == 0
    reopened = SummarizingConversationManager()
    Conversation(memory_store, "s", manager=reopened)
    assert reopened.state == manager.state
    # Many summaries later the state still holds only the active one and the last two it superseded.
    for n in range(6):
        conv.append(*chat(6, prefix=f"r{n}-"))
        conv.reduce("manual")
    assert len(manager.state.records) == 3
    assert only_active_summary(memory_store).summary_id == list(manager.state.records)[-1]


@pytest.mark.parametrize(
    "records",
    [{"x": {"coverage": "many"}}, {"x": {"coverage": {}, "first_seq": -1, "last_seq": 0}}, ["not", "a", "dict"]],
)
def test_a_bad_record_in_the_stored_state_is_a_configuration_error(records: object) -> None:
    manager = SummarizingConversationManager()
    with pytest.raises(ConfigurationError, match="summarizing manager state"):
        manager.restore_state({"manager": "summarizing", "records": records})


def test_a_model_backed_summarizer_can_open_with_the_same_truthful_header(memory_store: CompleteStore) -> None:
    seen: list[list[Message]] = []

    def summarize(messages: list[Message]) -> str:
        seen.append(messages)
        return coverage_of(messages).header() + "\nThe customer reported damaged orders."

    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2, summarizer=summarize)
    conv = Conversation(memory_store, "s", manager=manager)
    for n in range(1, 30):
        support_turn(conv, n)
        if n % 7 == 0:
            conv.reduce("manual")
    for summary in memory_store.summaries("s", "default"):
        assert stated(summary.content) == covered(memory_store, "s", "default", summary.summary_id)
    # What it was handed: stamps on messages, coverage on the earlier summary; the view itself is untouched.
    assert is_summary(seen[-1][0])
    assert summary_coverage(seen[-1][0]) is not None
    assert all(stamp_of(m) is not None for m in seen[-1][1:])
    assert all(stamp_of(e.message) is None for e in conv.view if e.kind == "message")


def test_a_list_built_by_hand_is_counted_from_the_list() -> None:
    messages = [
        Message.user("Hi."),
        Message.tool_use("a", "lookup", {}, text="Looking."),
        Message.tool_result("a", "found"),
        Message.assistant("Here it is."),
        Message.assistant("Anything else?"),
    ]
    coverage = coverage_of(messages)
    assert (coverage.messages, coverage.prompts, coverage.calls) == (5, 1, 2)
    assert coverage.first_turn is None
    assert coverage.header() == "Summary of 5 messages (1 user prompt, 2 model calls):"


def test_a_summary_of_a_message_left_inside_an_older_summary_keeps_the_count_exact(memory_store: CompleteStore) -> None:
    manager = SummarizingConversationManager(summary_ratio=1.0, preserve_recent_messages=2)
    conv = Conversation(memory_store, "s", manager=manager)
    messages = chat(10)
    conv.append(*messages)
    conv.pin(messages[2].message_id)
    conv.reduce("manual")  # m2 stays inside the span of the summary of m0..m7
    older = only_active_summary(memory_store)
    assert view_ids(conv) == [messages[2].message_id, older.summary_id, *ids(messages[8:])]
    conv.unpin(messages[2].message_id)
    manager.preserve_recent_messages = 3  # the older summary is now among the recent entries: kept
    conv.reduce("manual")  # summarizes m2 alone, inside the older summary's span
    summaries = [s for s in memory_store.summaries("s", "default") if s.status == "active"]
    assert len(summaries) == 2
    conv.append(*chat(6, prefix="n"))
    manager.preserve_recent_messages = 2
    conv.reduce("manual")
    newest = only_active_summary(memory_store)
    truth = covered(memory_store, "s", "default", newest.summary_id)
    assert truth.messages == 10 + 4
    assert stated(newest.content) == truth


def test_a_coroutine_summarizer_under_the_async_api_gets_the_same_facts() -> None:
    async def summarize(messages: list[Message]) -> str:
        await asyncio.sleep(0)
        return coverage_of(messages).header() + "\nA model would write the rest."

    store = MemoryStore()

    async def main() -> None:
        ledger = AsyncLedger(store)
        manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2, summarizer=summarize)
        conv = await ledger.conversation("s", manager=manager)
        for batch in range(3):
            await conv.append(*tool_turn(f"a{batch}"), *chat(4, prefix=f"b{batch}-"))
            assert await conv.reduce() is not None

    asyncio.run(main())
    summaries = store.summaries("s", "default")
    assert len(summaries) == 3
    for summary in summaries:
        assert stated(summary.content) == covered(store, "s", "default", summary.summary_id)
    assert "folding in 2 earlier summaries" in summaries[-1].content


def test_after_another_managers_trimming_the_counts_stay_exact_and_the_turns_go_unnumbered(
    memory_store: CompleteStore,
) -> None:
    conv = Conversation(memory_store, "s", manager=SlidingWindowConversationManager(window_size=6))
    conv.append(*chat(12))
    conv.reduce("manual")  # evicts the oldest 6 without a summary
    manager = SummarizingConversationManager(summary_ratio=1.0, preserve_recent_messages=2)
    conv = Conversation(memory_store, "s", manager=manager)
    conv.reduce("manual")
    summary = only_active_summary(memory_store)
    truth = covered(memory_store, "s", "default", summary.summary_id)
    header = summary.content.splitlines()[0]
    assert header == f"Summary of {truth.messages} messages ({truth.prompts} user prompts, {truth.calls} model calls):"
    assert truth.first_turn == 4  # which the summary cannot know without reading the evicted history
