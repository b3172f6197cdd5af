"""Fewer commits per turn: a deferred model-call count and a host write riding with the end-of-invocation reduction."""

from __future__ import annotations

from contextledger import Conversation, Edit, Message, ReductionPlan, SlidingWindowConversationManager, View
from contextledger.core.changeset import Changeset
from contextledger.stores.memory import MemoryStore
from tests.core.helpers import ScriptedManager, rule_violations
from tests.managers.helpers import chat


class CountingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.commits: list[Changeset] = []

    def commit(self, changeset: Changeset) -> int:
        self.commits.append(changeset)
        return super().commit(changeset)


def test_a_deferred_count_rides_with_the_next_message() -> None:
    store = CountingStore()
    conv = Conversation(store, "s")
    conv.append(Message.user("hi"))
    store.commits.clear()
    conv.before_model_call(defer_count=True)
    assert store.commits == []  # nothing else to write: no commit of its own
    assert conv.model_call_count == 1
    conv.append(Message.assistant("hello"))
    (commit,) = store.commits
    assert commit.model_call_count == 1
    assert Conversation(store, "s").model_call_count == 1
    conv.before_model_call()  # not deferred: the count commits at once, as before
    assert len(store.commits) == 2
    assert store.commits[-1].appends == ()


def test_the_answer_and_the_end_of_invocation_reduction_are_one_commit() -> None:
    store = CountingStore()
    conv = Conversation(store, "s", manager=SlidingWindowConversationManager(window_size=4))
    conv.append(*chat(5))  # u0 a1 u2 a3 u4
    conv.before_model_call(defer_count=True)
    store.commits.clear()
    answer = Message.assistant("a5. the answer")
    before = conv.view
    conv.after_invocation(pending=lambda view: Edit(appends=(answer,)))
    (commit,) = store.commits
    assert [e.entry_id for e in commit.appends] == [answer.message_id]
    assert commit.model_call_count == 1
    assert commit.reduction is not None
    assert commit.reduction.trigger == "end_of_invocation"
    # Planned on the view holding the answer: a window of 4 over u0..a5 keeps u2..a5.
    assert conv.view.ids == [*before.ids[2:], answer.message_id]
    assert commit.reduction.messages_before == 6
    assert commit.reduction.messages_after == 4
    assert Conversation(store, "s").view.ids == conv.view.ids


def test_the_pending_write_commits_alone_when_nothing_is_reduced() -> None:
    store = CountingStore()
    conv = Conversation(store, "s", manager=SlidingWindowConversationManager(window_size=40))
    conv.append(Message.user("q"))
    store.commits.clear()
    answer = Message.assistant("a")
    conv.after_invocation(pending=lambda view: Edit(appends=(answer,)))
    (commit,) = store.commits
    assert commit.reduction is None
    assert conv.view.ids[-1] == answer.message_id


def test_a_reduction_touching_the_pending_write_commits_after_it() -> None:
    def evict_newest_answer(view: View, request: object) -> ReductionPlan | None:
        answers = [e.entry_id for e in view if e.message.role == "assistant"]
        return ReductionPlan(strategy="x", evict=(answers[-1],)) if answers else None

    store = CountingStore()
    conv = Conversation(store, "s", manager=ScriptedManager(evict_newest_answer))
    conv.append(Message.user("q"))
    store.commits.clear()
    answer = Message.assistant("a")
    before = conv.view
    conv.after_invocation(pending=lambda view: Edit(appends=(answer,)))
    first, second = store.commits
    assert [e.entry_id for e in first.appends] == [answer.message_id]
    assert first.reduction is None
    assert second.reduction is not None
    assert second.evict == (answer.message_id,)
    assert rule_violations(before, conv.view) == []
