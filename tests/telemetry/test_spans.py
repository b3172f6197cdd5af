"""The four spans and their attributes, on every backend; content only on opt-in."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from contextledger import Conversation, Message, telemetry
from contextledger.errors import ConcurrencyConflict, ReductionFailed
from contextledger.managers import SlidingWindowConversationManager, SummarizingConversationManager
from contextledger.model.records import ViewEntry
from contextledger.stores.capabilities import CompleteStore
from contextledger.stores.memory import MemoryStore
from tests.telemetry.conftest import Recorded, attrs

BACKENDS = {"memory": "memory", "sqlite": "sqlite", "postgresql": "postgresql", "redis": "redis"}


def turns(n: int) -> list[Message]:
    out: list[Message] = []
    for i in range(n):
        out += [Message.user(f"question {i}"), Message.assistant(f"answer {i}")]
    return out


def test_commit_restore_and_reduction_spans_on_every_backend(store: CompleteStore, otel: Recorded) -> None:
    chat = Conversation(store, "s1", "helper", manager=SlidingWindowConversationManager(window_size=3))
    chat.append(*turns(2))
    reduction = chat.reduce()
    assert reduction is not None
    Conversation(store, "s1", "helper")  # a restore of what is there

    restores = otel.spans("contextledger.restore")
    assert [attrs(s)["contextledger.restore.found"] for s in restores] == [False, True]
    backend = attrs(restores[0])["contextledger.backend"]
    assert backend in BACKENDS
    if backend != "memory":
        assert attrs(restores[0])["db.system.name"] == backend
    restored = attrs(restores[1])
    assert restored["contextledger.restore.entries"] == len(chat.view) == reduction.messages_after == 2
    expected_bytes = sum(len(json.dumps(list(e.message.content), separators=(",", ":")).encode()) for e in chat.view)
    assert restored["contextledger.restore.bytes"] == expected_bytes
    assert restored["contextledger.version"] == chat.version

    append, evict = otel.spans("contextledger.commit")
    for span in (append, evict):
        assert attrs(span)["gen_ai.conversation.id"] == "s1"
        assert attrs(span)["gen_ai.agent.name"] == "helper"
        assert attrs(span)["contextledger.backend"] == backend
        assert attrs(span)["contextledger.commit.outcome"] == "committed"
        assert attrs(span)["contextledger.commit.conflict"] is False
        assert attrs(span)["contextledger.commit.retries"] == 0
    assert attrs(append)["contextledger.commit.appended"] == 4
    assert attrs(append)["contextledger.commit.evicted"] == 0
    assert attrs(append)["contextledger.version"] == 1
    assert attrs(evict)["contextledger.commit.evicted"] == len(reduction.evicted) == 2
    assert attrs(evict)["contextledger.version"] == 2
    assert attrs(evict)["contextledger.reduction.id"] == reduction.reduction_id

    [span] = otel.spans("contextledger.reduction")
    assert otel.parent_of(evict) is span  # the commit happens inside the reduction
    assert attrs(span) == {
        "gen_ai.conversation.id": "s1",
        "gen_ai.agent.name": "helper",
        "contextledger.backend": backend,
        **({"db.system.name": backend} if backend != "memory" else {}),
        "contextledger.model_call": 0,
        "contextledger.reduction.trigger": "manual",
        "contextledger.reduction.manager": "sliding_window",
        "contextledger.reduction.outcome": "committed",
        "contextledger.reduction.id": reduction.reduction_id,
        "contextledger.reduction.strategy": "sliding_window",
        "contextledger.reduction.messages_before": 4,
        "contextledger.reduction.messages_after": 2,
        "contextledger.reduction.tokens_before": reduction.tokens_before,
        "contextledger.reduction.tokens_after": reduction.tokens_after,
        "contextledger.reduction.evicted": 2,
        "contextledger.reduction.reason": reduction.detail,
        "contextledger.version": 2,
    }


def summarizing(summarize: object) -> SummarizingConversationManager:
    return SummarizingConversationManager(
        summary_ratio=0.5,
        preserve_recent_messages=2,
        summarizer=summarize,  # type: ignore[arg-type]
    )


def brief(entries: Sequence[ViewEntry]) -> str:
    return f"summary of {len(entries)} entries"


def test_a_summary_is_written_in_a_summarize_span_inside_the_reduction(otel: Recorded) -> None:
    chat = Conversation(MemoryStore(), "s", manager=summarizing(brief))
    chat.append(*turns(4))
    reduction = chat.reduce()
    assert reduction is not None
    assert reduction.summary_id is not None
    [summarize] = otel.spans("contextledger.summarize")
    [span] = otel.spans("contextledger.reduction")
    assert otel.parent_of(summarize) is span
    assert attrs(span)["contextledger.reduction.summary_id"] == reduction.summary_id
    assert attrs(summarize)["contextledger.summarize.entries"] == 4
    assert attrs(summarize)["contextledger.summarize.output_chars"] == len("summary of 4 entries")
    assert attrs(summarize)["contextledger.summarizer"] == "SummarizingConversationManager.write_summary"
    # no content unless the user opts in
    assert "gen_ai.input.messages" not in attrs(summarize)
    assert "gen_ai.output.messages" not in attrs(summarize)
    assert not any("question" in str(value) for s in otel.spans() for value in attrs(s).values())


@pytest.mark.parametrize("opt_in", ["configure", "environment"])
def test_content_goes_into_the_summarize_span_only_on_opt_in(
    otel: Recorded, opt_in: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if opt_in == "configure":
        telemetry.configure(tracer_provider=otel.tracer_provider, capture_content=True)
    else:
        monkeypatch.setenv(telemetry.CAPTURE_CONTENT_ENV, "true")
        telemetry.configure(tracer_provider=otel.tracer_provider)
    chat = Conversation(MemoryStore(), "s", manager=summarizing(brief))
    chat.append(*turns(4))
    chat.reduce()
    [summarize] = otel.spans("contextledger.summarize")
    read = json.loads(str(attrs(summarize)["gen_ai.input.messages"]))
    assert read[0] == {"role": "user", "parts": [{"type": "text", "content": "question 0"}]}
    assert len(read) == 4
    written = json.loads(str(attrs(summarize)["gen_ai.output.messages"]))
    assert written[0]["parts"][0]["content"] == "summary of 4 entries"


def test_a_failing_summarizer_marks_both_spans_as_errors(otel: Recorded) -> None:
    def broken(entries: Sequence[ViewEntry]) -> str:
        raise RuntimeError("model down")

    chat = Conversation(MemoryStore(), "s", manager=summarizing(broken))
    chat.append(*turns(4))
    with pytest.raises(ReductionFailed):
        chat.reduce()
    [summarize] = otel.spans("contextledger.summarize")
    [span] = otel.spans("contextledger.reduction")
    assert summarize.status.status_code.name == "ERROR"
    assert span.status.status_code.name == "ERROR"
    assert attrs(span)["contextledger.reduction.outcome"] == "failed"
    assert "model down" in str(attrs(span)["contextledger.reduction.reason"])
    assert otel.spans("contextledger.commit") == [otel.spans("contextledger.commit")[0]]  # the append only


def test_a_reduction_that_finds_nothing_says_why(otel: Recorded) -> None:
    chat = Conversation(MemoryStore(), "s", manager=SlidingWindowConversationManager(window_size=10))
    chat.append(*turns(1))
    assert chat.reduce() is None
    [span] = otel.spans("contextledger.reduction")
    assert attrs(span)["contextledger.reduction.outcome"] == "nothing"


def test_a_conflict_is_retried_in_a_second_commit_span(otel: Recorded) -> None:
    store = MemoryStore()
    first, second = Conversation(store, "s"), Conversation(store, "s")
    first.append(Message.user("one"))
    second.append(Message.user("two"))  # planned on version 0: conflicts, re-reads, retries
    conflicted, retried = otel.spans("contextledger.commit")[1:]
    assert attrs(conflicted)["contextledger.commit.conflict"] is True
    assert attrs(conflicted)["contextledger.commit.outcome"] == "conflict"
    assert attrs(conflicted)["contextledger.commit.retries"] == 0
    assert [e.name for e in conflicted.events] == ["conflict"]
    assert attrs(retried)["contextledger.commit.retries"] == 1
    assert attrs(retried)["contextledger.commit.outcome"] == "committed"
    assert attrs(retried)["contextledger.version"] == 2


def test_a_conflict_past_the_retries_propagates_with_its_span(otel: Recorded) -> None:
    store = MemoryStore()
    first, second = Conversation(store, "s"), Conversation(store, "s", max_retries=0)
    first.append(Message.user("one"))
    with pytest.raises(ConcurrencyConflict):
        second.append(Message.user("two"))
    last = otel.spans("contextledger.commit")[-1]
    assert attrs(last)["contextledger.commit.outcome"] == "conflict"
    assert last.status.status_code.name == "UNSET"  # a conflict is an outcome, not a failure of the store


def test_the_async_api_nests_in_the_span_current_in_the_coroutine(otel: Recorded) -> None:
    import asyncio

    from contextledger.aio import AsyncLedger

    tracer = otel.tracer_provider.get_tracer("app")

    async def run() -> int:
        ledger = await AsyncLedger.connect("memory://")
        with tracer.start_as_current_span("request") as request:
            chat = await ledger.conversation("s", manager=SlidingWindowConversationManager(window_size=2))
            await chat.append(Message.user("q0"), Message.assistant("a0"), Message.user("q1"))
            await chat.reduce()
        await ledger.close()
        return request.get_span_context().span_id

    request_id = asyncio.run(run())
    mine = [s for s in otel.spans() if s.name.startswith("contextledger.")]
    assert {s.name for s in mine} == {"contextledger.restore", "contextledger.commit", "contextledger.reduction"}
    for span in mine:
        top = span
        while otel.parent_of(top) is not None and otel.parent_of(top).name != "request":  # type: ignore[union-attr]
            top = otel.parent_of(top)  # type: ignore[assignment]
        assert top.parent is not None
        assert top.parent.span_id == request_id
