"""A conversation: the live view of one (session_id, agent_id) and the owner of its transactions.

:class:`Conversation` composes the model-call cycle (:mod:`.modelcalls`), pins
(:mod:`.pins`), undo (:mod:`.undo`) and the committed state (:mod:`.reading`).
"""

from contextledger.conversation.conversation import Conversation, Edit

__all__ = ["Conversation", "Edit"]
