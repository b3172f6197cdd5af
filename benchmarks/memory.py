"""What an open conversation holds: 1,000 conversations open in one process.

Appends ``--turns`` four-message turns to each of ``--conversations`` conversations on
one ledger (SQLite file by default, or ``memory://``), keeps them all open, and reports
what the process holds for them (``tracemalloc``, after a full collection) against the
text of their views: the UTF-8 bytes of every text, tool input and tool result string.
Then the same conversations are closed and reopened (restored from the database) and
measured again, since a restored view is decoded from rows rather than shared with the
caller's messages. Target (issue 24, part 5): at most twice the text plus a few KB each.

    python benchmarks/memory.py                              # 1,000 conversations x 10 turns
    python benchmarks/memory.py --conversations 200 --turns 50 --url memory://
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from contenders.cl import native_turn
from contextledger import Ledger
from contextledger.conversation.conversation import Conversation


def text_bytes(conversations: list[Conversation]) -> int:
    """UTF-8 bytes of every string in the views' content (text, tool input, tool results)."""
    total = 0

    def walk(value: Any) -> None:
        nonlocal total
        if isinstance(value, str):
            total += len(value.encode())
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item)

    for conversation in conversations:
        for entry in conversation.view:
            walk(entry.message.content)
    return total


def held(build: Any) -> tuple[Any, int]:
    """What ``build()`` returns and the bytes it left allocated."""
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    result = build()
    gc.collect()
    return result, tracemalloc.get_traced_memory()[0] - before


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--conversations", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--url", default=None, help="default: a SQLite file in a temporary directory")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        # What each conversation holds itself: no views kept by the ledger for the next open.
        ledger = Ledger.connect(args.url or f"sqlite:///{directory}/memory.db", shared_views=0)
        sessions = [f"s{n}" for n in range(args.conversations)]
        turns = {s: [native_turn(s, n) for n in range(args.turns)] for s in sessions}
        tracemalloc.start()

        def open_and_append() -> list[Conversation]:
            opened = [ledger.conversation(s, "agent") for s in sessions]
            for conversation in opened:
                for messages in turns[conversation.session_id]:
                    conversation.append(*messages)
            return opened

        # The caller's messages stay alive here (as a host's own list would): the ledger's
        # share of them is what it adds.
        conversations, appended = held(open_and_append)
        text = text_bytes(conversations)
        del conversations
        gc.collect()
        turns.clear()
        restored, reopened = held(lambda: [ledger.conversation(s, "agent") for s in sessions])
        for conversation in restored:
            len(conversation.view)
        restored_text = text_bytes(restored)
        tracemalloc.stop()
        ledger.close()
    n = args.conversations
    print(
        f"{n} conversations x {args.turns} turns ({args.turns * 4} messages each), "
        f"text {text / n / 1024:.1f} KB per conversation"
    )
    print(
        f"appended (messages shared with the caller): {appended / n / 1024:.1f} KB held per conversation, "
        f"{appended / text:.2f}x its text"
    )
    print(
        f"restored (decoded from the database): {reopened / n / 1024:.1f} KB per conversation, "
        f"{reopened / restored_text:.2f}x its text"
    )


if __name__ == "__main__":
    main()
