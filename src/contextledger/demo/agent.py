"""A scripted, tool-using agent loop driving a :class:`~contextledger.Conversation`.

The loop is what a host does for one user request: append the prompt, then call the
model until it stops asking for tools -- firing ``before_model_call`` /
``after_model_call`` around each call and ``after_invocation`` at the end, so the
manager's per-turn, proactive, reactive and end-of-invocation reductions all run. The
model is scripted (no network) but behaves like a real one in the ways that matter
here: it reports token usage and rejects input larger than its window.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from contextledger.conversation.conversation import Conversation
from contextledger.conversation.pins import PIN_MESSAGE_TOOL_NAME, handle_pin_message_tool
from contextledger.core.view import View
from contextledger.demo.scenarios import Scenario, ToolCall, TurnScript, tool_output
from contextledger.errors import ContextWindowOverflowError, ReductionFailed
from contextledger.model.messages import ContentBlock, Message

__all__ = ["MAX_RETRIES", "ScriptedAgent", "TurnOutcome", "resume_step"]

logger = logging.getLogger(__name__)

MAX_RETRIES = 6
"""Model-call retries after reactive reductions before a turn gives up."""


@dataclass
class TurnOutcome:
    """What one turn did (counted for the report).

    Attributes:
        model_calls: Model calls made, retries included.
        overflows: Calls the model rejected as too large for its window.
        tool_calls: Tools executed.
        interrupted: The turn stopped right after the model asked for a tool (a crash).
    """

    model_calls: int = 0
    overflows: int = 0
    tool_calls: int = 0
    interrupted: bool = False


class ScriptedAgent:
    """Runs a scenario's turns against one conversation.

    Args:
        conversation: The conversation (its manager already registered).
        scenario: The script, the model's window and the context window limit.
    """

    def __init__(self, conversation: Conversation, scenario: Scenario) -> None:
        """Bind the agent to ``conversation``."""
        self.conversation = conversation
        self.scenario = scenario

    def run_turn(self, turn: int, *, crash_after_tool_use: bool = False, resume_from: int | None = None) -> TurnOutcome:
        """Run turn ``turn`` (1-based) to its final answer.

        Args:
            turn: The turn number.
            crash_after_tool_use: Stop right after the model's first tool request is
                committed, before the tool runs -- what a process crash leaves behind.
            resume_from: Continue an interrupted turn at this tool step instead of
                sending the prompt again.

        Raises:
            ReductionFailed: The model kept overflowing after ``MAX_RETRIES`` reductions.
        """
        script = self.scenario.script(turn)
        conversation = self.conversation
        outcome = TurnOutcome()
        step = resume_from or 0
        if resume_from is None:
            (prompt,) = conversation.append(Message.user(script.prompt))
            if turn == 1 and self.scenario.pin_first:
                conversation.pin(prompt.message_id)
        while True:
            reply = self._call_model(script, turn, step, outcome)
            conversation.append(reply)
            if not reply.tool_use_ids:
                break
            if crash_after_tool_use:
                outcome.interrupted = True
                return outcome
            conversation.append(self._run_tools(reply, turn))
            outcome.tool_calls += len(reply.tool_use_ids)
            step += 1
        conversation.after_invocation()
        conversation.set_agent_state({"scenario": self.scenario.name, "turns_done": turn})
        return outcome

    def _call_model(self, script: TurnScript, turn: int, step: int, outcome: TurnOutcome) -> Message:
        conversation = self.conversation
        for _attempt in range(MAX_RETRIES + 1):
            conversation.before_model_call(context_window_limit=self.scenario.context_window_limit)
            outcome.model_calls += 1
            try:
                reply = self._model(script, turn, step)
            except ContextWindowOverflowError as error:
                outcome.overflows += 1
                logger.info(
                    "session_id=<%s>, agent_id=<%s>, turn=<%d> | model rejected the input: %s",
                    conversation.session_id,
                    conversation.agent_id,
                    turn,
                    error,
                )
                # Raises when the manager could not reduce; True asks for a retry.
                if conversation.after_model_call(error):
                    continue
                raise  # pragma: no cover - after_model_call re-raises an unreduced overflow
            conversation.after_model_call()
            return reply
        raise ReductionFailed(
            f"session_id={conversation.session_id}: the model still overflowed after {MAX_RETRIES} reductions"
        )

    def _model(self, script: TurnScript, turn: int, step: int) -> Message:
        """The scripted model: tool calls in order, then the answer; rejects oversized input."""
        view = self.conversation.view
        input_tokens = view.tokens
        if input_tokens > self.scenario.model_window:
            raise ContextWindowOverflowError(
                f"input is ~{input_tokens} tokens but the model's context window is {self.scenario.model_window}"
            )
        if step < len(script.tools):
            call = script.tools[step]
            tool_input = self._resolve_input(call, view)
            tool_use_id = f"{self.scenario.agent_id}-t{turn:03d}-s{step}-{uuid.uuid4().hex[:8]}"
            blocks: list[ContentBlock] = [
                {"text": f"Calling {call.name} for turn {turn}."},
                {"toolUse": {"toolUseId": tool_use_id, "name": call.name, "input": tool_input}},
            ]
        else:
            blocks = [{"text": script.answer}]
        output_tokens = 12 + sum(len(str(b)) for b in blocks) // 4
        usage = {
            "inputTokens": input_tokens,
            "outputTokens": output_tokens,
            "totalTokens": input_tokens + output_tokens,
        }
        return Message(role="assistant", content=blocks, metadata={"usage": usage})

    @staticmethod
    def _resolve_input(call: ToolCall, view: View) -> dict[str, object]:
        if call.name != PIN_MESSAGE_TOOL_NAME or call.target is None:
            return dict(call.input)
        latest = max((i for i, e in enumerate(view) if e.message.tool_result_ids), default=len(view) - 1)
        return {**call.input, "index": latest}

    def _run_tools(self, reply: Message, turn: int) -> Message:
        blocks: list[ContentBlock] = []
        for block in reply.content:
            if "toolUse" not in block:
                continue
            use = block["toolUse"]
            tool_use_id = str(use["toolUseId"])
            if use["name"] == PIN_MESSAGE_TOOL_NAME:
                result = handle_pin_message_tool(self.conversation, use["input"], tool_use_id=tool_use_id)
            else:
                text = tool_output(ToolCall(str(use["name"]), dict(use["input"])), turn)
                result = {"toolUseId": tool_use_id, "status": "success", "content": [{"text": text}]}
            blocks.append({"toolResult": result})
        return Message(role="user", content=blocks)


def resume_step(view: View, turn: int) -> int | None:
    """The tool step an interrupted turn resumes at, or ``None`` if the turn never started.

    Counts the successful tool results after the turn's prompt: a result the crash repair
    marked as an error is retried.
    """
    marker = f"[turn {turn}]"
    start = None
    for index, entry in enumerate(view):
        if entry.message.role == "user" and entry.message.plain_text.startswith(marker):
            start = index
    if start is None:
        return None
    done = 0
    for entry in view.entries[start + 1 :]:
        for block in entry.message.content:
            if "toolResult" in block and block["toolResult"].get("status", "success") == "success":
                done += 1
    return done
