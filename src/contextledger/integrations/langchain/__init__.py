"""LangChain integration: agent middleware, a chat message history, a scripted model.

Needs ``langchain`` 1.x (``pip install 'contextledger[langchain]'``).

* :class:`LedgerMiddleware` -- agent middleware for ``create_agent``: every model call's
  input is the conversation's managed view, recorded so that ``view_at(model_call=N)``
  equals what the model received; the managers' reductions (per-turn, proactive,
  reactive after a ``ContextOverflowError``, end-of-invocation) are committed and
  queryable; a new process continues the conversation from the ledger.
* :class:`LedgerChatMessageHistory` -- ``BaseChatMessageHistory`` (sync and async) for
  ``RunnableWithMessageHistory``.
* :func:`to_ledger` / :func:`from_ledger` -- the lossless mapping between LangChain and
  ledger messages (tool calls, tool messages, additional kwargs, response metadata,
  usage, ids and content blocks come back equal).
* :class:`ScriptedChatModel` -- an offline chat model that plays a script (text, tool
  calls, errors), for examples and tests.
"""

# ruff: noqa: E402  (the host package is checked first: the imports after the check need it)
from contextledger.integrations._extras import MissingExtra, require

require("langchain", "langchain", "langchain.agents", "langchain_core")

from contextledger.integrations.langchain.convert import (
    ViewRenderer,
    from_ledger,
    from_view,
    project,
    to_ledger,
    to_ledgers,
)
from contextledger.integrations.langchain.history import LedgerChatMessageHistory
from contextledger.integrations.langchain.middleware import HOST_STRATEGY, LedgerMiddleware
from contextledger.integrations.langchain.scripted import CallTool, ScriptedChatModel, ScriptExhausted, Step

__all__ = [
    "HOST_STRATEGY",
    "CallTool",
    "LedgerChatMessageHistory",
    "LedgerMiddleware",
    "MissingExtra",
    "ScriptExhausted",
    "ScriptedChatModel",
    "Step",
    "ViewRenderer",
    "from_ledger",
    "from_view",
    "project",
    "to_ledger",
    "to_ledgers",
]
