"""A process that makes model calls on a ledger, records each call's input, then waits to be killed.

    python -m tests.reliability.count_child URL OUT TURNS (deferred|at-once)

``TURNS`` turns (a model call, then its answer appended), then one more model call whose
answer never comes: its input is recorded, ``OUT/ready`` is written, and the process
sleeps until it is killed. Each input is appended to ``OUT/calls.jsonl`` (fsynced)
before the call returns, as a model would receive it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from contextledger import Ledger, Message

SESSION = "count-crash"


def main() -> None:
    url, out, turns, mode = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    ledger = Ledger.connect(url)
    conversation = ledger.conversation(SESSION, defer_count=mode == "deferred")
    conversation.append(Message.user("q0"))
    with (out / "calls.jsonl").open("a") as calls:

        def call() -> None:
            conversation.before_model_call()
            calls.write(json.dumps(conversation.view.ids) + "\n")
            calls.flush()
            os.fsync(calls.fileno())

        for n in range(turns):
            call()
            conversation.append(Message.assistant(f"a{n}"), Message.user(f"q{n + 1}"))
        call()
    (out / "ready").write_text("ready")
    time.sleep(600)  # killed long before


if __name__ == "__main__":
    main()
