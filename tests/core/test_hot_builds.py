"""What the hot path builds without a second validation or a UUID object: fresh ids and an appending edit."""

from __future__ import annotations

import itertools
import time
import uuid

from contextledger.model.ids import random_uuid, random_uuid_hex
from contextledger.model.messages import new_message_id
from contextledger.model.records import new_id


def test_hex_ids_are_version_7_uuids_in_uuid_hex_form() -> None:
    seen = set()
    for _ in range(2000):
        value = random_uuid_hex()
        parsed = uuid.UUID(hex=value)
        assert parsed.version == 7
        assert parsed.variant == uuid.RFC_4122
        assert parsed.hex == value  # 32 lowercase hex digits, no dashes
        seen.add(value)
    assert len(seen) == 2000


def test_dashed_ids_are_canonical_version_7_uuids() -> None:
    for _ in range(2000):
        value = random_uuid()
        parsed = uuid.UUID(value)
        assert parsed.version == 7
        assert parsed.variant == uuid.RFC_4122
        assert str(parsed) == value


def _unix_ms(value: str) -> int:
    return int(uuid.UUID(value).hex[:12], 16)


def test_ids_carry_the_time_they_were_made_and_sort_by_it() -> None:
    before = time.time_ns() // 1_000_000
    made: list[str] = []
    for _ in range(300):
        made.append(random_uuid_hex())
        made.append(random_uuid())
        if len(made) % 40 == 0:
            time.sleep(0.002)  # let the clock move on to later milliseconds
    after = time.time_ns() // 1_000_000
    stamps = [_unix_ms(value) for value in made]
    assert all(before <= stamp <= after for stamp in stamps)
    assert stamps == sorted(stamps)
    assert len(set(stamps)) > 1
    # An id of a later millisecond sorts after one of an earlier millisecond, as text.
    hexes = [uuid.UUID(value).hex for value in made]
    pairs = list(zip(stamps, hexes, strict=True))
    for (stamp_a, a), (stamp_b, b) in itertools.pairwise(pairs):
        if stamp_a < stamp_b:
            assert a < b
    # The bits after the timestamp are random: 2,000 ids made at once are all distinct.
    assert len({random_uuid_hex() for _ in range(2000)}) == 2000


def test_the_library_ids_use_them() -> None:
    assert uuid.UUID(hex=new_id()).version == 7
    assert len(new_id()) == 32
    message_id = new_message_id()
    assert str(uuid.UUID(message_id)) == message_id
    assert uuid.UUID(message_id).version == 7


def test_an_appending_edit_is_the_edit_the_constructor_builds() -> None:
    from contextledger import Message
    from contextledger.core.changeset import Edit

    messages = [Message.user("q"), Message.assistant("a")]
    built = Edit.appending(messages)
    # Every field, in order, as the constructor sets it: a field added to Edit fails here.
    assert built.__dict__ == Edit(appends=tuple(messages)).__dict__
    assert list(built.__dict__) == list(Edit.model_fields)
    assert built.model_fields_set == set(Edit.model_fields)
