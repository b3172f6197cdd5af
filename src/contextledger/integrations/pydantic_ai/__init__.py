"""Pydantic AI integration: the message history of a session in the ledger, managed.

Needs ``pydantic-ai-slim`` (``pip install 'contextledger[pydantic-ai]'``).

* :class:`LedgerHistory` -- a capability (``Agent(model, capabilities=[history])``) that
  mirrors each run's messages into the ledger, manages them with contextledger's
  managers before every model request (reactively after a
  ``ModelContextWindowExceededError``), records each request's input so that
  ``view_at(model_call=N)`` equals what the model received, and continues a conversation
  from the ledger in a new process; also a history processor
  (``ProcessHistory(history.process)``) and plain storage (``messages()`` / ``save()``).
* :func:`to_ledger` / :func:`from_ledger` -- the mapping between ``ModelMessage`` and
  ledger messages: a message comes back as Pydantic AI's own ``ModelMessagesTypeAdapter``
  reads its JSON.
"""

# ruff: noqa: E402  (the host package is checked first: the imports after the check need it)
from contextledger.integrations._extras import MissingExtra, require

require("pydantic_ai", "pydantic-ai", "pydantic_ai")

from contextledger.integrations.pydantic_ai.convert import RENDERED_AT, dump, from_ledger, from_view, project, to_ledger
from contextledger.integrations.pydantic_ai.history import HOST_STRATEGY, LedgerHistory

__all__ = [
    "HOST_STRATEGY",
    "RENDERED_AT",
    "LedgerHistory",
    "MissingExtra",
    "dump",
    "from_ledger",
    "from_view",
    "project",
    "to_ledger",
]
