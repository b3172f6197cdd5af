"""Import Strands ``FileSessionManager`` directories into a ledger.

``import_file_sessions("~/.strands/sessions", ledger)`` (or ``contextledger import
strands DIR --url URL``) reads every session of a ``FileSessionManager`` storage
directory::

    DIR/session_<session_id>/agents/agent_<agent_id>/agent.json
    DIR/session_<session_id>/agents/agent_<agent_id>/messages/message_<n>.json
    DIR/session_<session_id>/multi_agents/multi_agent_<id>/multi_agent.json

and writes each agent as one conversation, in one commit per agent:

* every stored message becomes an entry, in order, under its ``tracking_id`` (a
  deterministic id when it has none or shares one with an earlier record); a redacted
  message shows its redaction, the original kept as a revision;
* the first ``removed_message_count`` messages -- those the Strands conversation
  manager had removed -- are evicted by one reduction with trigger ``import``;
* a Strands summarizing manager's ``summary_message`` becomes a summary row replacing
  those removed messages, under the summary's ``tracking_id``;
* pins (``metadata.custom.pinned``), the agent state, the conversation manager's state
  and Strands' internal state are kept, so ``Agent(session_manager=LedgerSessionManager(...))``
  restores the view ``FileSessionManager`` would have restored: the summary, then the
  messages from ``removed_message_count`` on;
* ``multi_agent.json`` becomes the state of ``multi_agent:<id>`` (see
  :mod:`~contextledger.integrations.strands.multiagent`).

Importing again changes nothing: a conversation the ledger already holds with the
same messages is reported ``unchanged``, one that differs is left alone and reported
``skipped``. Nothing is deleted from ``DIR``.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from strands.session.file_session_manager import AGENT_PREFIX, MESSAGE_PREFIX, MULTI_AGENT_PREFIX, SESSION_PREFIX
from strands.types.session import SessionAgent, SessionMessage

from contextledger.conversation.conversation import Edit
from contextledger.core.changeset import ContentRevision, ReductionPlan, SummaryDraft
from contextledger.core.view import View
from contextledger.errors import ConfigurationError, InvalidMessage
from contextledger.integrations.strands import _compat
from contextledger.integrations.strands.convert import encode_json
from contextledger.integrations.strands.diff import summary_text
from contextledger.integrations.strands.multiagent import multi_agent_id
from contextledger.integrations.strands.state import StrandsState
from contextledger.ledger import Ledger
from contextledger.model.messages import Message

__all__ = ["ImportReport", "ImportedConversation", "count_file_messages", "import_file_sessions"]

logger = logging.getLogger(__name__)

IMPORT_STRATEGY = "strands_file_import"
_ID_NAMESPACE = uuid.UUID("6f1c1c2e-8d0e-4c43-9b53-2b8a6c0f3e51")

Outcome = Literal["imported", "unchanged", "skipped"]


@dataclass(frozen=True)
class ImportedConversation:
    """What happened to one agent (or orchestrator) of a session.

    Attributes:
        session_id: The session.
        agent_id: The agent id (``multi_agent:<id>`` for an orchestrator).
        outcome: ``imported``, ``unchanged`` (already imported) or ``skipped`` (the
            ledger holds a different conversation under this id; left alone).
        messages: Messages read.
        evicted: Of those, evicted with trigger ``import``.
        summary: Whether a summary row was written.
        detail: Why it was skipped.
    """

    session_id: str
    agent_id: str
    outcome: Outcome
    messages: int = 0
    evicted: int = 0
    summary: bool = False
    detail: str | None = None


@dataclass
class ImportReport:
    """Every conversation an import looked at, in order."""

    conversations: list[ImportedConversation] = field(default_factory=list)

    def count(self, outcome: Outcome) -> int:
        """How many conversations had ``outcome``."""
        return sum(1 for c in self.conversations if c.outcome == outcome)


def count_file_messages(storage_dir: str | os.PathLike[str], session_ids: Sequence[str] | None = None) -> int:
    """The number of message files the import of ``storage_dir`` will read (for a progress bar).

    Raises:
        ConfigurationError: ``storage_dir`` is not a directory.
    """
    total = 0
    for session_dir in _session_dirs(Path(storage_dir), session_ids):
        for agent_dir in _children(session_dir / "agents", AGENT_PREFIX):
            total += len(_message_files(agent_dir))
    return total


def import_file_sessions(
    storage_dir: str | os.PathLike[str],
    ledger: Ledger,
    *,
    session_ids: Sequence[str] | None = None,
    on_message: Callable[[int], None] | None = None,
) -> ImportReport:
    """Import the ``FileSessionManager`` sessions in ``storage_dir`` into ``ledger``.

    Args:
        storage_dir: The ``storage_dir`` the sessions were written with.
        ledger: Where to write them.
        session_ids: Only these sessions (default: every ``session_*`` directory).
        on_message: Called with ``1`` for each message file read (progress).

    Returns:
        One entry per agent and orchestrator, in session order.

    Raises:
        ConfigurationError: ``storage_dir`` is not a directory, or a requested session is
            not in it.
        InvalidMessage: A file of a session is not valid JSON or not what
            ``FileSessionManager`` writes; nothing of that agent is written.
    """
    report = ImportReport()
    for session_dir in _session_dirs(Path(storage_dir), session_ids):
        session_id = session_dir.name.removeprefix(SESSION_PREFIX)
        for agent_dir in _children(session_dir / "agents", AGENT_PREFIX):
            report.conversations.append(_import_agent(ledger, session_id, agent_dir, on_message))
        for multi_dir in _children(session_dir / "multi_agents", MULTI_AGENT_PREFIX):
            report.conversations.append(_import_multi_agent(ledger, session_id, multi_dir))
    logger.info(
        "storage_dir=<%s>, imported=<%d>, unchanged=<%d>, skipped=<%d> | imported Strands file sessions",
        storage_dir,
        report.count("imported"),
        report.count("unchanged"),
        report.count("skipped"),
    )
    return report


# -- reading -----------------------------------------------------------------------------------


def _session_dirs(root: Path, session_ids: Sequence[str] | None) -> list[Path]:
    if not root.is_dir():
        raise ConfigurationError(f"{root} is not a directory (give the storage_dir of a FileSessionManager)")
    found = _children(root, SESSION_PREFIX)
    if session_ids is None:
        return found
    by_id = {d.name.removeprefix(SESSION_PREFIX): d for d in found}
    missing = [s for s in session_ids if s not in by_id]
    if missing:
        raise ConfigurationError(f"no session {', '.join(map(repr, missing))} in {root}")
    return [by_id[s] for s in session_ids]


def _children(directory: Path, prefix: str) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(
        p for p in directory.iterdir() if p.is_dir() and p.name.startswith(prefix) and len(p.name) > len(prefix)
    )


def _message_files(agent_dir: Path) -> list[tuple[int, Path]]:
    directory = agent_dir / "messages"
    if not directory.is_dir():
        return []
    files: list[tuple[int, Path]] = []
    for path in directory.iterdir():
        name = path.name
        if name.startswith(MESSAGE_PREFIX) and name.endswith(".json"):
            index = name[len(MESSAGE_PREFIX) : -len(".json")]
            if index.isdigit():
                files.append((int(index), path))
    return sorted(files)


def _read_json(path: Path) -> dict[str, Any]:
    if path.is_symlink():
        raise InvalidMessage(f"{path} is a symlink; FileSessionManager refuses those and so does the import")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidMessage(f"cannot read {path}: {exc}") from exc
    if not isinstance(value, dict):
        raise InvalidMessage(f"{path} holds {type(value).__name__}, not a JSON object")
    return value


# -- one agent ---------------------------------------------------------------------------------


@dataclass
class _Source:
    agent: SessionAgent
    messages: list[dict[str, Any]]
    originals: dict[str, list[dict[str, Any]]]


def _read_agent(session_id: str, agent_dir: Path, on_message: Callable[[int], None] | None = None) -> _Source:
    agent_file = agent_dir / "agent.json"
    try:
        agent = SessionAgent.from_dict(_read_json(agent_file))
    except (TypeError, KeyError, ValueError) as exc:
        raise InvalidMessage(f"{agent_file} is not a Strands agent record: {exc}") from exc
    messages: list[dict[str, Any]] = []
    originals: dict[str, list[dict[str, Any]]] = {}
    seen: set[str] = set()
    for index, path in _message_files(agent_dir):
        try:
            record = SessionMessage.from_dict(_read_json(path))
        except (TypeError, KeyError, ValueError) as exc:
            raise InvalidMessage(f"{path} is not a Strands message record: {exc}") from exc
        shown = dict(record.to_message())
        message_id = shown.get("tracking_id")
        if not isinstance(message_id, str) or not message_id or message_id in seen:
            # No id, or the same dict stored twice (a retried prompt): an id that is the same on every import.
            message_id = str(uuid.uuid5(_ID_NAMESPACE, f"{session_id}\x00{agent.agent_id}\x00{index}"))
        seen.add(message_id)
        shown["tracking_id"] = message_id
        original = [dict(b) for b in record.message.get("content", [])]
        if record.redact_message is not None and original != shown.get("content"):
            # Strands 1.62 rewrites the stored message too; older files kept the original.
            originals[message_id] = original
        messages.append(shown)
        if on_message is not None:
            on_message(1)
    return _Source(agent=agent, messages=messages, originals=originals)


def _import_agent(
    ledger: Ledger, session_id: str, agent_dir: Path, on_message: Callable[[int], None] | None = None
) -> ImportedConversation:
    """Two commits: the messages as written with the agent's state, then one ``import`` reduction.

    The reduction evicts what the Strands manager had removed, inserts its summary and
    applies redactions (the original content kept as a revision). An import interrupted
    between the two commits is completed by the next one.
    """
    source = _read_agent(session_id, agent_dir, on_message)
    agent_id = source.agent.agent_id
    cm_state = dict(source.agent.conversation_manager_state or {})
    removed = min(_compat.removed_message_count(cm_state), len(source.messages))
    summary = _compat.summary_message(cm_state)
    ids = [m["tracking_id"] for m in source.messages]
    if summary is not None:
        summary_id = summary.get("tracking_id")
        if not isinstance(summary_id, str) or not summary_id or summary_id in ids:
            summary["tracking_id"] = str(uuid.uuid5(_ID_NAMESPACE, f"{session_id}\x00{agent_id}\x00summary"))
            cm_state["summary_message"] = summary
    outcome: Outcome = "imported"
    snapshot = ledger.store.load(session_id, agent_id)
    if snapshot is None:
        state = StrandsState()
        name = cm_state.get("__name__")
        state.capture(name if isinstance(name, str) else None, cm_state, _compat.stored_internal_state(source.agent))
        conversation = ledger.conversation(session_id, agent_id, manager=state)
        appends = tuple(_message(session_id, agent_id, m) for m in _as_written(source))
        conversation.edit(lambda _view: Edit(appends=appends, agent_state=dict(source.agent.state or {})))
        view = conversation.view
    else:
        stored = [h.message.message_id for h in ledger.history(session_id, agent_id)]
        if stored != ids:
            detail = "the ledger already holds a different conversation under this agent id"
            logger.warning("session_id=<%s>, agent_id=<%s> | %s; not imported", session_id, agent_id, detail)
            return ImportedConversation(session_id, agent_id, "skipped", len(ids), detail=detail)
        conversation = None
        view = View(snapshot.entries)
        outcome = "unchanged"
    revised = {r.message_id for r in ledger.revisions(session_id, agent_id)} if snapshot is not None else set()
    plan = _import_plan(view, source, ids[:removed], summary, cm_state, revised)
    if plan is not None:
        if conversation is None:  # an import interrupted after its first commit: complete it
            conversation = ledger.conversation(session_id, agent_id, manager=StrandsState())
        # The Strands manager already made this view: recorded as it is.
        conversation.edit(lambda _view: Edit(plan=plan, trigger="import", as_given=True))
        outcome = "imported"
    logger.debug(
        "session_id=<%s>, agent_id=<%s>, messages=<%d>, evicted=<%d>, outcome=<%s> | Strands agent",
        session_id,
        agent_id,
        len(ids),
        removed,
        outcome,
    )
    return ImportedConversation(session_id, agent_id, outcome, len(ids), removed, summary is not None)


def _import_plan(
    view: View,
    source: _Source,
    removed: Sequence[str],
    summary: Mapping[str, Any] | None,
    cm_state: Mapping[str, Any],
    revised: set[str],
) -> ReductionPlan | None:
    """What is still to do after the messages are in: evictions, the summary, redactions (``None``: done)."""
    active = {entry.entry_id for entry in view}
    still = tuple(r for r in removed if r in active)
    draft: SummaryDraft | None = None
    if summary is not None and summary["tracking_id"] not in active:
        draft = SummaryDraft(
            content=summary_text(summary),
            summarizer=f"strands:{cm_state.get('__name__', 'SummarizingConversationManager')}",
            replaces=still,
            summary_id=summary["tracking_id"],
            seq=view[view.index_of(still[0]) or 0].seq if still else None,
        )
    revisions = tuple(
        ContentRevision(message_id=m["tracking_id"], content=[dict(b) for b in m["content"]], reason="redact")
        for m in source.messages
        if m["tracking_id"] in source.originals and m["tracking_id"] not in revised and m["tracking_id"] in active
    )
    if not (still or draft is not None or revisions):
        return None
    return ReductionPlan(
        strategy=IMPORT_STRATEGY,
        evict=still if draft is None else (),
        revisions=revisions,
        summary=draft,
        detail=f"imported from a Strands FileSessionManager ({len(removed)} messages removed there)",
    )


def _as_written(source: _Source) -> Iterable[dict[str, Any]]:
    """The messages as first written (a redacted one with its original content; the redaction is a revision)."""
    for message in source.messages:
        original = source.originals.get(message["tracking_id"])
        yield message if original is None else {**message, "content": original}


def _message(session_id: str, agent_id: str, message: Mapping[str, Any]) -> Message:
    try:
        return Message.from_strands(message)
    except InvalidMessage as exc:
        raise InvalidMessage(f"session {session_id!r}, agent {agent_id!r}: {exc}") from exc


# -- one orchestrator --------------------------------------------------------------------------


def _import_multi_agent(ledger: Ledger, session_id: str, multi_dir: Path) -> ImportedConversation:
    payload = encode_json(_read_json(multi_dir / "multi_agent.json"))
    orchestrator_id = payload.get("id") or multi_dir.name.removeprefix(MULTI_AGENT_PREFIX)
    agent_id = multi_agent_id(str(orchestrator_id))
    existing = ledger.store.load(session_id, agent_id)
    if existing is not None:
        if existing.state.agent_state == payload:
            return ImportedConversation(session_id, agent_id, "unchanged")
        detail = "the ledger already holds other state for this orchestrator"
        logger.warning("session_id=<%s>, agent_id=<%s> | %s; not imported", session_id, agent_id, detail)
        return ImportedConversation(session_id, agent_id, "skipped", detail=detail)
    ledger.conversation(session_id, agent_id).set_agent_state(payload)
    return ImportedConversation(session_id, agent_id, "imported")
