"""What the hot path builds without a second validation or a UUID object: fresh ids and an appending edit."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable
from itertools import pairwise

import pytest
from pydantic import BaseModel

from contextledger.model.ids import is_time_ordered, random_uuid_hex, time_ordered_uuid, time_ordered_uuid_hex
from contextledger.model.messages import new_message_id
from contextledger.model.records import new_id


def test_hex_ids_are_version_4_uuids_as_uuid4_hex_writes_them() -> None:
    seen = set()
    for _ in range(2000):
        value = random_uuid_hex()
        parsed = uuid.UUID(hex=value)
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122
        assert parsed.hex == value  # 32 lowercase hex digits, no dashes
        seen.add(value)
    assert len(seen) == 2000


def test_message_ids_are_canonical_version_7_uuids_carrying_the_time_they_were_made() -> None:
    seen = set()
    for _ in range(2000):
        before = time.time_ns() // 1_000_000
        value = time_ordered_uuid()
        after = time.time_ns() // 1_000_000
        parsed = uuid.UUID(value)
        assert parsed.version == 7
        assert parsed.variant == uuid.RFC_4122
        assert str(parsed) == value
        assert before <= parsed.int >> 80 <= after  # the first 48 bits: Unix milliseconds
        assert is_time_ordered(value)
        seen.add(value)
    assert len(seen) == 2000


@pytest.mark.parametrize("make", [time_ordered_uuid, time_ordered_uuid_hex])
def test_ids_made_in_a_later_millisecond_sort_after(make: Callable[[], str]) -> None:
    batches: list[list[str]] = []
    for _ in range(5):
        batches.append([make() for _ in range(50)])
        time.sleep(0.002)
    for earlier, later in pairwise(batches):
        assert max(earlier) < min(later)
    assert all(is_time_ordered(i) for batch in batches for i in batch)
    hex_form = [uuid.UUID(i) for batch in batches for i in batch]
    assert all(u.version == 7 and u.variant == uuid.RFC_4122 for u in hex_form)


def test_only_time_ordered_ids_are_taken_for_them() -> None:
    assert not is_time_ordered(str(uuid.uuid4()))
    assert not is_time_ordered(random_uuid_hex())
    assert not is_time_ordered(time_ordered_uuid().upper())
    assert not is_time_ordered(time_ordered_uuid() + "x")


def test_the_library_ids_use_them() -> None:
    summary_id = new_id()
    assert uuid.UUID(hex=summary_id).version == 7
    assert uuid.UUID(hex=summary_id).hex == summary_id
    assert is_time_ordered(summary_id)
    message_id = new_message_id()
    assert str(uuid.UUID(message_id)) == message_id
    assert uuid.UUID(message_id).version == 7


def test_an_appending_edit_is_the_edit_the_constructor_builds() -> None:
    from contextledger import Message
    from contextledger.core.changeset import Edit

    messages = [Message.user("q"), Message.assistant("a")]
    for built in (Edit.appending(messages), Edit.appending(messages, checked=True)):
        # Every field, in order, as the constructor sets it: a field added to Edit fails here.
        assert built.__dict__ == Edit(appends=tuple(messages)).__dict__
        assert list(built.__dict__) == list(Edit.model_fields)
        assert built.model_fields_set == set(Edit.model_fields)


@pytest.mark.parametrize("changes", [{}, {"model_call_count": 3}, {"next_seq": 9, "manager_state": {"k": 1}}])
def test_the_state_after_a_commit_is_the_validated_state(changes: dict[str, object]) -> None:
    from contextledger.core.changeset import Changeset
    from contextledger.model.records import ConversationState

    state = ConversationState(session_id="s", agent_id="a", version=2, next_seq=4, agent_state={"x": 1})
    changeset = Changeset(session_id="s", agent_id="a", expected_version=2, **changes)
    after = changeset.state_after(state, 3)
    expected = ConversationState.model_validate({**state.model_dump(), "version": 3, **changes})
    assert after == expected
    assert list(after.__dict__) == list(ConversationState.model_fields)
    assert after.model_fields_set == set(ConversationState.model_fields)


def test_ids_drawn_ahead_are_never_handed_out_twice_across_threads_or_a_fork() -> None:
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    random_uuid_hex()  # ids are drawn ahead now: the child must not hand out the parent's
    per_thread: list[list[str]] = [[] for _ in range(4)]

    def draw(into: list[str]) -> None:
        into.extend(random_uuid_hex() for _ in range(500))

    threads = [threading.Thread(target=draw, args=(ids,)) for ids in per_thread]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({i for ids in per_thread for i in ids}) == 2000
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe and exits at once
        os.write(write, " ".join(random_uuid_hex() for _ in range(50)).encode())
        os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(read) as pipe:
        child = pipe.read().split()
    parent = [random_uuid_hex() for _ in range(200)]
    assert os.waitstatus_to_exitcode(status) == 0
    assert len(child) == 50
    assert not set(child) & set(parent)


def test_an_append_validates_no_record_and_reads_the_random_source_once_per_many_commits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A turn of prebuilt messages: no pydantic validation in the conversation layer, ids drawn ahead."""
    from contextledger import Ledger, Message

    ledger = Ledger.connect("memory://")
    conversation = ledger.conversation("s", "a")
    conversation.append(Message.user("creates the conversation"))
    turns = [
        [
            Message.user(f"q{n}"),
            Message.tool_use(f"t{n}", "lookup", {"query": "x"}),
            Message.tool_result(f"t{n}", "r"),
            Message.assistant("a"),
        ]
        for n in range(20)
    ]
    validated: list[str] = []
    init = BaseModel.__init__

    def counting_init(self: BaseModel, **data: object) -> None:
        validated.append(type(self).__name__)
        init(self, **data)

    reads: list[int] = []
    urandom = os.urandom

    def counting_urandom(size: int) -> bytes:
        reads.append(size)
        return urandom(size)

    monkeypatch.setattr(BaseModel, "__init__", counting_init)
    monkeypatch.setattr(os, "urandom", counting_urandom)  # the module ids draws from
    for turn in turns:
        conversation.append(*turn)
    ledger.close()
    assert validated == []
    assert len(reads) <= 1  # 20 commits, 128 ids per read
    assert conversation.view.ids[-80:] == [m.message_id for turn in turns for m in turn]
