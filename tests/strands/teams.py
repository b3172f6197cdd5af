"""Swarm and Graph teams driven by scripted models, shared by the multi-agent tests and their child processes."""

from __future__ import annotations

import os
from collections.abc import Sequence

from strands import Agent
from strands.multiagent import GraphBuilder, Swarm
from strands.multiagent.graph import Graph
from strands.session.file_session_manager import FileSessionManager
from strands.session.session_manager import SessionManager

from contextledger.integrations.strands import CallTool, LedgerSessionManager, Reply, ScriptedModel
from contextledger.integrations.strands.scripted import Step

CRASH_EXIT = 17


def session_manager(backend: str, target: str, session_id: str) -> SessionManager:
    if backend == "file":
        return FileSessionManager(session_id, storage_dir=target)
    return LedgerSessionManager(session_id, url=target)


def crash(_messages: object) -> Reply:
    """A model step that ends the process, as when the machine dies mid-call."""
    os._exit(CRASH_EXIT)


def _agent(name: str, script: Sequence[Step]) -> Agent:
    return Agent(name=name, agent_id=name, model=ScriptedModel(script), callback_handler=None)


def swarm_team(
    session: SessionManager | None, *, researcher: Sequence[Step], writer: Sequence[Step], swarm_id: str = "team"
) -> Swarm:
    """researcher hands off to writer; writer answers."""
    return Swarm(
        [_agent("researcher", researcher), _agent("writer", writer)],
        session_manager=session,
        id=swarm_id,
    )


def first_swarm_run(session: SessionManager | None, *, writer_crashes: bool = False) -> Swarm:
    return swarm_team(
        session,
        researcher=[CallTool("handoff_to_agent", {"agent_name": "writer", "message": "write it"}, "h1"), Reply("sent")],
        writer=[crash if writer_crashes else Reply("report written")],
    )


def graph_team(
    session: SessionManager | None, *, steps: dict[str, Sequence[Step]], graph_id: str = "pipeline"
) -> Graph:
    """plan -> draft -> review, in a line."""
    builder = GraphBuilder()
    for name in ("plan", "draft", "review"):
        builder.add_node(_agent(name, steps.get(name, ())), name)
    builder.add_edge("plan", "draft")
    builder.add_edge("draft", "review")
    builder.set_entry_point("plan")
    builder.set_graph_id(graph_id)
    if session is not None:
        builder.set_session_manager(session)
    return builder.build()


def first_graph_run(session: SessionManager | None, *, review_crashes: bool = False) -> Graph:
    return graph_team(
        session,
        steps={
            "plan": [Reply("the plan")],
            "draft": [Reply("the draft")],
            "review": [crash if review_crashes else Reply("ok")],
        },
    )
