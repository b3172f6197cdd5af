"""An append of messages with the ids the library makes writes the message-id index's last page, not a page per message.

Counted on SQLite from the WAL itself: after a checkpoint empties it, every frame the next
commit writes names the page it holds, and ``dbstat`` says which b-tree owns that page.
"""

from __future__ import annotations

import sqlite3
import statistics
import struct
import uuid
from pathlib import Path

from contextledger import Ledger, Message

INDEX = "sqlite_autoindex_cl_entries_1"  # UNIQUE (conversation_id, message_id)
HISTORY = 300  # turns first: an index of some forty leaf pages
MEASURED = 20


def _turn(n: int, *, caller_ids: bool) -> list[Message]:
    made = [
        Message.user(f"question {n} " * 20),
        Message.tool_use(f"t{n}", "lookup", {"q": n}),
        Message.tool_result(f"t{n}", "result " * 30),
        Message.assistant(f"answer {n} " * 20),
    ]
    if not caller_ids:
        return made
    return [m.model_copy(update={"message_id": str(uuid.uuid4())}) for m in made]


def _pages_written(path: Path) -> set[int]:
    """The pages the frames of the WAL hold (each frame starts with its page number)."""
    data = path.with_name(path.name + "-wal").read_bytes()
    (page_size,) = struct.unpack(">I", data[8:12])
    frame = 24 + page_size
    return {struct.unpack(">I", data[offset : offset + 4])[0] for offset in range(32, len(data), frame)}


def _index_pages_per_append(path: Path, *, caller_ids: bool) -> list[int]:
    with Ledger.connect(f"sqlite:///{path}") as ledger:
        conversation = ledger.conversation("s", "a")
        for n in range(HISTORY):  # turn by turn, as a conversation grows
            conversation.append(*_turn(n, caller_ids=caller_ids))
        side = sqlite3.connect(path)
        try:
            counts = []
            for n in range(HISTORY, HISTORY + MEASURED):
                side.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
                conversation.append(*_turn(n, caller_ids=caller_ids))
                owned = {p for (p,) in side.execute("SELECT pageno FROM dbstat WHERE name = ?", (INDEX,))}
                counts.append(len(_pages_written(path) & owned))
            return counts
        finally:
            side.close()


def test_a_turn_of_library_made_ids_writes_the_message_id_index_once(tmp_path: Path) -> None:
    made = _index_pages_per_append(tmp_path / "made.db", caller_ids=False)
    random = _index_pages_per_append(tmp_path / "random.db", caller_ids=True)
    # The last leaf, and now and then the leaves and parent of a split, against a leaf per
    # message: four random ids over some forty leaves nearly always land on four.
    print("index pages an append wrote:", made, "with library-made ids;", random, "with uuid4 ids")
    assert statistics.median(made) == 1, made
    assert statistics.mean(made) <= 2, made
    assert statistics.mean(random) >= 3, random  # what the counting sees of random ids (the tree before)
