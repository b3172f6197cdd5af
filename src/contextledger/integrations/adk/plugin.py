"""``LedgerPlugin``: contextledger's managers manage an ADK agent's context, and every model input is recorded.

Add it to the app with :class:`~contextledger.integrations.adk.LedgerSessionService` as
the runner's session service::

    app = App(name="shop", root_agent=agent, plugins=[LedgerPlugin(service)])
    runner = Runner(app=app, session_service=service)

On each model call (``before_model_callback``) the plugin counts the call on the
session's conversation, lets its manager reduce (per turn, or proactively when the
projected input nears ``context_window_limit``; each reduction one recorded commit), and
sets the request's contents to the conversation's active view, rendered by
:func:`~contextledger.integrations.adk.contents_of`. What the model receives is therefore
exactly what ``ledger.view_at(session, model_call=N)`` rebuilds later.

When the model fails with a context overflow (``on_model_error_callback``), the manager
reduces reactively and the plugin calls the model again with the reduced view (counted as
the next model call), up to ``max_retries`` times; when nothing can be reduced the error
is :class:`~contextledger.errors.ReductionFailed`. Any other error is left to ADK.

Known limits: the contents the plugin sets replace the ones ADK assembled, so what ADK
adds to them besides the session's events (instruction contents, another agent's turns
shown as context, a branch's own view) does not reach the model; the plugin is meant for
one agent, or agents that share their history. The system instruction and the tools are
untouched.
"""

from __future__ import annotations

import logging

from google.adk.agents.callback_context import CallbackContext
from google.adk.agents.llm_agent import LlmAgent
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins import BasePlugin

from contextledger.errors import ConfigurationError
from contextledger.integrations.adk.service import LedgerSessionService

__all__ = ["LedgerPlugin"]

logger = logging.getLogger(__name__)


class LedgerPlugin(BasePlugin):
    """An ADK plugin that manages each session's context with the ledger and records each model input.

    Args:
        service: The session service of the runner (the plugin works on the conversations it holds).
        name: The plugin's name.
        max_retries: Model calls made again after a context overflow, per failed call.

    Raises:
        ConfigurationError: ``service`` is not a :class:`LedgerSessionService`, or
            ``max_retries`` is negative.
    """

    def __init__(self, service: LedgerSessionService, *, name: str = "contextledger", max_retries: int = 2) -> None:
        """See the class docstring."""
        if not isinstance(service, LedgerSessionService):
            raise ConfigurationError(f"LedgerPlugin needs the runner's LedgerSessionService, got {service!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigurationError(f"max_retries must be an int >= 0, got {max_retries!r}")
        super().__init__(name=name)
        self.service = service
        self.max_retries = max_retries

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        """Count the call, let the manager reduce, send the active view."""
        await self.service.prepare_model_call(callback_context.session, llm_request)
        return None

    async def after_model_callback(
        self, *, callback_context: CallbackContext, llm_response: LlmResponse
    ) -> LlmResponse | None:
        """Report a finished call (a streamed response once, on its last chunk)."""
        if not llm_response.partial:
            await self.service.finish_model_call(callback_context.session)
        return None

    async def on_model_error_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest, error: Exception
    ) -> LlmResponse | None:
        """After an overflow: reduce and call the model again on the reduced view; otherwise leave the error to ADK.

        Raises:
            ReductionFailed: The context overflowed and nothing could be reduced (ADK hands it
                on wrapped in a ``RuntimeError`` naming the plugin, as it wraps every
                plugin's error).
        """
        session = callback_context.session
        try:
            retry = await self.service.finish_model_call(session, error)
        except Exception as raised:
            if raised is error:  # an overflow no manager handles: ADK raises it as the model raised it
                return None
            raise
        if not retry:
            return None
        agent = callback_context.get_invocation_context().agent
        if not isinstance(agent, LlmAgent):  # pragma: no cover - model callbacks run for LLM agents only
            return None
        for attempt in range(1, self.max_retries + 1):
            await self.service.prepare_model_call(session, llm_request)
            logger.info(
                "session_id=<%s>, attempt=<%d> | calling the model again on the reduced view", session.id, attempt
            )
            try:
                final: LlmResponse | None = None
                async for response in agent.canonical_model.generate_content_async(llm_request, stream=False):
                    if not response.partial:
                        final = response
                return final
            except Exception as again:  # the retried call failed too: reduce again, or give up
                if attempt == self.max_retries or not await self.service.finish_model_call(session, again):
                    raise
        return None
