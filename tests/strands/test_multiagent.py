"""Swarm and Graph state in the ledger: committed atomically, resumed by a new orchestrator, loud when impossible.

Each crash runs in a child process (``os._exit`` mid-call), once with Strands' own
``FileSessionManager`` and once with ``LedgerSessionManager``; the resumed run in this
process must do exactly what Strands' file manager makes it do.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from strands import Agent
from strands.multiagent import Swarm
from strands.multiagent.base import MultiAgentBase, MultiAgentResult

from contextledger.core.changeset import Changeset
from contextledger.errors import ConfigurationError
from contextledger.integrations.strands import LedgerSessionManager, Reply, ScriptedModel
from contextledger.integrations.strands.multiagent import multi_agent_id
from contextledger.ledger import Ledger
from tests.strands.conftest import run_child
from tests.strands.teams import CRASH_EXIT, first_graph_run, first_swarm_run, graph_team, session_manager, swarm_team


def _crash_then_resume_swarm(backend: str, target: str, tmp_path: Path) -> dict[str, Any]:
    run_child(
        "swarm-crash",
        "--backend",
        backend,
        "--target",
        target,
        "--session",
        "s",
        out=tmp_path / f"{backend}.json",
        expect_exit=CRASH_EXIT,
    )
    swarm = swarm_team(session_manager(backend, target, "s"), researcher=[], writer=[Reply("report written")])
    resumed_state = swarm.serialize_state()
    result = swarm("Write a report")
    models = {name: node.executor.model for name, node in swarm.nodes.items()}
    return {
        "resumed": {k: resumed_state[k] for k in ("status", "node_history", "next_nodes_to_execute")},
        "status": result.status.value,
        "history": [n.node_id for n in result.node_history],
        "results": sorted(result.results),
        "calls": {name: len(m.calls) for name, m in models.items()},  # type: ignore[attr-defined]
        "final": str(result.results["writer"].result),
    }


def test_an_interrupted_swarm_resumes_where_the_file_session_manager_resumes(tmp_path: Path) -> None:
    file_run = _crash_then_resume_swarm("file", str(tmp_path / "sessions"), tmp_path)
    ledger_run = _crash_then_resume_swarm("ledger", f"sqlite:///{tmp_path / 'ledger.db'}", tmp_path)
    assert ledger_run == file_run
    # the researcher's finished node was not run again: only the writer was called, once
    assert ledger_run["resumed"] == {
        "status": "executing",
        "node_history": ["researcher"],
        "next_nodes_to_execute": ["writer"],
    }
    assert ledger_run["calls"] == {"researcher": 0, "writer": 1}
    assert ledger_run["history"] == ["researcher", "writer"]
    assert ledger_run["status"] == "completed"
    assert ledger_run["final"].strip() == "report written"


def _crash_then_resume_graph(backend: str, target: str, tmp_path: Path) -> dict[str, Any]:
    run_child(
        "graph-crash",
        "--backend",
        backend,
        "--target",
        target,
        "--session",
        "g",
        out=tmp_path / f"g-{backend}.json",
        expect_exit=CRASH_EXIT,
    )
    graph = graph_team(session_manager(backend, target, "g"), steps={"review": [Reply("approved")]})
    resumed_state = graph.serialize_state()
    result = graph("Ship it")
    return {
        # Parallel nodes complete in either order, with either session manager.
        "resumed": {
            "status": resumed_state["status"],
            "completed_nodes": sorted(resumed_state["completed_nodes"]),
            "next_nodes_to_execute": resumed_state["next_nodes_to_execute"],
        },
        "status": result.status.value,
        "order": [n.node_id for n in result.execution_order],
        "results": {k: str(v.result).strip() for k, v in result.results.items()},
        "calls": {name: len(node.executor.model.calls) for name, node in graph.nodes.items()},  # type: ignore[union-attr]
    }


def test_an_interrupted_graph_resumes_where_the_file_session_manager_resumes(tmp_path: Path) -> None:
    file_run = _crash_then_resume_graph("file", str(tmp_path / "sessions"), tmp_path)
    ledger_run = _crash_then_resume_graph("ledger", f"sqlite:///{tmp_path / 'ledger.db'}", tmp_path)
    assert ledger_run == file_run
    assert sorted(ledger_run["resumed"]["completed_nodes"]) == ["draft", "plan"]
    assert ledger_run["resumed"]["next_nodes_to_execute"] == ["review"]
    assert ledger_run["calls"] == {"plan": 0, "draft": 0, "review": 1}
    assert ledger_run["status"] == "completed"
    assert ledger_run["results"] == {"plan": "the plan", "draft": "the draft", "review": "approved"}


def test_each_sync_is_one_commit_of_the_whole_state_and_show_names_it(sqlite_url: str, invoke_cli: Any) -> None:
    ledger = Ledger.connect(sqlite_url)
    commits: list[Changeset] = []
    commit = ledger.store.commit

    def spy(changeset: Changeset) -> int:
        commits.append(changeset)
        return commit(changeset)

    ledger.store.commit = spy  # type: ignore[method-assign]
    swarm = first_swarm_run(LedgerSessionManager("s", ledger=ledger))
    assert commits == []  # set-up (and a restore) never writes
    result = swarm("Write a report")
    assert result.status.value == "completed"
    # one commit after each node and one at the end, each the whole document, nothing else
    assert len(commits) == 3
    for changeset in commits:
        assert changeset.agent_id == multi_agent_id("team") == "multi_agent:team"
        assert not changeset.appends
        assert changeset.reduction is None
        assert changeset.agent_state is not None
        assert changeset.agent_state["type"] == "swarm"
    assert commits[-1].agent_state == json.loads(json.dumps(swarm.serialize_state()))
    stored = ledger.conversation("s", "multi_agent:team").agent_state
    assert stored["status"] == "completed"
    assert stored["node_history"] == ["researcher", "writer"]
    ledger.close()

    shown = invoke_cli("show", "s", "--url", sqlite_url)
    assert "multi_agent:team" in shown


def test_a_completed_swarm_starts_afresh_on_the_same_session(sqlite_url: str) -> None:
    first_swarm_run(LedgerSessionManager("s", url=sqlite_url))("Write a report")
    again = swarm_team(LedgerSessionManager("s", url=sqlite_url), researcher=[Reply("all mine")], writer=[])
    result = again("Another report")
    assert [n.node_id for n in result.node_history] == ["researcher"]
    with Ledger.connect(sqlite_url) as ledger:
        state = ledger.conversation("s", "multi_agent:team").agent_state
    assert state["node_history"] == ["researcher"]
    assert state["current_task"] == "Another report"


def test_what_strands_cannot_persist_fails_loudly(memory_ledger: Ledger) -> None:
    session = LedgerSessionManager("s", ledger=memory_ledger)
    # Strands refuses a session manager on the node agents of a Swarm (and of a Graph)
    node = Agent(name="solo", model=ScriptedModel([]), session_manager=LedgerSessionManager("n", ledger=memory_ledger))
    with pytest.raises(ValueError, match="not supported for Swarm agents"):
        Swarm([node])
    # one orchestrator id per live orchestrator in a session
    keep = first_swarm_run(session)
    with pytest.raises(ConfigurationError, match="already bound"):
        first_swarm_run(session)
    assert keep.id == "team"
    # a Graph cannot resume the Swarm state stored under its id
    keep("Write a report")
    with pytest.raises(ConfigurationError, match="'swarm' state"):
        graph_team(LedgerSessionManager("s", ledger=memory_ledger), steps={}, graph_id="team")
    # the multi-agent ids are reserved
    with pytest.raises(ConfigurationError, match="reserved"):
        Agent(agent_id="multi_agent:team", model=ScriptedModel([]), session_manager=session)
    # an orchestrator that cannot serialize its state is refused at set-up, not skipped
    with pytest.raises(ConfigurationError, match="serialize_state"):
        session.initialize_multi_agent(_Opaque())
    # a sync for an orchestrator this manager never initialized
    with pytest.raises(ConfigurationError, match="not initialized"):
        LedgerSessionManager("other", ledger=memory_ledger).sync_multi_agent(keep)


class _Opaque(MultiAgentBase):
    id = "opaque"

    async def invoke_async(self, task: Any, invocation_state: Any = None, **kwargs: Any) -> MultiAgentResult:
        raise NotImplementedError


def test_graph_state_survives_a_restart_without_a_crash(sqlite_url: str) -> None:
    graph = first_graph_run(LedgerSessionManager("g", url=sqlite_url))
    assert graph("Ship it").status.value == "completed"
    with Ledger.connect(sqlite_url) as ledger:
        assert ledger.agents("g") == ["multi_agent:pipeline"]
        state = ledger.conversation("g", "multi_agent:pipeline").agent_state
    assert sorted(state["completed_nodes"]) == ["draft", "plan", "review"]
    assert state == json.loads(json.dumps(graph.serialize_state())) | {"execution_time": state["execution_time"]}
