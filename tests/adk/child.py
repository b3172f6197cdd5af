"""Child processes of the ADK restart test: a run killed with SIGKILL mid-tool, and a fresh process that restores.

Run as ``python -m tests.adk.child <command> --url URL --session ID --out FILE``. ``run``
plays several turns with tools and a context overflow, writes what every model call
received to ``--out`` (fsynced), then starts one more turn whose tool call kills the
process with SIGKILL: no ``finally``, no flush, no plugin close runs. ``restore`` opens
the ledger in a new process, reports the session ADK gets back, runs one more turn and
reports what that model call received.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from pathlib import Path
from typing import Any

from google.genai import types

from contextledger.integrations.adk import CallTool, LedgerSessionService, ledger_session_id
from tests.adk.scenarios import (
    APP,
    TURNS,
    USER,
    build,
    dumps,
    lookup,
    remember,
    say,
    script_with_tools_and_an_overflow,
    sliding,
)


def _write(path: str, value: Any) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(dumps(value))
        handle.flush()
        os.fsync(handle.fileno())


async def run(args: argparse.Namespace) -> None:
    """Play the turns, record the model inputs, then die inside a tool of the last turn."""
    recorded: dict[str, Any] = {}

    def book(city: str) -> dict[str, str]:
        """Book a trip (the process is killed while this runs)."""
        recorded["killed_in_tool"] = city
        _write(args.out, recorded)
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("unreachable")  # pragma: no cover

    service = LedgerSessionService(args.url, manager=sliding(6))
    script = [*script_with_tools_and_an_overflow(), CallTool("book", {"city": "Oslo"}, text="Booking now.")]
    runner, model = build(service, script, tools=(lookup, remember, book))
    session = await service.create_session(app_name=APP, user_id=USER, session_id=args.session)
    for text in TURNS:
        await say(runner, session.id, text)
    recorded["calls"] = [call.contents for call in model.calls]
    _write(args.out, recorded)
    await say(runner, session.id, "Book Oslo.")  # the model asks for "book"; the tool kills the process


async def restore(args: argparse.Namespace) -> None:
    """Restore the session in this new process, then go on for one more turn."""
    async with LedgerSessionService(args.url, manager=sliding(6)) as service:
        session = await service.get_session(app_name=APP, user_id=USER, session_id=args.session)
        assert session is not None
        ledger = await service.ledger()
        key = ledger_session_id(APP, USER, args.session)
        before = await ledger.conversation(key)
        restored = {
            "events": [e.model_dump(mode="json", exclude_none=True) for e in session.events],
            "state": session.state,
            "model_call_count": before.model_call_count,
        }
        runner, model = build(service, ["Your trip is not booked yet; shall I try again?"], tools=(lookup, remember))
        await say(runner, args.session, "Did the booking work?")
        after = await ledger.conversation(key)
        _write(
            args.out,
            {
                "restored": restored,
                "call": model.calls[0].contents,
                "model_call_count": after.model_call_count,
                "last_text": "".join(
                    p.text or "" for p in types.Content.model_validate(model.calls[0].contents[-1]).parts or []
                ),
            },
        )


def main() -> None:
    """Parse the arguments and run the command."""
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["run", "restore"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--session", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    asyncio.run(run(args) if args.command == "run" else restore(args))


if __name__ == "__main__":
    main()
