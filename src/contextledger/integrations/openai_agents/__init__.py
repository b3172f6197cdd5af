"""OpenAI Agents SDK integration: Responses items in the ledger, run hooks, a scripted model.

Needs ``openai-agents`` (``pip install 'contextledger[openai]'``).

* :func:`items_to_messages` / :func:`messages_to_items` -- the lossless mapping between
  the SDK's Responses input items and ledger messages (see
  :mod:`contextledger.integrations.openai_agents.items`): a ``function_call`` and its
  output (and every other client-side call/output pair) share a ``toolUseId``, so every
  manager evicts, pins and summarizes them together; ``items -> messages -> items`` is the
  identity for every item type, unknown ones included.
* :class:`LedgerRunHooks` -- the SDK's ``RunHooks`` calling ``before_model_call`` /
  ``after_model_call`` of an *async* conversation on each model call.
* :class:`ScriptedModel` -- an SDK ``Model`` that answers from a script (text, tool calls,
  handoffs, errors) with no network, for examples and tests.
* :class:`LedgerSession` -- the SDK's ``agents.memory.Session`` on an
  :class:`~contextledger.aio.AsyncConversation`: ``get_items`` is the managed active
  view, ``pop_item`` and ``clear_session`` are recorded reductions (strategies ``pop``
  and ``clear``), and a reasoning item travels with the item after it. Pass
  ``run_config=session.run_config()`` to ``Runner.run``: each model call is then counted,
  managed (per-turn, proactive, and the application's own input filter, recorded) and
  given exactly the managed view, so ``view_at(model_call=N)`` is what call ``N`` got.

What the SDK cannot give (known limits): ``RunHooks`` has no error callback, so a
context-overflow error never reaches ``after_model_call(error)`` and reactive reduction
needs a model wrapper; usage reported in ``on_llm_end`` is not yet written to the next
message.
"""

try:
    import agents  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "contextledger.integrations.openai_agents needs openai-agents: pip install 'contextledger[openai]'"
    ) from exc

from contextledger.integrations.openai_agents.hooks import LedgerRunHooks, ModelCallCycle
from contextledger.integrations.openai_agents.items import (
    item_to_message,
    items_to_messages,
)
from contextledger.integrations.openai_agents.rendering import (
    message_to_items,
    messages_to_items,
    newest_messages,
)
from contextledger.integrations.openai_agents.scripted import (
    HandoffTo,
    ModelCall,
    Reply,
    ScriptedModel,
    ScriptError,
    ScriptExhausted,
    ToolCall,
)
from contextledger.integrations.openai_agents.session import LedgerSession

__all__ = [
    "HandoffTo",
    "LedgerRunHooks",
    "LedgerSession",
    "ModelCall",
    "ModelCallCycle",
    "Reply",
    "ScriptError",
    "ScriptExhausted",
    "ScriptedModel",
    "ToolCall",
    "item_to_message",
    "items_to_messages",
    "message_to_items",
    "messages_to_items",
    "newest_messages",
]
