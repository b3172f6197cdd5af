"""Google ADK integration: sessions in the ledger, managed context, recorded model input, a scripted model.

Needs ``google-adk`` (``pip install 'contextledger[adk]'``).

* :class:`LedgerSessionService` -- ADK's ``BaseSessionService`` on a ledger: every method
  ADK defines (``create_session``, ``get_session`` with ``GetSessionConfig``,
  ``list_sessions``, ``delete_session``, ``append_event``, ``get_user_state``, and the
  ``*_sync`` methods of ADK's in-memory service), events kept losslessly, ``app:`` and
  ``user:`` state in the ledger's app and user state, ``temp:`` never stored, ADK's
  stale-session check, ADK's event compaction recorded as a reduction with its summary.
* :class:`LedgerPlugin` -- the plugin that lets contextledger's managers manage each
  session's context and records the model input of every call
  (``view_at(model_call=N)`` is what the model received), with reactive reduction after
  a context overflow.
* :class:`ScriptedLlm` -- an ADK model that answers from a script (text, function calls,
  overflows) with no network, for examples and tests.
* :func:`contents_of`, :func:`event_to_message`, :func:`message_to_event`,
  :func:`ledger_session_id` -- the mapping between ADK events and ledger messages.
"""

from contextledger.errors import MissingDependency

try:
    import google.adk  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise MissingDependency(
        "contextledger.integrations.adk needs google-adk: pip install 'contextledger[adk]'"
    ) from exc

from contextledger.integrations.adk.core import STALE_SESSION_MESSAGE, SessionCore
from contextledger.integrations.adk.errors import AdkSessionExists, AdkSessionNotFound, AdkStaleSession
from contextledger.integrations.adk.events import (
    adk_ids,
    content_of,
    contents_of,
    event_to_message,
    kept_event,
    ledger_session_id,
    message_to_event,
)
from contextledger.integrations.adk.plugin import LedgerPlugin
from contextledger.integrations.adk.scripted import (
    CallTool,
    ModelCall,
    Overflow,
    ProviderValidationError,
    Reply,
    ScriptedLlm,
    ScriptExhausted,
    Step,
)
from contextledger.integrations.adk.service import LedgerSessionService

__all__ = [
    "STALE_SESSION_MESSAGE",
    "AdkSessionExists",
    "AdkSessionNotFound",
    "AdkStaleSession",
    "CallTool",
    "LedgerPlugin",
    "LedgerSessionService",
    "ModelCall",
    "Overflow",
    "ProviderValidationError",
    "Reply",
    "ScriptExhausted",
    "ScriptedLlm",
    "SessionCore",
    "Step",
    "adk_ids",
    "content_of",
    "contents_of",
    "event_to_message",
    "kept_event",
    "ledger_session_id",
    "message_to_event",
]
