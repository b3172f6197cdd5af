"""A new backend starts small: a dict store with only the required part passes the required contract.

It runs a Conversation (a manager's reductions included), and every Ledger feature that
needs a capability it lacks raises CapabilityMissing naming the capability, the store and
the feature -- before anything is written.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from contextledger import Ledger, Message
from contextledger.core.changeset import Changeset
from contextledger.errors import (
    CapabilityMissing,
    ConcurrencyConflict,
    ConfigurationError,
    ContextLedgerError,
    DuplicateEntry,
    EntryNotFound,
    LedgerClosed,
    SessionDeleted,
)
from contextledger.managers.sliding_window import SlidingWindowConversationManager
from contextledger.model.records import ConversationState, Snapshot, ViewEntry
from contextledger.stores.base import LedgerStore, check_storable
from contextledger.stores.capabilities import ALL, HISTORY, SESSIONS, capabilities_of
from contextledger.stores.memory import MemoryStore
from contextledger.testing.contract import StoreContract
from contextledger.testing.required import RequiredContract
from tests.conftest import STORE_BACKENDS


class DictStore:
    """The required part of the store protocol and nothing else: conversations in a dict."""

    url = "dict://"

    def __init__(self) -> None:
        self._convs: dict[tuple[str, str], tuple[ConversationState, dict[str, ViewEntry], set[str]]] = {}
        self._applied: dict[str, int] = {}  # changeset id -> the version it made (exactly once)
        self._lock = threading.Lock()
        self._closed = False

    def load(self, session_id: str, agent_id: str) -> Snapshot | None:
        with self._lock:
            self._check_open()
            found = self._convs.get((session_id, agent_id))
            if found is None:
                return None
            view = sorted(found[1].values(), key=lambda e: (e.seq, e.kind != "summary"))
            return Snapshot(state=found[0], entries=tuple(view))

    def commit(self, changeset: Changeset) -> int:
        check_storable(changeset)
        key = (changeset.session_id, changeset.agent_id)
        with self._lock:
            self._check_open()
            if changeset.changeset_id in self._applied:
                return self._applied[changeset.changeset_id]
            state, view, seen = self._convs.get(key) or (
                ConversationState(session_id=key[0], agent_id=key[1]),
                {},
                set(),
            )
            if changeset.expected_version > 0 and key not in self._convs:
                raise SessionDeleted(f"no conversation {key}")
            if state.version != changeset.expected_version:
                raise ConcurrencyConflict(f"version {state.version}, expected {changeset.expected_version}")
            view, seen = dict(view), set(seen)  # staged: nothing changes unless all of it applies
            view.update({e.entry_id: e for e in changeset.restore})
            for entry in changeset.appends:
                if entry.entry_id in seen:
                    raise DuplicateEntry(entry.entry_id)
                seen.add(entry.entry_id)
                view[entry.entry_id] = entry
            for entry_id, pinned in changeset.pins.items():
                old = _active(view, entry_id)
                view[entry_id] = old.model_copy(update={"message": old.message.with_pin(pinned)})
            for rev in changeset.revisions:
                old = _active(view, rev.message_id)
                tokens = old.tokens if rev.tokens is None else rev.tokens
                update = {"message": old.message.with_content(rev.content), "tokens": tokens}
                view[rev.message_id] = old.model_copy(update=update)
            summary = changeset.summary
            for entry_id in {*changeset.evict, *(summary.replaces if summary else ())}:
                _active(view, entry_id)
                del view[entry_id]
            if summary is not None:
                seen.add(summary.summary_id)
                view[summary.summary_id] = ViewEntry(
                    entry_id=summary.summary_id,
                    kind="summary",
                    seq=summary.seq,
                    message=summary.to_message(),
                    tokens=summary.tokens,
                )
            state = changeset.state_after(state, changeset.new_version)
            self._convs[key] = (state, view, seen)
            self._applied[changeset.changeset_id] = state.version
            return state.version

    def close(self) -> None:
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise LedgerClosed("the dict store is closed")


def _active(view: dict[str, ViewEntry], entry_id: str) -> ViewEntry:
    if entry_id not in view:
        raise EntryNotFound(f"{entry_id} is not an active entry")
    return view[entry_id]


class TestDictStore(RequiredContract):
    """The required contract, on the store above."""

    @pytest.fixture
    def store(self) -> LedgerStore:
        return DictStore()


class TestDictStoreInTheFullSuite(StoreContract):
    """The full suite skips, by name, what the dict store does not declare; what it runs passes."""

    @pytest.fixture
    def store(self) -> LedgerStore:
        return DictStore()

    @pytest.fixture
    def lost_reply(self) -> Any:
        pytest.skip("an in-process dict cannot lose a reply")


def test_the_dict_store_is_a_store_with_no_capability() -> None:
    store = DictStore()
    assert isinstance(store, LedgerStore)
    assert capabilities_of(store) == frozenset()
    assert Ledger(store).url == "dict://"


def test_a_conversation_with_a_manager_runs_on_it() -> None:
    ledger = Ledger(DictStore())
    conv = ledger.conversation("s", manager=SlidingWindowConversationManager(window_size=4, per_turn=True))
    for i in range(6):
        conv.append(Message.user(f"question {i}"))
        conv.before_model_call()
        conv.append(Message.assistant(f"answer {i}"))
    assert len(conv.view) <= 4
    assert [e.message.plain_text for e in conv.view][-1] == "answer 5"
    restored = ledger.conversation("s")
    assert list(restored.view.entries) == list(conv.view.entries)
    assert restored.model_call_count == 6


def test_a_refresh_reads_the_view_on_a_store_without_the_state_read() -> None:
    ledger = Ledger(DictStore())
    mine = ledger.conversation("s")
    mine.append(Message.user("one"))
    mine.refresh()
    ledger.conversation("s").append(Message.assistant("two"))
    mine.refresh()  # no conversation_state to tell whether it moved: the view is read
    assert [e.message.plain_text for e in mine.view] == ["one", "two"]


FEATURES: list[tuple[str, str, Callable[[Ledger], object]]] = [
    ("history", "Ledger.history", lambda ledger: ledger.history("s")),
    ("history", "Ledger.reductions", lambda ledger: ledger.reductions("s")),
    ("sessions", "Ledger.sessions", lambda ledger: ledger.sessions()),
    ("sessions", "Ledger.delete_session", lambda ledger: ledger.delete_session("s")),
    ("erasure", "Ledger.tombstones", lambda ledger: ledger.tombstones("s")),
    ("scopes", "Ledger.app_state", lambda ledger: ledger.app_state("app")),
    ("expiry", "Ledger.expirations", lambda ledger: ledger.expirations("s")),
    ("history", "Ledger.view_at", lambda ledger: ledger.view_at("s", model_call=1)),
    ("history", "Ledger.fork", lambda ledger: ledger.fork("s", "t")),
    ("history", "Ledger.erase", lambda ledger: ledger.erase("s", "m", reason="asked")),
    ("history", "Ledger.export_records", lambda ledger: ledger.export_records("s")),
    ("transfer", "Ledger.copy_to target", lambda ledger: Ledger.connect("memory://").copy_to(ledger, ["s"])),
]


@pytest.mark.parametrize(("capability", "feature", "call"), FEATURES, ids=[f[1] for f in FEATURES])
def test_a_feature_needing_a_missing_capability_is_refused_typed(
    capability: str, feature: str, call: Callable[[Ledger], object]
) -> None:
    store = DictStore()
    ledger = Ledger(store)
    ledger.conversation("s").append(Message.user("hello"))
    before = store.load("s", "default")
    with pytest.raises(CapabilityMissing) as caught:
        call(ledger)
    error = caught.value
    assert isinstance(error, ContextLedgerError)
    assert isinstance(error, ConfigurationError)
    assert (error.capability, error.store, error.feature) == (capability, "DictStore", feature)
    assert str(error) == f"{feature} needs the {capability!r} capability, which the store DictStore does not declare"
    assert store.load("s", "default") == before  # refused before anything was written


def test_undo_needs_the_history_capability() -> None:
    conv = Ledger(DictStore()).conversation("s")
    conv.append(Message.user("a"))
    with pytest.raises(CapabilityMissing, match=r"undo needs the 'history' capability, which the store DictStore"):
        conv.undo("some-reduction")


def test_a_wrapper_declares_what_it_passes_on() -> None:
    class Declaring(DictStore):
        capabilities = frozenset({"history"})

    assert HISTORY.held_by(Declaring())
    assert not SESSIONS.held_by(Declaring())


@pytest.mark.parametrize("backend", STORE_BACKENDS)
def test_each_backend_declares_every_capability_but_settling(backend: str, request: pytest.FixtureRequest) -> None:
    store = request.getfixturevalue(f"{backend}_store")
    expected = {c.name for c in ALL} - ({"settle_erasure"} if backend == "memory" else set())
    assert capabilities_of(store) == expected


def test_a_forwarding_proxy_is_judged_by_what_it_wraps() -> None:
    class Proxy:
        def __init__(self, inner: object) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    assert capabilities_of(Proxy(DictStore())) == frozenset()
    assert "history" in capabilities_of(Proxy(MemoryStore()))
    assert capabilities_of(Proxy(DictStore())) == frozenset()  # not cached from the first
