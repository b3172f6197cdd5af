"""Read conversations back in a fresh process: ``python -m tests.reliability.readback SPEC``.

SPEC is a JSON file ``{"url": ..., "options": {...}, "keys": [[session_id, agent_id], ...]}``;
prints ``{"views": [[record, ...] or null, ...], "agent_states": [...]}`` as JSON, one
entry per key, where a record is :meth:`Message.to_record` of an entry of the restored view.
"""

from __future__ import annotations

import json
import sys

from contextledger import Ledger


def main(spec_path: str) -> None:
    """Print the restored views named by the spec."""
    with open(spec_path) as handle:
        spec = json.load(handle)
    views: list[object] = []
    states: list[object] = []
    with Ledger.connect(spec["url"], **spec["options"]) as ledger:
        for session_id, agent_id in spec["keys"]:
            snapshot = ledger.store.load(session_id, agent_id)
            if snapshot is None:
                views.append(None)
                states.append(None)
                continue
            views.append([e.message.to_record() for e in snapshot.entries])
            states.append(snapshot.state.agent_state)
    json.dump({"views": views, "agent_states": states}, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
