"""Child processes of the Strands tests: a restart in a fresh process, and real crashes.

Run as ``python -m tests.strands.child <command> ...``; results are written as JSON
(bytes kept) to the ``--out`` file. A crash is ``os._exit``: no ``finally`` block, no
hook and no flush runs, as when the machine dies.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path
from typing import Any

from strands import Agent, tool
from strands.session.file_session_manager import FileSessionManager
from strands.session.session_manager import SessionManager

from contextledger.integrations.strands import LedgerSessionManager
from contextledger.integrations.strands.scripted import CallTool, Reply, Step
from tests.strands.scenarios import MANAGERS, build_agent, dumps, model_of, remember, snapshot

CRASH_EXIT = 17


def _session_manager(backend: str, target: str, session_id: str) -> SessionManager:
    if backend == "file":
        return FileSessionManager(session_id, storage_dir=target)
    return LedgerSessionManager(session_id, url=target)


def _write(out: str, value: Any) -> None:
    Path(out).write_text(dumps(value))


def restore(args: argparse.Namespace) -> None:
    """Restore the agent from the ledger, report it, then run one more turn and report again."""
    session_manager = LedgerSessionManager(args.session, url=args.url)
    agent = build_agent(session_manager, MANAGERS[args.kind](), agent_id=args.agent_id)
    conversation = session_manager.conversation(agent.agent_id)
    restored = snapshot(agent, conversation.model_call_count)
    model_of(agent).extend([Reply("one more")])
    agent("One more?")
    after = snapshot(agent, conversation.model_call_count)
    after["model_calls"] = len(model_of(agent).calls)
    _write(args.out, {"restored": restored, "after": after})
    session_manager.close()


@tool
def slow_lookup(key: str) -> str:
    """Look up a key (the process dies while it runs)."""
    os._exit(CRASH_EXIT)


def crash_mid_tool(args: argparse.Namespace) -> None:
    """Die while a tool runs: the toolUse is stored, its toolResult never is."""
    agent = build_agent(
        _session_manager(args.backend, args.target, args.session),
        MANAGERS["sliding"](),
        tools=[slow_lookup, remember],
    )
    model = model_of(agent)
    model.extend([Reply("Hello!")])
    agent("Hi.")
    model.extend([CallTool("slow_lookup", {"key": "alpha"}, "tu-crash")])
    _write(args.out, {"before_crash": [dict(m) for m in agent.messages]})
    agent("Look up alpha.")
    raise AssertionError("the tool should have ended the process")


def crash_after_reduction(args: argparse.Namespace) -> None:
    """Die during a model call, right after a per-turn reduction before it trimmed the window."""
    agent: Agent | None = None

    def die(_messages: Any) -> Any:
        assert agent is not None
        _write(args.out, {"live": [dict(m) for m in agent.messages]})
        os._exit(CRASH_EXIT)

    from strands.agent.conversation_manager import SlidingWindowConversationManager

    agent = build_agent(
        _session_manager(args.backend, args.target, args.session),
        SlidingWindowConversationManager(window_size=4, per_turn=True),
    )
    model = model_of(agent)
    steps: list[Step] = [Reply(f"answer {i}") for i in range(3)]
    for i, step in enumerate(steps):
        model.extend([step])
        agent(f"question {i}")
    model.extend([die])
    agent("question 3")
    raise AssertionError("the model should have ended the process")


def swarm_crash(args: argparse.Namespace) -> None:
    """Run a Swarm whose second node dies mid-call: the first node's result is all that was synced."""
    from tests.strands.teams import first_swarm_run, session_manager

    _write(args.out, {"started": "swarm"})
    first_swarm_run(session_manager(args.backend, args.target, args.session), writer_crashes=True)("Write a report")
    raise AssertionError("the writer should have ended the process")


def graph_crash(args: argparse.Namespace) -> None:
    """Run a Graph whose last node dies mid-call."""
    from tests.strands.teams import first_graph_run, session_manager

    _write(args.out, {"started": "graph"})
    first_graph_run(session_manager(args.backend, args.target, args.session), review_crashes=True)("Ship it")
    raise AssertionError("the review should have ended the process")


def crash_in_model(args: argparse.Namespace) -> None:
    """Two plain turns, then die during the third model call."""
    from strands.agent.conversation_manager import NullConversationManager

    agent = build_agent(_session_manager(args.backend, args.target, args.session), NullConversationManager())
    model = model_of(agent)
    for i in range(2):
        model.extend([Reply(f"answer {i}")])
        agent(f"question {i}")
    _write(args.out, {"committed": [m["content"][0]["text"] for m in agent.messages]})
    model.extend([lambda _messages: os._exit(CRASH_EXIT)])
    agent("the question it died on")
    raise AssertionError("the model should have ended the process")


def main(argv: list[str]) -> None:
    warnings.simplefilter("ignore")
    parser = argparse.ArgumentParser(prog="tests.strands.child")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("restore")
    p.add_argument("--url", required=True)
    p.add_argument("--session", required=True)
    p.add_argument("--kind", required=True, choices=sorted(MANAGERS))
    p.add_argument("--agent-id", default=None)
    p.add_argument("--out", required=True)
    for name in ("crash-mid-tool", "crash-after-reduction", "swarm-crash", "graph-crash", "crash-in-model"):
        p = sub.add_parser(name)
        p.add_argument("--backend", required=True, choices=["file", "ledger"])
        p.add_argument("--target", required=True)
        p.add_argument("--session", required=True)
        p.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    commands = {
        "restore": restore,
        "crash-mid-tool": crash_mid_tool,
        "crash-after-reduction": crash_after_reduction,
        "swarm-crash": swarm_crash,
        "graph-crash": graph_crash,
        "crash-in-model": crash_in_model,
    }
    commands[args.command](args)


if __name__ == "__main__":
    main(sys.argv[1:])
