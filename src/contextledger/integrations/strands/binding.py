"""One Strands agent bound to one ledger conversation, kept in step at every sync.

:class:`AgentBinding` is the engine behind
:class:`~contextledger.integrations.strands.LedgerSessionManager` and the
standalone :class:`~contextledger.integrations.strands.StrandsConversationManager`:

* a *sync* compares ``agent.messages`` with the active view by id and commits the
  difference as one changeset (:func:`~contextledger.integrations.strands.diff.plan_sync`),
  with the agent state and the Strands manager state riding along;
* the trigger recorded on a reduction comes from the Strands event that led to it:
  ``per_turn``/``proactive`` before a model call, ``reactive`` after a context
  overflow, ``end_of_invocation`` after the invocation, ``manual`` otherwise;
* a restore renders the active view back into ``agent.messages`` -- never an offset
  into a message log.

Every public method takes the binding's lock (then the conversation's), so the session
manager can be called from Strands' worker threads.

Why one module of about 550 lines: the pure parts already live beside it (the diff in
:mod:`~contextledger.integrations.strands.diff`, conversion in ``convert``, Strands
internals in ``_compat``, the state in ``state``). What is left -- restore, sync, the
model-call cycle and the adapter's reductions -- shares the binding's lock and one
turn's state (the trigger of the call being prepared, the synced shape, a pending
overflow), and each part calls the others mid-turn; split into mixins they would share
private state across modules without becoming easier to read.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from strands.agent.state import AgentState
from strands.hooks import AfterModelCallEvent as StrandsAfterModelCallEvent
from strands.hooks import BeforeModelCallEvent as StrandsBeforeModelCallEvent
from strands.types.content import Message as StrandsMessage
from strands.types.exceptions import ContextWindowOverflowException

from contextledger.conversation.conversation import Conversation, Edit
from contextledger.conversation.pins import handle_pin_message_tool
from contextledger.core.building import build_changeset
from contextledger.core.changeset import ContentRevision, ReductionPlan
from contextledger.core.hooks import AfterModelCallEvent, BeforeModelCallEvent
from contextledger.core.seam import WouldWait
from contextledger.core.view import View
from contextledger.errors import EntryNotFound, ReductionFailed
from contextledger.integrations.strands import _compat
from contextledger.integrations.strands.convert import ensure_tracking_ids, is_pinned_dict, render_entry, tracking_id
from contextledger.integrations.strands.diff import plan_sync
from contextledger.integrations.strands.errors import StrandsReductionFailed
from contextledger.integrations.strands.shape import Shape, contents
from contextledger.integrations.strands.state import StrandsState
from contextledger.ledger import Ledger
from contextledger.managers.base import ConversationManager
from contextledger.managers.repair import needs_repair, plan_repair
from contextledger.model.messages import Message
from contextledger.model.records import Reduction, Trigger, ViewEntry
from contextledger.model.tokens import TokenCounter

if TYPE_CHECKING:
    from strands import Agent

__all__ = ["AgentBinding"]

logger = logging.getLogger(__name__)


class AgentBinding:
    """Keeps one Strands agent's messages and one ledger conversation in step.

    Args:
        ledger: Where the conversation lives.
        session_id: The session.
        agent_id: The agent (Strands ``agent.agent_id``).
        inner: The contextledger manager the agent runs through the adapter, if any; it
            then reduces the ledger and the binding writes the view back to the agent.
        token_counter: Per-message token estimates stored with the entries.
        context_window_limit: Used when the model reports none.
        repair: Repair a view left mid-tool by a crash when restoring.
    """

    def __init__(
        self,
        ledger: Ledger,
        session_id: str,
        agent_id: str,
        *,
        inner: ConversationManager | None = None,
        token_counter: TokenCounter | None = None,
        context_window_limit: int | None = None,
        repair: bool = True,
    ) -> None:
        """Open the conversation; see the class docstring."""
        self.lock = threading.RLock()
        self.repair = repair
        self.state = StrandsState(inner, before_model_call=self._on_conversation_before_model_call)
        self.conversation: Conversation = ledger.conversation(
            session_id,
            agent_id,
            manager=self.state,
            token_counter=token_counter,
            context_window_limit=context_window_limit,
            repair=False,
            overflow_errors=(ContextWindowOverflowException,),
        )
        self._agent: weakref.ReferenceType[Agent] | None = None
        self._before_call_trigger: Trigger | None = None
        self._would_compress = False
        self._invocations = 0
        self._captured_raw: tuple[str | None, dict[str, Any] | None, dict[str, Any]] | None = None
        self._synced_shape: Shape | None = None
        self._shown_contents: tuple[View, list[Any]] | None = None  # see _contents_shown
        self._overflow: BaseException | None = None

    @property
    def manages_ledger(self) -> bool:
        """Whether a contextledger manager reduces the ledger (the adapter is in use)."""
        return self.state.inner is not None

    def agent(self) -> Agent | None:
        """The agent bound last, if it is still alive."""
        return self._agent() if self._agent is not None else None

    # -- start -------------------------------------------------------------------------------

    def start(self, agent: Agent) -> None:
        """Create the conversation from the agent, or restore the agent from the conversation.

        A new conversation stores the agent's initial messages and state in one commit.
        An existing one is restored exactly: the active view (pins, summary, revised
        content), the agent state, the Strands manager and internal state. Restoring
        never writes: a view left between a toolUse and its toolResult is shown to the
        agent repaired, and the repair is committed inside the next write (recorded as a
        ``restore``/``tool_pair_repair`` reduction), as the core does for every host.
        """
        with self.lock:
            self._agent = weakref.ref(agent)
            if self.conversation.version == 0:
                self.sync(agent, "manual", force=True)
                logger.debug(
                    "session_id=<%s>, agent_id=<%s>, messages=<%d> | created conversation",
                    self.conversation.session_id,
                    self.conversation.agent_id,
                    len(agent.messages),
                )
                return
            internal = self.state.strands_internal_state()
            # A call paused on a Strands interrupt is legitimately open: it is resumed, not repaired.
            due = self.repair and not _compat.interrupt_activated(internal) and needs_repair(self.conversation.view)
            self.conversation.repair = due
            if due:
                logger.warning(
                    "session_id=<%s>, agent_id=<%s> | conversation was interrupted mid-tool; the agent sees it"
                    " repaired, the repair is recorded with the next write",
                    self.conversation.session_id,
                    self.conversation.agent_id,
                )
            self._restore(agent, internal)

    def _restore(self, agent: Agent, internal: dict[str, Any] | None) -> None:
        conversation = self.conversation
        agent.state = AgentState(conversation.agent_state)
        cm_state = self.state.strands_conversation_manager_state()
        _compat.restore_internal_state(agent, internal or {})
        summary: Mapping[str, Any] | None = None
        if not self.manages_ledger and cm_state is not None:
            try:
                # Strands may return messages to prepend (its summary): the view already
                # holds the summary in place, so they are not prepended again.
                agent.conversation_manager.restore_from_session(cm_state)
            except (ValueError, KeyError, TypeError) as exc:
                logger.warning(
                    "session_id=<%s>, agent_id=<%s>, error=<%s> | stored conversation manager state does not fit"
                    " the agent's manager; it starts fresh, the view is restored",
                    conversation.session_id,
                    conversation.agent_id,
                    exc,
                )
            else:
                stored_summary = cm_state.get("summary_message")
                summary = stored_summary if isinstance(stored_summary, Mapping) else None
        if agent.model.stateful:
            logger.debug(
                "agent_id=<%s> | model keeps the conversation server-side, messages not restored", agent.agent_id
            )
        else:
            agent.messages = [self._render(entry, summary) for entry in self.shown_view()]
        self._capture(agent)
        logger.debug(
            "session_id=<%s>, agent_id=<%s>, messages=<%d>, model_call_count=<%d> | restored agent",
            conversation.session_id,
            conversation.agent_id,
            len(conversation.view),
            conversation.model_call_count,
        )

    def shown_view(self, view: View | None = None) -> View:
        """The view the agent holds: the stored one, repaired in memory while a repair waits.

        The repair is the one the next write commits (:func:`~contextledger.managers.repair.plan_repair`
        gives it stable ids), so the agent and the ledger agree once it is committed.
        """
        conversation = self.conversation
        view = conversation.view if view is None else view
        repair = plan_repair(view, conversation.state.next_seq) if conversation.repair else None
        if repair is None:
            return view
        _, repaired = build_changeset(
            conversation.state,
            view,
            repair,
            counter=conversation.token_counter,
            model_call_count=conversation.model_call_count,
            count_changed=False,
            manager_state=None,
        )
        return repaired

    def _render(self, entry: ViewEntry, summary: Mapping[str, Any] | None) -> StrandsMessage:
        if entry.kind == "summary" and summary is not None and summary.get("tracking_id") == entry.entry_id:
            # The Strands summarizing manager holds this very dict as its summary message.
            return cast(StrandsMessage, summary)
        return cast(StrandsMessage, render_entry(entry))

    # -- sync --------------------------------------------------------------------------------

    def sync(
        self,
        agent: Agent,
        trigger: Trigger,
        *,
        error: BaseException | None = None,
        force: bool = False,
    ) -> Reduction | None:
        """Commit what changed in ``agent`` since the last sync, as one changeset.

        Args:
            agent: The agent.
            trigger: Recorded on the reduction when messages were evicted, summarized or
                revised.
            error: The overflow behind a reactive reduction.
            force: Commit even when nothing changed (creates a new conversation).

        Returns:
            The reduction row, when the sync recorded one.

        Raises:
            InvalidMessage: A message of the agent is not a valid Strands message.
        """
        with self.lock:
            build, shape = self._sync_builder(agent, trigger, error=error, force=force)
            # A model call counted with nothing to write waits in the conversation for the
            # next commit (defer_count), so a plain turn is two commits, not three.
            reduction = self.conversation.edit(build)
            self._synced(shape)
            return reduction

    def _synced(self, shape: Shape) -> None:
        self._synced_shape = shape
        if self.conversation.repair and not needs_repair(self.conversation.view):
            self.conversation.repair = False  # committed: this conversation needs no more

    def _sync_builder(
        self, agent: Agent, trigger: Trigger, *, error: BaseException | None = None, force: bool = False
    ) -> tuple[Callable[[View], Edit | None], Shape]:
        """What a sync of ``agent`` would write, as a builder for a view, and the shape it syncs."""
        with self.lock:
            self._agent = weakref.ref(agent)
            agent_state = self._capture(agent)
            stateful = agent.model.stateful
            messages = list(agent.messages)
            if not stateful:
                ensure_tracking_ids(cast(list[dict[str, Any]], messages))
            cm = agent.conversation_manager
            strategy = f"strands:{type(cm).__name__}"
            hint = _summary_hint(cm)
            described = None if error is None else f"{type(error).__name__}: {error}"

            memo: list[tuple[View, Edit | None]] = []

            def build(view: View) -> Edit | None:
                # plan_sync is pure: the edit checked below is reused by the commit unless a
                # conflict brought a new view.
                if memo and memo[0][0] is view:
                    return memo[0][1]
                edit = plan(view)
                memo[:] = [(view, edit)]
                return edit

            def plan(view: View) -> Edit | None:
                conversation = self.conversation
                changed_state = force or agent_state != conversation.agent_state
                changed_state = changed_state or self.state.differs_from(conversation.state.manager_state)
                if stateful:
                    return Edit(agent_state=agent_state) if changed_state else None
                return plan_sync(
                    self.shown_view(view),
                    cast(list[Mapping[str, Any]], messages),
                    trigger=trigger,
                    strategy=strategy,
                    next_seq=conversation.state.next_seq,
                    error=described,
                    summary_hint=hint,
                    summarizer=strategy,
                    agent_state=agent_state if changed_state else None,
                )

            return build, Shape(messages)

    def _capture(self, agent: Agent) -> dict[str, Any]:
        """Capture the Strands state to commit with the next changeset; the agent's own state (a copy)."""
        agent_state, cm_state, internal = _compat.agent_states(agent)
        cm = agent.conversation_manager
        raw = (None, None, internal) if self.manages_ledger else (type(cm).__name__, cm_state, internal)
        if raw != self._captured_raw:  # unchanged since the last capture: not re-encoded
            self._captured_raw = raw
            self.state.capture(*raw)
        return agent_state

    # -- callbacks that read and write no store this time ----------------------------------
    # Each says, for one callback, whether its method below will neither read nor write the
    # store: the session manager then runs it on the caller's thread, without the hop to a
    # worker (which costs more than the work). Each method decides by the same predicate.

    def in_sync(self, agent: Agent) -> bool:
        """Whether ``agent.messages`` are as the last sync left them (then a check before a model call reads no store).

        The same message dicts with the same content lists, in the same order, and no
        content edited in place since: a hook that redacts a message's text before the
        model call changes what the call is given, and is committed before the call as any
        other change. (A pin set in place changes nothing the model is given: the next
        sync records it.)
        """
        shape = self._synced_shape
        if shape is None or not shape.holds(agent.messages):
            return False
        return bool(agent.model.stateful) or self._contents_shown(agent.messages)

    def _contents_shown(self, messages: Sequence[Mapping[str, Any]]) -> bool:
        """Whether ``messages`` hold, in order, the contents of the view the agent is shown (compared in C)."""
        view = self.shown_view()
        known = self._shown_contents
        if known is None or known[0] is not view:  # a view's contents are listed once
            known = self._shown_contents = (view, [entry.message.content for entry in view.entries])
        return contents(messages) == known[1]

    def holds_answer(self, agent: Agent, message: Mapping[str, Any]) -> bool:
        """Whether :meth:`message_added` only leaves ``message``, the final answer, to the end of the invocation."""
        held = bool(agent.model.stateful) or _holds(agent.messages, message)
        return held and bool(self._invocations) and _final_answer(message)

    def call_ends_locally(self, event: StrandsAfterModelCallEvent) -> bool:
        """Whether :meth:`after_model_call` reads no store: no contextledger manager reacts to a finished call."""
        return event.exception is not None or not self.manages_ledger

    def call_ends_inline(self) -> bool:
        """Whether :meth:`after_model_call` may run on the caller's thread: only the manager hears the call end.

        A manager's callbacks request reductions and never block; a reduction that would
        write a summary or wait commits nothing there (the callback then runs on a worker).
        """
        return self.conversation.hooks.heard_only_by(AfterModelCallEvent, self, self.state, self.state.inner)

    def counts_locally(self, agent: Agent) -> bool:
        """Whether :meth:`before_model_call_last` reads no store: the count deferred, nothing to sync.

        That is: no contextledger manager plans on the call, ``agent.messages`` are as the
        last sync left them (:meth:`in_sync`: Strands' managers and hooks left them alone),
        and no callback but the binding's own hears the conversation's ``BeforeModelCallEvent``.
        """
        if self.manages_ledger or not self.in_sync(agent):
            return False
        return self.conversation.hooks.subscribers(BeforeModelCallEvent) == [self._on_conversation_before_model_call]

    # -- the model-call cycle ----------------------------------------------------------------

    def before_model_call_first(self, agent: Agent, event: StrandsBeforeModelCallEvent) -> None:
        """First callback of Strands' ``BeforeModelCallEvent``: commit outside edits.

        Runs before the Strands conversation manager's callbacks, so anything the
        manager changes next is attributed to it. Also notes whether the manager's
        proactive compression is about to run (it runs before its per-turn check).
        """
        with self.lock:
            # Nothing added, removed, replaced or edited since the last sync (the usual case,
            # the prompt was just committed): skip a full comparison. What a later callback of
            # this event changes is committed by before_model_call_last, before the count.
            if not self.in_sync(agent):
                self.sync(agent, "manual")
            # Strands checks the proactive threshold before its per-turn callback runs; only the
            # attribution (proactive or per_turn) depends on it.
            threshold = _compat.compression_threshold(agent.conversation_manager)
            projected = event.projected_input_tokens
            self._would_compress = bool(
                threshold is not None
                and projected is not None
                and agent.model.estimate_utilization(projected) >= threshold
            )

    def before_model_call_last(self, agent: Agent, event: StrandsBeforeModelCallEvent) -> None:
        """Last callback of Strands' ``BeforeModelCallEvent``: count the call and commit.

        What the Strands manager changed is committed with trigger ``proactive`` (when its
        compression threshold was reached) or ``per_turn``, together with the new
        ``model_call_count``; with nothing to commit the count rides with the next
        message's commit. With the adapter, contextledger's manager then plans on the
        ledger and the view is written back into ``agent.messages``.

        The input is not handed to the model yet: Strands still appends the input hooks
        contributed (continuation messages) after this event, so what commits until
        :meth:`after_model_call` (or a redaction the model's stream asks for) is recorded
        as part of this call's input.
        """
        with self.lock:
            self._agent = weakref.ref(agent)
            self._before_call_trigger = "proactive" if self._would_compress else "per_turn"
            try:
                self.conversation.before_model_call(
                    projected_input_tokens=event.projected_input_tokens,
                    context_window_limit=agent.model.context_window_limit,
                    defer_count=True,
                    handed=False,
                )
            finally:
                self._before_call_trigger = None
                self._would_compress = False
            if self.manages_ledger:
                self.reconcile(agent)

    def _on_conversation_before_model_call(self, event: BeforeModelCallEvent) -> None:
        trigger = self._before_call_trigger
        agent = self.agent()
        if trigger is None or agent is None:
            return
        # Strands' managers replace the list, a message or its content list when they change
        # something; a hook may also edit a message in place (see in_sync).
        if self.manages_ledger or not self.in_sync(agent):
            self.sync(agent, trigger)

    def after_model_call(self, agent: Agent, event: StrandsAfterModelCallEvent) -> None:
        """First callback of Strands' ``AfterModelCallEvent``: the call's input was handed over.

        From here on what commits (the answer, a reduction after an overflow) reaches the
        next call's input. A context overflow is noted: the next sync records a
        ``reactive`` reduction.
        """
        with self.lock:
            self.conversation.input_handed()
            if isinstance(event.exception, ContextWindowOverflowException):
                self._overflow = event.exception
            elif not self.call_ends_locally(event):
                self.conversation.after_model_call(None)

    def sync_after_reduction(self, agent: Agent) -> None:
        """Strands' own sync: ``reactive`` right after an overflow was reduced, else ``manual``."""
        with self.lock:
            error, self._overflow = self._overflow, None
            self.sync(agent, "reactive" if error is not None else "manual", error=error)

    def before_invocation(self) -> None:
        """Note that an invocation runs (its final answer is committed when it ends)."""
        with self.lock:
            self._invocations += 1

    def message_added(self, agent: Agent, message: Mapping[str, Any]) -> None:
        """Commit a message Strands just added, with anything else that changed.

        The final answer of an invocation (an assistant message without a toolUse) is the
        exception: it is committed by :meth:`after_invocation` a moment later, in the same
        commit as the end-of-invocation management, the model-call count and the Strands
        state. Every other message -- the prompt, a toolUse (before its tool runs), a
        toolResult -- is committed at once.
        """
        with self.lock:
            if self.holds_answer(agent, message):
                return
            if not agent.model.stateful and not _holds(agent.messages, message):
                self._adopt(agent, message)
            self.sync(agent, "manual")

    def _adopt(self, agent: Agent, message: Mapping[str, Any]) -> None:
        """Put a message handed to ``append_message`` directly at the end of ``agent.messages``.

        Strands' session managers persist what ``append_message`` is given, and their
        restore puts it into the agent; appending it here keeps the agent and the ledger
        one view (the next sync would otherwise take its absence for an eviction).

        Raises:
            InvalidMessage: ``message`` is not a Strands message (nothing is changed).
        """
        Message.from_strands(message)  # checked before the agent is touched
        ensure_tracking_ids([cast(dict[str, Any], message)])
        agent.messages.append(cast(StrandsMessage, message))
        logger.debug(
            "session_id=<%s>, agent_id=<%s>, message_id=<%s> | message appended directly, added to the agent",
            self.conversation.session_id,
            self.conversation.agent_id,
            message.get("tracking_id"),
        )

    def after_invocation(self, agent: Agent) -> None:
        """Commit the final answer and what the end-of-invocation management changed, as one commit.

        Raises:
            WouldWait: Inline only (:data:`~contextledger.core.seam.INLINE`): the commit would
                wait. Nothing was committed and the invocation has not ended here: the
                callback runs again on a worker, which ends it.
        """
        with self.lock:
            try:
                self.sync(agent, "end_of_invocation")
            except BaseException as exc:
                if not isinstance(exc, WouldWait):  # else nothing was committed: a worker runs this again
                    self._invocation_ended()
                raise
            self._invocation_ended()

    def _invocation_ended(self) -> None:
        self._invocations = max(0, self._invocations - 1)
        self._overflow = None

    # -- the adapter's reductions (contextledger managers reduce the ledger) -----------------

    def reduce(self, agent: Agent, error: BaseException | None) -> None:
        """Reduce through the ledger and write the result back to ``agent.messages``.

        With ``error`` (a context overflow) the manager must reduce; otherwise this is a
        best-effort proactive reduction.

        Raises:
            StrandsReductionFailed: Nothing could be reduced after an overflow (both
                contextledger's ``ReductionFailed`` and Strands' ``ContextWindowOverflowException``).
            BaseException: ``error`` itself when no manager callback handled it.
        """
        with self.lock:
            self.sync(agent, "manual")
            self._overflow = None
            if error is not None:
                try:
                    retry = self.conversation.after_model_call(error)
                except ReductionFailed as exc:
                    if isinstance(exc, ContextWindowOverflowException):
                        raise
                    # Strands apps catch ContextWindowOverflowException; ours must be one too.
                    raise StrandsReductionFailed(str(exc)) from exc
                if not retry:
                    raise error
            else:
                self.conversation.reduce("proactive")
            self.reconcile(agent)

    def manage(self, agent: Agent) -> None:
        """End-of-invocation management through the ledger, written back to the agent.

        The final answer (and the pending model-call count) commit together with the
        end-of-invocation reduction, planned on the view that holds the answer.
        """
        with self.lock:
            build, shape = self._sync_builder(agent, "manual")
            self.conversation.after_invocation(pending=build)
            self._synced(shape)
            self.reconcile(agent)

    def reconcile(self, agent: Agent) -> None:
        """Make ``agent.messages`` show the active view (after the ledger was reduced).

        Messages the reduction did not touch keep their dict (and identity); evicted ones
        go, summaries and revised or re-pinned messages are rendered from the view.
        """
        with self.lock:
            if agent.model.stateful:
                return
            current = {tracking_id(m): m for m in agent.messages if m.get("tracking_id")}
            rendered: list[StrandsMessage] = []
            for entry in self.shown_view():
                existing = current.get(entry.entry_id)
                if existing is not None and (
                    entry.kind == "summary"
                    or (
                        existing.get("content") == entry.message.content
                        and is_pinned_dict(existing) == entry.message.pinned
                    )
                ):
                    rendered.append(existing)
                else:
                    rendered.append(cast(StrandsMessage, render_entry(entry)))
            if [id(m) for m in rendered] != [id(m) for m in agent.messages]:
                agent.messages[:] = rendered
            self._capture(agent)

    # -- edits on behalf of the agent ------------------------------------------------------------

    def redact(self, agent: Agent, message: Mapping[str, Any]) -> None:
        """Record a redaction of the latest message (the original is kept as a revision).

        Raises:
            EntryNotFound: The conversation has no message to redact.
        """
        with self.lock:
            # The redaction comes with the model's response: the input it was given is the original.
            self.conversation.input_handed()
            target = message.get("tracking_id") or (agent.messages[-1].get("tracking_id") if agent.messages else None)
            content = [dict(block) for block in message.get("content", [])]

            def build(view: View) -> Edit | None:
                index = view.index_of(str(target)) if target else (len(view) - 1 if len(view) else None)
                if index is None or view[index].kind != "message":
                    raise EntryNotFound(f"no message {target!r} to redact in this conversation")
                entry = view[index]
                if entry.message.content == content:
                    return None
                revision = ContentRevision(message_id=entry.entry_id, content=content, reason="redact")
                return Edit(plan=ReductionPlan(strategy="redaction", revisions=(revision,)), trigger="manual")

            self.conversation.edit(build)
            self.sync(agent, "manual")

    def pin_index(self, agent: Agent, tool_input: Mapping[str, Any] | Any, tool_use_id: str | None) -> dict[str, Any]:
        """Run the ``pin_message`` tool: commit the pin, then mirror it in ``agent.messages``.

        Returns:
            The toolResult body (``status`` and ``content``); errors are reported in it.
        """
        with self.lock:
            self.sync(agent, "manual")
            result = handle_pin_message_tool(self.conversation, tool_input, tool_use_id=tool_use_id)
            if result.get("status") == "success":
                self.reconcile(agent)
            return result


def _summary_hint(cm: object) -> str | None:
    """The tracking id of the summary message a Strands summarizing manager holds."""
    get_state = getattr(cm, "get_state", None)
    if not callable(get_state):
        return None
    summary = get_state().get("summary_message")
    if isinstance(summary, Mapping) and isinstance(summary.get("tracking_id"), str):
        return str(summary["tracking_id"])
    return None


def _holds(messages: Sequence[Mapping[str, Any]], message: Mapping[str, Any]) -> bool:
    """Whether ``messages`` hold ``message`` (the same dict, or one with its ``tracking_id``)."""
    if (messages and messages[-1] is message) or any(m is message for m in messages):  # usually the last
        return True
    wanted = message.get("tracking_id")
    return bool(wanted) and any(m.get("tracking_id") == wanted for m in messages)


def _final_answer(message: Mapping[str, Any]) -> bool:
    """Whether ``message`` is an assistant message that asks for no tool (it ends the invocation)."""
    content = message.get("content")
    return (
        message.get("role") == "assistant"
        and isinstance(content, list)
        and not any(isinstance(b, Mapping) and "toolUse" in b for b in content)
    )
