"""Contract: a commit whose reply is lost is applied exactly once.

These tests need a ``lost_reply`` fixture yielding a :class:`LostReply`: a fresh, empty
store of the backend under test plus a switch that makes its next commits lose their
reply -- after the server applied them (``apply=True``) or before it saw them
(``apply=False``) -- for example a loopback TCP proxy in front of the server that cuts
the connection instead of forwarding the answer to a commit.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

import pytest

from contextledger.conversation.conversation import Conversation
from contextledger.core.changeset import ReductionPlan
from contextledger.errors import CommitOutcomeUnknown, StoreUnavailable
from contextledger.model.messages import Message
from contextledger.stores.capabilities import HISTORY, Capability, CompleteStore
from contextledger.testing.declared import CapabilityContract

__all__ = ["ExactlyOnceContract", "LostReply"]


class LostReply(Protocol):
    """A store whose next commits can lose their reply (see the module docstring)."""

    @property
    def store(self) -> CompleteStore:
        """The store under test."""
        ...

    @property
    def dropped(self) -> int:
        """How many commits lost their reply (or request) so far."""
        ...

    def arm(self, *, apply: bool = True, times: int = 1, then_down: bool = False) -> None:
        """Lose the next ``times`` commits; ``then_down``: the server is unreachable afterwards."""
        ...

    def disarm(self) -> None:
        """Let every reply through again."""
        ...

    def restore(self) -> None:
        """End the outage ``then_down`` started."""
        ...


def _texts(store: CompleteStore) -> list[str]:
    return [h.message.plain_text for h in store.history("s", "a")]


class ExactlyOnceContract(CapabilityContract):
    """Lost replies never double a commit: counts, appends, reductions and pins apply once."""

    needs: ClassVar[tuple[Capability[Any], ...]] = (HISTORY,)

    def test_a_lost_reply_to_the_first_commit(self, lost_reply: LostReply) -> None:
        conv = Conversation(lost_reply.store, "s", "a")
        lost_reply.arm()
        conv.append(Message.user("q0"))
        assert lost_reply.dropped == 1
        assert conv.version == 1
        assert _texts(lost_reply.store) == ["q0"]

    def test_a_lost_reply_to_an_append_is_not_a_duplicate(self, lost_reply: LostReply) -> None:
        store = lost_reply.store
        conv = Conversation(store, "s", "a")
        conv.append(Message.user("q0"))
        lost_reply.arm()
        conv.append(Message.assistant("a0"), Message.user("q1"))  # no DuplicateEntry
        assert lost_reply.dropped == 1
        assert _texts(store) == ["q0", "a0", "q1"]
        restored = Conversation(store, "s", "a")
        assert restored.version == conv.version == 2
        assert list(restored.view.entries) == list(conv.view.entries)

    def test_a_lost_reply_does_not_count_a_model_call_twice(self, lost_reply: LostReply) -> None:
        store = lost_reply.store
        conv = Conversation(store, "s", "a")
        conv.append(Message.user("q0"))
        lost_reply.arm()
        conv.before_model_call()
        conv.before_model_call()
        assert lost_reply.dropped == 1
        snap = store.load("s", "a")
        assert snap is not None
        assert (snap.state.model_call_count, snap.state.version) == (2, 3)
        assert conv.model_call_count == 2

    def test_a_lost_reply_does_not_apply_a_reduction_twice(self, lost_reply: LostReply) -> None:
        store = lost_reply.store
        conv = Conversation(store, "s", "a")
        msgs = [Message.user(f"m{i}") for i in range(4)]
        conv.append(*msgs)
        lost_reply.arm()
        reduction = conv.apply_plan(lambda v: ReductionPlan(strategy="w", evict=(v.ids[0],)), trigger="manual")
        assert reduction is not None
        assert lost_reply.dropped == 1
        assert [r.reduction_id for r in store.reductions("s")] == [reduction.reduction_id]
        assert [e.entry_id for e in store.evictions("s")] == [msgs[0].message_id]
        assert [e.entry_id for e in conv.view] == [m.message_id for m in msgs[1:]]
        assert list(Conversation(store, "s", "a").view.entries) == list(conv.view.entries)

    def test_a_lost_reply_records_a_pin_once(self, lost_reply: LostReply) -> None:
        store = lost_reply.store
        conv = Conversation(store, "s", "a")
        msgs = [Message.user("m0"), Message.user("m1")]
        conv.append(*msgs)
        lost_reply.arm()
        conv.pin(msgs[1].message_id, source="model")
        assert lost_reply.dropped == 1
        assert [(e.entry_id, e.source) for e in store.pin_history("s")] == [(msgs[1].message_id, "model")]
        assert Conversation(store, "s", "a").view[1].pinned

    def test_a_request_lost_before_the_server_is_sent_again(self, lost_reply: LostReply) -> None:
        store = lost_reply.store
        conv = Conversation(store, "s", "a")
        conv.append(Message.user("q0"))
        lost_reply.arm(apply=False)
        conv.append(Message.assistant("a0"))
        assert lost_reply.dropped == 1
        assert _texts(store) == ["q0", "a0"]
        assert conv.version == 2

    def test_lost_again_and_again_is_unavailable_with_nothing_applied(self, lost_reply: LostReply) -> None:
        store = lost_reply.store
        conv = Conversation(store, "s", "a")
        conv.append(Message.user("q0"))
        lost_reply.arm(apply=False, times=1_000)  # more than any driver retries on its own
        with pytest.raises(StoreUnavailable) as info:
            conv.append(Message.assistant("lost"))
        assert not isinstance(info.value, CommitOutcomeUnknown)
        assert lost_reply.dropped >= 2
        lost_reply.disarm()
        assert _texts(store) == ["q0"]
        conv.append(Message.assistant("a0"))
        assert _texts(store) == ["q0", "a0"]
        assert conv.version == 2

    def test_an_outage_after_a_lost_reply_leaves_the_outcome_to_the_next_commit(self, lost_reply: LostReply) -> None:
        store = lost_reply.store
        conv = Conversation(store, "s", "a")
        conv.append(Message.user("q0"))
        lost_reply.arm(then_down=True)
        with pytest.raises(CommitOutcomeUnknown) as info:
            conv.append(Message.assistant("a0"))
        assert info.value.changeset_id
        lost_reply.restore()
        assert _texts(store) == ["q0", "a0"]  # it had applied, once
        conv.append(Message.user("q1"))  # the version check settles the live view
        assert _texts(store) == ["q0", "a0", "q1"]
        assert list(Conversation(store, "s", "a").view.entries) == list(conv.view.entries)
