"""The tests' scripted Strands model is the one the package ships (see contextledger.integrations.strands.scripted)."""

from contextledger.integrations.strands.scripted import (
    SUMMARIZE_PROMPT,
    Call,
    CallTool,
    Overflow,
    ProviderValidationError,
    Reply,
    ScriptedModel,
    Step,
    estimate_tokens,
    validate_converse,
)

__all__ = [
    "SUMMARIZE_PROMPT",
    "Call",
    "CallTool",
    "Overflow",
    "ProviderValidationError",
    "Reply",
    "ScriptedModel",
    "Step",
    "estimate_tokens",
    "validate_converse",
]
