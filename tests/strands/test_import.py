"""``contextledger import strands``: directories written by Strands' own FileSessionManager, restored alike."""

from __future__ import annotations

import gc
import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest
from strands import Agent
from strands.session.file_session_manager import FileSessionManager
from strands.types.content import Message
from strands.types.session import SessionAgent, SessionMessage

from contextledger.errors import ConfigurationError, InvalidMessage
from contextledger.integrations.strands import LedgerSessionManager, Reply, ScriptedModel
from contextledger.integrations.strands.importer import import_file_sessions
from contextledger.ledger import Ledger
from contextledger.stores.capabilities import CompleteStore
from tests.strands.scenarios import MANAGERS, RUNS, build_agent, model_of, play
from tests.strands.teams import first_swarm_run, swarm_team


def _write_sessions(files: Path) -> None:
    """What a Strands user has on disk: two agents of one session, a summarizing one, a Swarm, a redaction."""
    for kind in sorted(RUNS):
        agent = build_agent(FileSessionManager(kind, storage_dir=str(files)), MANAGERS[kind](), agent_id="main")
        agent.state.set("user", {"name": "Ada", "kind": kind})
        play(agent, RUNS[kind])
    helper = Agent(
        model=ScriptedModel([Reply("Hi.", redact_user="[redacted by guardrail]")]),
        agent_id="aux",
        callback_handler=None,
        session_manager=FileSessionManager("sliding", storage_dir=str(files)),
        conversation_manager=MANAGERS["sliding"](),
        # a message pinned when it was written (Strands' pin metadata)
        messages=[
            {"role": "user", "content": [{"text": "Order A-1042."}], "metadata": {"custom": {"pinned": True}}},
            {"role": "assistant", "content": [{"text": "Noted."}]},
        ],
    )
    helper("Hello helper.")
    first_swarm_run(FileSessionManager("team", storage_dir=str(files)))("Write a report")


