"""Errors that used to escape untyped (or a write that failed for a reason of the ledger's own), on every backend.

* bytes in host state: refused as ``InvalidMessage`` before anything is written, on
  every backend and every path (``set_agent_state``, a host's ``Edit``, the first write
  of a conversation or a later one), instead of a bare ``TypeError`` (PostgreSQL), a
  ``StoreError`` or a tagged dict read back by the next process (SQLite);
* a conversation repaired twice for the same interrupted tool call (the first repair
  evicted since): each repair gets an id of its own, instead of ``DuplicateEntry`` on
  every later write -- also when the changesets are replayed on another store;
* a model error whose text holds a lone surrogate: the reactive reduction is recorded,
  the surrogate replaced, instead of ``UnicodeEncodeError`` or a pydantic serialization
  error from ``after_model_call``.
"""

from __future__ import annotations

import math
import subprocess
import sys
from typing import Any

import pytest

from contextledger import ContextWindowOverflowError, Conversation, Message
from contextledger.core.changeset import Changeset, Edit, ReductionPlan
from contextledger.errors import InvalidMessage
from contextledger.managers import SlidingWindowConversationManager
from contextledger.stores.capabilities import CompleteStore
from contextledger.stores.memory import MemoryStore

BAD_STATES: list[dict[str, Any]] = [
    {"": b""},
    {"k": b"\x00\x01"},
    {"nested": {"list": [1, bytearray(b"x")]}},
    {"n": math.nan},
    {"inf": [math.inf]},
    {"s": {1, 2}},
]


def _version(store: CompleteStore, session_id: str) -> int:
    snapshot = store.load(session_id, "default")
    return 0 if snapshot is None else snapshot.state.version


@pytest.mark.parametrize("state", BAD_STATES, ids=repr)
@pytest.mark.parametrize("first_write", [True, False], ids=["first-write", "later-write"])
def test_state_that_is_not_plain_json_is_refused_typed(
    store: CompleteStore, state: dict[str, Any], first_write: bool
) -> None:
    conversation = Conversation(store, "state", "default")
    if not first_write:
        conversation.set_agent_state({"kept": "yes"})
        conversation.append(Message.user("hello"))
    before = _version(store, "state")
    with pytest.raises(InvalidMessage):
        conversation.set_agent_state(state)
    # A host hands state over in an edit, past set_agent_state: the store refuses it the same way.
    with pytest.raises(InvalidMessage):
        conversation.edit(lambda _view: Edit(agent_state=state))
    with pytest.raises(InvalidMessage):
        conversation.edit(lambda _view: Edit(appends=(Message.user("with state"),), agent_state=state))
    assert _version(store, "state") == before
    restored = Conversation(store, "state", "default")
    assert restored.agent_state == ({} if first_write else {"kept": "yes"})


def test_bytes_in_state_name_where_they_are(memory_store: CompleteStore) -> None:
    with pytest.raises(InvalidMessage, match=r"\['nested'\]\['list'\]\[1\].*base64"):
        Conversation(memory_store, "s").set_agent_state({"nested": {"list": [1, b"x"]}})


def test_state_reads_back_exactly_in_a_fresh_process(sqlite_url: str) -> None:
    state = {"text": "\x00\x01 é 😀", "list": [1, 2.5, None, True], "nested": {"": {}}}
    from contextledger import Ledger

    with Ledger.connect(sqlite_url) as ledger:
        ledger.conversation("s").set_agent_state(state)
    code = (
        "import json, sys\nfrom contextledger import Ledger\n"
        f"with Ledger.connect({sqlite_url!r}) as ledger:\n"
        "    print(json.dumps(ledger.conversation('s').agent_state))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    import json

    assert json.loads(out.stdout) == state


def _interrupted_twice(store: CompleteStore) -> Conversation:
    """A tool call interrupted, repaired, the repair evicted, and the next write repairing it again."""
    conversation = Conversation(store, "repair", "default")
    conversation.append(Message.user("read the file"))
    conversation.append(Message.tool_use("t1", "read", {"path": "/f"}))
    conversation.before_model_call()  # the call is not the result: the repair rides along
    repair = conversation.view[-1]
    assert repair.entry_id.startswith("repair-")
    conversation.apply_plan(
        lambda _view: ReductionPlan(strategy="w", evict=(repair.entry_id,)), trigger="per_turn", as_given=True
    )
    conversation.before_model_call()  # the same tool call is interrupted again: a second repair
    return conversation


def test_a_second_repair_of_the_same_call_gets_its_own_id(store: CompleteStore) -> None:
    conversation = _interrupted_twice(store)
    repairs = [
        h.message.message_id for h in store.history("repair", "default") if h.message.message_id.startswith("repair-")
    ]
    assert len(repairs) == 2
    assert len(set(repairs)) == 2
    conversation.append(Message.user("and now?"))  # later writes work
    assert conversation.view[-1].message.plain_text == "and now?"
    assert [r.trigger for r in store.reductions("repair", "default")].count("restore") == 2


class _Recording(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.log: list[Changeset] = []

    def commit(self, changeset: Changeset) -> int:
        version = super().commit(changeset)
        self.log.append(changeset)
        return version


def test_replayed_repairs_apply_on_every_backend(store: CompleteStore) -> None:
    recording = _Recording()
    _interrupted_twice(recording)
    for changeset in recording.log:
        assert store.commit(changeset) == changeset.new_version
        assert store.commit(changeset) == changeset.new_version  # sent again: exactly once
    assert [h.message.message_id for h in store.history("repair", "default")] == [
        h.message.message_id for h in recording.history("repair", "default")
    ]


def test_the_repair_the_host_shows_is_the_one_committed(memory_store: CompleteStore) -> None:
    from contextledger.managers.repair import plan_repair

    conversation = Conversation(memory_store, "shown", "default")
    conversation.append(Message.user("go"))
    conversation.append(Message.tool_use("t1", "read", {}))
    shown = plan_repair(conversation.view, conversation.state.next_seq)
    assert shown is not None
    conversation.append(Message.user("next"))
    assert conversation.view[-2].entry_id == shown.appends[0].message_id


@pytest.mark.parametrize("text", ["too long \ud800 here", "\udfff", "pair \ud83d\ude00 and lone \ud83d"])
def test_an_overflow_error_with_a_lone_surrogate_is_recorded(store: CompleteStore, text: str) -> None:
    conversation = Conversation(store, "overflow", "default", manager=SlidingWindowConversationManager(window_size=4))
    for turn in range(6):
        conversation.append(Message.user(f"q{turn}"), Message.assistant(f"a{turn}"))
    conversation.before_model_call()
    conversation.after_model_call(error=ContextWindowOverflowError(text))
    (reduction,) = [r for r in store.reductions("overflow", "default") if r.trigger == "reactive"]
    assert reduction.error is not None
    assert reduction.error.startswith("ContextWindowOverflowError: ")
    reduction.error.encode("utf-8")  # storable text
    assert "\ufffd" in reduction.error or "😀" in reduction.error
    evictions = store.evictions("overflow", "default", trigger="reactive")
    assert evictions
    assert all(e.error == reduction.error for e in evictions)
