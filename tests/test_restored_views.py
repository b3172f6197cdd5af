"""A view restored from the memory store shares the store's messages (immutable), not copies of them."""

from __future__ import annotations

from contextledger import Ledger, Message


def test_a_memory_restore_shares_the_held_messages() -> None:
    with Ledger.connect("memory://") as ledger:
        sent = [Message.user("question"), Message.tool_use("t1", "lookup", {"q": "x"}), Message.tool_result("t1", "r")]
        ledger.conversation("s", "agent").append(*sent)
        first = ledger.conversation("s", "agent").view
        second = ledger.conversation("s", "agent").view
        assert [e.message for e in first] == sent
        # One message object per entry, whichever view holds it: restoring copies no message.
        assert all(a.message is b.message for a, b in zip(first, second, strict=True))
        # Each entry's fields-set is the one every restored entry shares, not a set per entry.
        assert first[0].model_fields_set is first[1].model_fields_set
        ledger.conversation("s", "agent").pin(sent[0].message_id)
        pinned = ledger.conversation("s", "agent").view
        assert pinned[0].message == sent[0].with_pin(True)
        assert first[0].message == sent[0]  # an earlier view keeps what it showed