def _restored(session_manager: Any, kind: str, agent_id: str) -> dict[str, Any]:
    agent = build_agent(session_manager, MANAGERS[kind](), agent_id=agent_id)
    result = {
        "messages": json.loads(json.dumps(agent.messages)),
        "state": agent.state.get(),
        "conversation_manager": agent.conversation_manager.get_state(),
    }
    del agent
    gc.collect()
    return result


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sessions, played once per module: the scripted runs write the same files every time."""
    directory = tmp_path_factory.mktemp("strands-files") / "sessions"
    with warnings.catch_warnings():  # as the autouse _quiet_strands does, which a module fixture precedes
        warnings.simplefilter("ignore", UserWarning)
        _write_sessions(directory)
    return directory


@pytest.fixture
def files(written: Path, tmp_path: Path) -> Path:
    """A copy of the sessions of its own for each test (tests damage or extend them)."""
    return Path(shutil.copytree(written, tmp_path / "sessions"))


def test_cli_import_restores_what_the_file_session_manager_restores(
    files: Path, sqlite_url: str, invoke_cli: Any
) -> None:
    output = invoke_cli("import", "strands", str(files), "--url", sqlite_url)
    assert "4 imported, 0 unchanged, 0 skipped" in output

    for session, kind, agent_id in [
        ("sliding", "sliding", "main"),
        ("summarizing", "summarizing", "main"),
        ("sliding", "sliding", "aux"),
    ]:
        from_files = _restored(FileSessionManager(session, storage_dir=str(files)), kind, agent_id)
        from_ledger = _restored(LedgerSessionManager(session, url=sqlite_url), kind, agent_id)
        # Messages written before Strands gave them a tracking_id get a stable one in the ledger.
        for got, want in zip(from_ledger["messages"], from_files["messages"], strict=True):
            if "tracking_id" not in want:
                assert got.pop("tracking_id")
        assert from_ledger == from_files, f"{session}/{agent_id} restores differently"

    with Ledger.connect(sqlite_url) as ledger:
        assert ledger.agents("sliding") == ["aux", "main"]
        assert ledger.agents("team") == ["multi_agent:team"]
        # what the sliding window had removed is evicted, with trigger import; nothing is lost
        for session in ("sliding", "summarizing"):
            files_count = len(list((files / f"session_{session}/agents/agent_main/messages").iterdir()))
            history = ledger.history(session, "main")
            assert len(history) == files_count
            cm_state = json.loads((files / f"session_{session}/agents/agent_main/agent.json").read_text())[
                "conversation_manager_state"
            ]
            removed = cm_state["removed_message_count"]
            assert removed > 0
            assert [h.status for h in history] == ["evicted"] * removed + ["active"] * (files_count - removed)
            evictions = [e for e in ledger.evictions(session, "main") if e.kind == "message"]
            assert {e.trigger for e in evictions} == {"import"}
            assert len(evictions) == removed
        # the summarizing manager's summary is a summary row replacing the removed messages
        [summary] = ledger.summaries("summarizing", "main")
        summary_message = json.loads((files / "session_summarizing/agents/agent_main/agent.json").read_text())[
            "conversation_manager_state"
        ]["summary_message"]
        assert summary.summary_id == summary_message["tracking_id"]
        assert summary.status == "active"
        assert len(summary.replaces) == removed
        # pins stay pinned
        [pinned] = [h for h in ledger.history("sliding", "aux") if h.message.pinned]
        assert pinned.message.plain_text == "Order A-1042."
        assert ledger.conversation("sliding", "aux").view[0].pinned
        # the redaction shows (Strands keeps no original of it, so there is no revision either)
        view = ledger.conversation("sliding", "aux").view
        assert view[2].message.content == [{"text": "[redacted by guardrail]"}]
        assert ledger.revisions("sliding", "aux") == []


def test_a_redaction_with_its_original_on_file_keeps_the_original_as_a_revision(
    files: Path, memory_ledger: Ledger
) -> None:
    # Files where the record still holds the original next to its redact_message
    path = files / "session_sliding/agents/agent_aux/messages/message_2.json"
    record = json.loads(path.read_text())
    record["message"]["content"] = [{"text": "my card is 4111 1111 1111 1111"}]
    path.write_text(json.dumps(record))
    import_file_sessions(files, memory_ledger, session_ids=["sliding"])
    [revision] = memory_ledger.revisions("sliding", "aux")
    assert revision.reason == "redact"
    assert revision.original == [{"text": "my card is 4111 1111 1111 1111"}]
    assert memory_ledger.conversation("sliding", "aux").view[2].message.content == [{"text": "[redacted by guardrail]"}]


def test_importing_twice_changes_nothing(files: Path, sqlite_url: str, invoke_cli: Any) -> None:
    invoke_cli("import", "strands", str(files), "--url", sqlite_url)
    with Ledger.connect(sqlite_url) as ledger:
        before = {
            (s, a): (ledger.store.load(s, a), ledger.history(s, a))
            for s in ("sliding", "summarizing", "team")
            for a in ledger.agents(s)
        }
    output = invoke_cli("import", "strands", str(files), "--url", sqlite_url)
    assert "0 imported, 4 unchanged, 0 skipped" in output
    with Ledger.connect(sqlite_url) as ledger:
        after = {(s, a): (ledger.store.load(s, a), ledger.history(s, a)) for (s, a) in before}
    assert after == before


def test_an_imported_session_goes_on_in_the_ledger(files: Path, memory_ledger: Ledger) -> None:
    report = import_file_sessions(files, memory_ledger, session_ids=["summarizing", "team"])
    assert [(c.session_id, c.agent_id, c.outcome) for c in report.conversations] == [
        ("summarizing", "main", "imported"),
        ("team", "multi_agent:team", "imported"),
    ]
    agent = build_agent(
        LedgerSessionManager("summarizing", ledger=memory_ledger), MANAGERS["summarizing"](), agent_id="main"
    )
    model_of(agent).extend([Reply("still here")])
    agent("Still there?")
    assert agent.messages[-1]["content"] == [{"text": "still here"}]
    assert agent.messages[0]["tracking_id"] == memory_ledger.summaries("summarizing", "main")[-1].summary_id
    # the imported Swarm state is the one a new Swarm on the session restores
    stored = memory_ledger.conversation("team", "multi_agent:team").agent_state
    assert stored == json.loads((files / "session_team/multi_agents/multi_agent_team/multi_agent.json").read_text())
    swarm = swarm_team(LedgerSessionManager("team", ledger=memory_ledger), researcher=[Reply("again")], writer=[])
    assert [n.node_id for n in swarm("Another report").node_history] == ["researcher"]
    # a conversation that moved on in the ledger is left alone by a later import
    again = import_file_sessions(files, memory_ledger, session_ids=["summarizing"])
    assert [(c.agent_id, c.outcome) for c in again.conversations] == [("main", "skipped")]


def test_import_on_every_backend(files: Path, store: CompleteStore) -> None:
    ledger = Ledger(store)
    import_file_sessions(files, ledger, session_ids=["summarizing"])
    from_files = _restored(FileSessionManager("summarizing", storage_dir=str(files)), "summarizing", "main")
    from_ledger = _restored(LedgerSessionManager("summarizing", ledger=ledger), "summarizing", "main")
    assert from_ledger == from_files


def test_bad_directories_are_typed_errors_and_write_nothing(tmp_path: Path, memory_ledger: Ledger, files: Path) -> None:
    with pytest.raises(ConfigurationError, match="not a directory"):
        import_file_sessions(tmp_path / "nowhere", memory_ledger)
    with pytest.raises(ConfigurationError, match="no session 'ghost'"):
        import_file_sessions(files, memory_ledger, session_ids=["ghost"])
    broken = files / "session_summarizing/agents/agent_main/messages/message_3.json"
    broken.write_text("{not json")
    with pytest.raises(InvalidMessage, match=r"message_3\.json"):
        import_file_sessions(files, memory_ledger, session_ids=["summarizing"])
    assert memory_ledger.agents("summarizing") == []


def test_a_progress_bar_on_request(files: Path, sqlite_url: str, invoke_cli: Any) -> None:
    output = invoke_cli("import", "strands", str(files), "--url", sqlite_url, "--progress", "--json")
    document = json.loads(output)
    assert {d["outcome"] for d in document} == {"imported"}
    assert sum(d["messages"] for d in document) == sum(
        1 for _ in files.glob("session_*/agents/agent_*/messages/message_*.json")
    )


def test_a_large_directory_shows_a_progress_bar(tmp_path: Path, sqlite_url: str) -> None:
    from typer.testing import CliRunner

    from contextledger.cli.app import app
    from contextledger.cli.importer import PROGRESS_THRESHOLD

    files = FileSessionManager("big", storage_dir=str(tmp_path / "sessions"))
    files.create_agent("big", SessionAgent(agent_id="a", state={}, conversation_manager_state={}))
    count = PROGRESS_THRESHOLD + 10
    for i in range(count):
        message: Message = {"role": "user" if i % 2 == 0 else "assistant", "content": [{"text": f"m{i}"}]}
        files.create_message("big", "a", SessionMessage.from_message(message, i))
    result = CliRunner().invoke(app, ["import", "strands", str(tmp_path / "sessions"), "--url", sqlite_url])
    assert result.exit_code == 0, result.output
    assert f"{count}/{count} messages" in result.stderr
    assert "1 imported" in result.stdout
    with Ledger.connect(sqlite_url) as ledger:
        assert len(ledger.history("big", "a")) == count
