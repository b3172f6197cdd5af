"""Contract of the ``sessions`` capability: sessions listed (most recent first, paged) and deleted."""

from __future__ import annotations

import time
from typing import Any, ClassVar

import pytest

from contextledger.conversation.conversation import Conversation
from contextledger.core.changeset import Changeset, ReductionPlan, SummaryDraft
from contextledger.errors import ConfigurationError
from contextledger.model.messages import Message
from contextledger.model.records import utcnow
from contextledger.stores.capabilities import HISTORY, SESSIONS, Capability, CompleteStore
from contextledger.testing.declared import CapabilityContract
from contextledger.testing.required import create

__all__ = ["SessionsContract"]


class SessionsContract(CapabilityContract):
    """Listing and deleting whole sessions (observed through the history listings)."""

    needs: ClassVar[tuple[Capability[Any], ...]] = (SESSIONS, HISTORY)

    def test_sessions_paged_and_deleted(self, store: CompleteStore) -> None:
        for i in range(5):
            create(store, f"s{i}", [Message.user("x"), Message.user("y")])
            time.sleep(0.005)
        create(store, "s4", [Message.user("z")], agent_id="b")
        page1 = store.sessions(limit=2)
        page2 = store.sessions(limit=2, offset=2)
        page3 = store.sessions(limit=2, offset=4)
        assert [s.session_id for s in page1 + page2 + page3] == ["s4", "s3", "s2", "s1", "s0"]
        assert page1[0].agents == ("a", "b")
        assert page1[0].active_entries == 3
        assert page1[0].total_entries == 3
        assert store.delete_session("s4") is True
        assert store.delete_session("s4") is False
        assert store.load("s4", "a") is None
        assert store.history("s4", "a") == []
        assert [s.session_id for s in store.sessions()] == ["s3", "s2", "s1", "s0"]

    def test_a_commit_of_state_alone_makes_its_session_the_most_recent(self, store: CompleteStore) -> None:
        # A model-call count committed on its own stamps the conversation as every commit does.
        create(store, "older", [Message.user("x")])
        time.sleep(0.005)
        create(store, "newer", [Message.user("y")])
        time.sleep(0.005)
        before = store.load("older", "a")
        assert before is not None
        sent = utcnow()
        store.commit(
            Changeset(session_id="older", agent_id="a", expected_version=before.state.version, model_call_count=1)
        )
        after = store.load("older", "a")
        assert after is not None
        assert (after.state.version, after.state.model_call_count) == (before.state.version + 1, 1)
        assert after.state.created_at == before.state.created_at
        assert after.state.updated_at >= sent
        assert [s.session_id for s in store.sessions()] == ["older", "newer"]

    @pytest.mark.parametrize(("limit", "offset"), [(-1, 0), (2, -1)])
    def test_sessions_rejects_negative_paging(self, store: CompleteStore, limit: int, offset: int) -> None:
        create(store, "s", [Message.user("x")])
        with pytest.raises(ConfigurationError, match="must be >= 0"):
            store.sessions(limit=limit, offset=offset)

    def test_delete_removes_everything(self, store: CompleteStore) -> None:
        conv = Conversation(store, "gone", "a")
        conv.append(Message.user("a"), Message.user("b"), Message.user("c"))
        conv.apply_plan(
            lambda v: ReductionPlan(
                strategy="summarizing", summary=SummaryDraft(content="S", summarizer="t", replaces=(v.ids[0],))
            ),
            trigger="manual",
        )
        assert store.summaries("gone")
        store.delete_session("gone")
        assert store.summaries("gone") == []
        assert store.reductions("gone") == []
        assert store.evictions("gone") == []
        fresh = Conversation(store, "gone", "a")
        assert fresh.version == 0
        fresh.append(Message.user("again"))
        assert fresh.version == 1
