"""What the hot path builds without a second validation or a UUID object: fresh ids and an appending edit."""

from __future__ import annotations

import uuid

from contextledger.model.ids import random_uuid, random_uuid_hex
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


def test_dashed_ids_are_canonical_version_4_uuids() -> None:
    for _ in range(2000):
        value = random_uuid()
        parsed = uuid.UUID(value)
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122
        assert str(parsed) == value


def test_the_library_ids_use_them() -> None:
    assert uuid.UUID(hex=new_id()).version == 4
    assert len(new_id()) == 32
    message_id = new_message_id()
    assert str(uuid.UUID(message_id)) == message_id
    assert uuid.UUID(message_id).version == 4


def test_an_appending_edit_is_the_edit_the_constructor_builds() -> None:
    from contextledger import Message
    from contextledger.core.changeset import Edit

    messages = [Message.user("q"), Message.assistant("a")]
    built = Edit.appending(messages)
    # Every field, in order, as the constructor sets it: a field added to Edit fails here.
    assert built.__dict__ == Edit(appends=tuple(messages)).__dict__
    assert list(built.__dict__) == list(Edit.model_fields)
    assert built.model_fields_set == set(Edit.model_fields)
