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

Design of the ledger-backed ``Session`` (built on the async API)
------------------------------------------------------------------
``LedgerSession(session_id, *, ledger=None, url=None, agent_id="default", manager=None)``
implements the SDK's ``agents.memory.Session`` protocol over an ``AsyncConversation``;
every method is a thin shell over this package and the conversation:

* ``get_items(limit)`` -> ``messages_to_items(newest_messages(conversation.view, limit))``,
  the active view; a tool group the limit cuts through is left out whole, so at most
  ``limit`` items come back and a ``function_call`` never arrives without its output.
* ``add_items(items)`` -> ``await conversation.append(*items_to_messages(items))``: one
  commit per call; an invalid item raises ``InvalidMessage`` and nothing is stored.
* ``pop_item()`` -> a recorded reduction with strategy ``pop`` evicting the newest entry
  (a ``ReductionPlan(strategy="pop", evict=[id])`` applied through the conversation); it
  returns ``messages_to_items([that message])[0]``, the item leaves the view and stays in
  the history. The SDK pops items it has just written when it rewinds a turn, and
  matches them by content, which is why the mapping must be exact. Open question for
  the core: popping a ``function_call_output`` leaves its call dangling until the SDK
  pops the call too; the view rules (tool pairs, semantic 7) must either allow that
  transient state for a ``pop`` or the pop must take the whole group.
* ``clear_session()`` -> one recorded reduction evicting the whole view (``manual``
  trigger); ``Ledger.delete_session`` stays the way to erase.
* Open with ``repair=True``: a crash between a call and its output leaves a dangling
  ``toolUse``, repaired inside the next real write; the repair's ``toolResult`` renders
  as the output type that answers the call (``function_call_output``,
  ``local_shell_call_output``, ``mcp_approval_response``, ...), see ``messages_to_items``.

What the async session needs from the async API (and what this package found):

1. ``AsyncConversation`` with coroutine ``append``, ``before_model_call``,
   ``after_model_call``, ``apply_plan`` (or ``edit``) and a ``messages`` property, plus
   ``AsyncLedger.conversation(...)``; :class:`LedgerRunHooks` accepts it as it is.
2. When the SDK's hooks run. SDK 0.24 writes each turn's items to the session *before*
   the next model call, so at ``on_llm_start`` the session view equals the model input.
   But the input list is already built then: a per-turn reduction made in
   ``on_llm_start`` shapes the *next* run's ``get_items()``, not the current call. To
   make it shape the current call, the session should also offer a
   ``RunConfig(call_model_input_filter=...)`` that awaits ``before_model_call`` and
   returns ``messages_to_items(view)`` (the filter runs before ``on_llm_start``; then
   the hooks must not count the call a second time).
3. Usage. ``on_llm_end`` receives ``response.usage``; ``projected_input_tokens`` reads
   ``metadata["usage"]`` of the newest message that has one. The session should put
   ``{"inputTokens", "outputTokens"}`` on the first message of the next ``add_items``
   batch that holds that response's output (the hooks hand it over), so proactive
   compression sees real numbers instead of estimates.
4. Reactive reduction. ``RunHooks`` has no error callback: a context-overflow error from
   the model never reaches ``after_model_call(error)``. That needs a ``Model`` wrapper
   (``LedgerModel(model, conversation)``) that catches the provider's overflow error,
   awaits ``after_model_call(error)`` and, when it asks for a retry, calls the model
   again with ``messages_to_items`` of the reduced view.
5. Reasoning items. The Responses API rejects a ``reasoning`` item sent without the item
   that followed it in the response. Each item is its own ledger entry and tool groups
   link only calls and outputs, so nothing ties a reasoning entry to its successor:
   oldest-first eviction drops the reasoning item first (harmless), but a pin on the
   reasoning item alone, a protected range or a summary boundary falling between the two
   can keep it without its successor. The core needs a second group key (e.g. a
   ``groupWith`` link from a reasoning entry to the next entry of the same response)
   before the session can promise provider-valid views for reasoning models.
6. Storage cost: the kept item and its projection are both stored; for media (base64
   images, files) a message takes about twice the bytes of the item.
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

__all__ = [
    "HandoffTo",
    "LedgerRunHooks",
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
