"""Contract: apps and users -- who a session belongs to, listings by them, their state, erasing a user.

And the state of one conversation read alone (what an ADK session's record is read with).
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any, ClassVar

import pytest

from contextledger.conversation.conversation import Conversation
from contextledger.errors import ConfigurationError, InvalidMessage, SessionNotFound, SessionOwnerConflict
from contextledger.history.lifecycle import ERASED_TEXT
from contextledger.ledger import Ledger
from contextledger.managers.sliding_window import SlidingWindowConversationManager
from contextledger.model.messages import Message
from contextledger.model.records import utcnow
from contextledger.stores.capabilities import (
    ERASURE,
    EXPIRY,
    HISTORY,
    LINEAGE,
    SCOPES,
    SESSIONS,
    TIME_TRAVEL,
    Capability,
    CompleteStore,
)
from contextledger.testing.declared import CapabilityContract

__all__ = ["OwnersContract"]


def _session(store: CompleteStore, session_id: str, app: str | None, user: str | None, agent_id: str = "a") -> None:
    Conversation(store, session_id, agent_id, app=app, user=user).append(Message.user(f"hello from {session_id}"))


def _ids(store: CompleteStore, **owner: Any) -> list[str]:
    return [info.session_id for info in store.sessions(**owner)]


class OwnersContract(CapabilityContract):
    """A session belongs to the app and user its first commit names; apps and users have state of their own."""

    needs: ClassVar[tuple[Capability[Any], ...]] = (SCOPES, SESSIONS, HISTORY, ERASURE, EXPIRY, LINEAGE, TIME_TRAVEL)

    def test_sessions_are_listed_with_their_app_and_user_and_filtered_by_them(self, store: CompleteStore) -> None:
        _session(store, "s1", "shop", "ada")
        _session(store, "s2", "shop", "bob")
        _session(store, "s3", "bank", "ada")
        _session(store, "s4", None, None)
        _session(store, "s5", "shop", None)
        listed = {i.session_id: (i.app, i.user) for i in store.sessions()}
        assert listed == {
            "s1": ("shop", "ada"),
            "s2": ("shop", "bob"),
            "s3": ("bank", "ada"),
            "s4": (None, None),
            "s5": ("shop", None),
        }
        assert sorted(_ids(store, app="shop")) == ["s1", "s2", "s5"]
        assert _ids(store, app="shop", user="ada") == ["s1"]
        assert sorted(_ids(store, user="ada")) == ["s1", "s3"]
        assert _ids(store, app="shop", user="eve") == []
        assert _ids(store, app="none") == []
        assert store.owner("s1") == ("shop", "ada")
        assert store.owner("s4") == (None, None)
        assert store.owner("s5") == ("shop", None)
        assert store.owner("missing") is None

    def test_a_filtered_listing_is_paged_most_recent_first(self, store: CompleteStore) -> None:
        for n in range(5):
            _session(store, f"s{n}", "shop", "ada")
            _session(store, f"other{n}", "shop", "bob")
            time.sleep(0.002)  # distinct update times on every backend
        Conversation(store, "s1", "a").append(Message.user("later"))
        order = ["s1", "s4", "s3", "s2", "s0"]
        assert _ids(store, app="shop", user="ada") == order
        assert _ids(store, app="shop", user="ada", limit=2, offset=1) == order[1:3]
        assert _ids(store, app="shop", user="ada", limit=10, offset=5) == []
        assert [i.active_entries for i in store.sessions(app="shop", user="ada", limit=1)] == [2]

    def test_the_owner_is_set_once_by_the_session_s_first_commit(self, store: CompleteStore) -> None:
        _session(store, "s", "shop", "ada", agent_id="a")
        _session(store, "s", "shop", "ada", agent_id="b")  # the same owner may add agents
        _session(store, "s", None, None, agent_id="c")  # and so may a writer naming none
        for app, user in (("shop", "bob"), ("bank", "ada"), ("shop", None), (None, "ada")):
            with pytest.raises(SessionOwnerConflict, match="belongs to app='shop' user='ada'"):
                _session(store, "s", app, user, agent_id="d")
        assert store.agents("s") == ["a", "b", "c"]
        assert store.load("s", "d") is None
        assert store.owner("s") == ("shop", "ada")
        # A session created naming no owner belongs to nobody: a later owner cannot claim it.
        _session(store, "free", None, None)
        with pytest.raises(SessionOwnerConflict):
            _session(store, "free", "shop", "ada", agent_id="b")
        assert store.owner("free") == (None, None)
        assert _ids(store, app="shop") == ["s"]

    def test_two_owners_racing_for_a_new_session_one_wins(self, store: CompleteStore) -> None:
        outcomes: dict[str, str] = {}
        start = threading.Barrier(2)

        def create(user: str) -> None:
            start.wait()
            try:
                _session(store, "contested", "shop", user, agent_id=user)
                outcomes[user] = "created"
            except SessionOwnerConflict:
                outcomes[user] = "refused"

        threads = [threading.Thread(target=create, args=(user,)) for user in ("ada", "bob")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert sorted(outcomes.values()) == ["created", "refused"]
        (winner,) = [user for user, outcome in outcomes.items() if outcome == "created"]
        assert store.owner("contested") == ("shop", winner)
        assert store.agents("contested") == [winner]
        assert _ids(store, app="shop", user=winner) == ["contested"]
        loser = "bob" if winner == "ada" else "ada"
        assert _ids(store, app="shop", user=loser) == []

    def test_a_deleted_session_leaves_no_owner_behind(self, store: CompleteStore) -> None:
        _session(store, "s", "shop", "ada")
        assert store.delete_session("s") is True
        assert store.owner("s") is None
        assert _ids(store, app="shop") == []
        assert _ids(store, app="shop", user="ada") == []
        _session(store, "s", "bank", "bob")  # the id is free again, for anyone
        assert store.owner("s") == ("bank", "bob")
        assert _ids(store, app="bank", user="bob") == ["s"]

    def test_app_and_user_state_merge_key_by_key_and_stay_apart(self, store: CompleteStore) -> None:
        value = {"nested": [1, 2.5, None, True, "é\u2028"], "empty": {}, "list": []}
        store.merge_scope_state("shop", None, {"theme": "dark", "limits": value})
        store.merge_scope_state("shop", "ada", {"name": "Ada"})
        store.merge_scope_state("shop", "ada", {"cart": [1, 2], "name": "Ada L."})
        store.merge_scope_state("bank", "ada", {"iban": "x"})
        store.merge_scope_state("shop", "bob", {})
        assert store.scope_state("shop") == {"theme": "dark", "limits": value}
        assert store.scope_state("shop", "ada") == {"name": "Ada L.", "cart": [1, 2]}
        assert store.scope_state("bank", "ada") == {"iban": "x"}
        assert store.scope_state("bank") == {}
        assert store.scope_state("shop", "bob") == {}
        store.merge_scope_state("shop", None, {"theme": None})
        assert store.scope_state("shop")["theme"] is None  # None is a value, not a deletion
        assert store.delete_scope_state("shop", "ada") is True
        assert store.delete_scope_state("shop", "ada") is False
        assert store.scope_state("shop", "ada") == {}
        assert store.scope_state("shop") == {"theme": None, "limits": value}

    def test_state_outlives_the_sessions_and_concurrent_merges_all_land(self, store: CompleteStore) -> None:
        _session(store, "s", "shop", "ada")
        store.merge_scope_state("shop", "ada", {"kept": 1})
        store.delete_session("s")
        assert store.scope_state("shop", "ada") == {"kept": 1}

        def merge(n: int) -> None:
            for i in range(5):
                store.merge_scope_state("shop", "ada", {f"k{n}.{i}": n * 10 + i})

        threads = [threading.Thread(target=merge, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        state = store.scope_state("shop", "ada")
        assert state == {"kept": 1, **{f"k{n}.{i}": n * 10 + i for n in range(4) for i in range(5)}}

    def test_the_ledger_checks_what_it_is_given(self, store: CompleteStore) -> None:
        ledger = Ledger(store)
        with pytest.raises(InvalidMessage):
            ledger.update_user_state("shop", "ada", {"k": {1, 2}})
        with pytest.raises(InvalidMessage):
            ledger.update_app_state("shop", {"k": float("nan")})
        with pytest.raises(InvalidMessage):
            ledger.update_app_state("shop", {"": 1})
        with pytest.raises(InvalidMessage):
            ledger.update_app_state("shop", {"k": b"bytes"})
        with pytest.raises(ConfigurationError):
            ledger.user_state("shop", "")
        with pytest.raises(ConfigurationError):
            ledger.sessions(app="")
        with pytest.raises(ConfigurationError):
            Conversation(store, "s", app="")
        assert ledger.app_state("shop") == {}  # nothing was written
        with pytest.raises(SessionNotFound):
            ledger.owner("missing")

    def test_erase_user_erases_each_session_of_the_user_and_their_state(self, store: CompleteStore) -> None:
        ledger = Ledger(store)
        chat = ledger.conversation(
            "mine", manager=SlidingWindowConversationManager(window_size=2), app="shop", user="ada"
        )
        chat.append(*(Message.user(f"my secret {i}") if i % 2 == 0 else Message.assistant(f"a{i}") for i in range(6)))
        chat.reduce()
        chat.set_agent_state({"address": "12 Road"})
        _session(store, "other-agent", "shop", "ada")
        _session(store, "bobs", "shop", "bob")
        _session(store, "elsewhere", "bank", "ada")
        ledger.update_user_state("shop", "ada", {"email": "ada@example.org"})
        ledger.update_user_state("shop", "bob", {"email": "bob@example.org"})
        ledger.update_app_state("shop", {"theme": "dark"})

        report = ledger.erase_user("shop", "ada", reason="request 42")

        assert sorted(report.sessions) == ["mine", "other-agent"]
        assert report.state_deleted is True
        erased = {t.entry_id for t in report.tombstones}
        for session_id in report.sessions:
            history = ledger.history(session_id, "a" if session_id == "other-agent" else "default")
            assert history
            assert {h.message.message_id for h in history} <= erased
            assert all(h.message.plain_text == ERASED_TEXT for h in history)
            assert {t.reason for t in ledger.tombstones(session_id)} == {"request 42"}
        assert all("secret" not in s.content for s in ledger.summaries("mine"))
        assert ledger.conversation("mine").agent_state == {}
        assert ledger.user_state("shop", "ada") == {}
        # Nothing of anyone else changed.
        assert ledger.user_state("shop", "bob") == {"email": "bob@example.org"}
        assert ledger.app_state("shop") == {"theme": "dark"}
        assert ledger.history("bobs", "a")[0].message.plain_text == "hello from bobs"
        assert ledger.history("elsewhere", "a")[0].message.plain_text == "hello from elsewhere"
        assert sorted(_ids(store, app="shop", user="ada")) == ["mine", "other-agent"]

        # Again: what was erased stays as it is; what came since is erased.
        ledger.conversation("mine").append(Message.user("one more secret"))
        again = ledger.erase_user("shop", "ada", reason="request 43")
        assert len(again.tombstones) == 1 and again.state_deleted is False  # noqa: PT018
        assert ledger.history("mine")[-1].message.plain_text == ERASED_TEXT
        with pytest.raises(ConfigurationError):
            ledger.erase_user("shop", "ada", reason=" ")

    def test_a_conversation_s_state_reads_alone_as_load_reads_it(self, store: CompleteStore) -> None:
        assert store.conversation_state("s", "a") is None
        chat = Conversation(store, "s", "a", app="shop", user="ada")
        chat.append(Message.user("hi"), Message.assistant("hello"))
        chat.set_agent_state({"adk": {"state": {"k": [1, "é"]}, "last_update_time": 1795000000.123456}})
        chat.before_model_call()
        snapshot = store.load("s", "a")
        assert snapshot is not None
        assert store.conversation_state("s", "a") == snapshot.state
        assert store.conversation_state("s", "b") is None
        store.delete_session("s")
        assert store.conversation_state("s", "a") is None

    def test_a_fork_belongs_to_the_app_and_user_of_its_source(self, store: CompleteStore) -> None:
        ledger = Ledger(store)
        _session(store, "mine", "shop", "ada")
        ledger.fork("mine", "mine-fork")
        assert store.owner("mine-fork") == ("shop", "ada")
        assert sorted(_ids(store, app="shop", user="ada")) == ["mine", "mine-fork"]
        report = ledger.erase_user("shop", "ada", reason="request 8")
        assert sorted(report.sessions) == ["mine", "mine-fork"]
        _session(store, "free", None, None)
        ledger.fork("free", "free-fork")
        assert store.owner("free-fork") == (None, None)

    def test_an_expired_session_leaves_no_owner_behind(self, store: CompleteStore) -> None:
        from contextledger.stores.capabilities import expiring

        _session(store, "idle", "shop", "ada")
        assert expiring(store).expire_session("idle", idle_before=utcnow() + timedelta(seconds=5), reason="idle")
        assert store.owner("idle") is None
        assert _ids(store, app="shop", user="ada") == []
        _session(store, "idle", "bank", "bob")  # the id is free again, for anyone
        assert store.owner("idle") == ("bank", "bob")
