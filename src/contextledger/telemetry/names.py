"""The names contextledger's spans, attributes and metrics carry, each written once.

Attributes the OpenTelemetry GenAI semantic conventions define use their names
(``gen_ai.conversation.id``, ``gen_ai.agent.name``, ``gen_ai.input.messages``,
``gen_ai.output.messages``); the database one is the stable ``db.system.name``.
Everything else lives under ``contextledger.``. Token counts here are the ledger's
estimates of the window (its token counter), not usage a provider reported, so they are
not written as ``gen_ai.usage.*``.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "BUCKETS_SECONDS",
    "BUCKETS_TOKENS",
]

# -- span names ----------------------------------------------------------------------------
SPAN_COMMIT: Final = "contextledger.commit"
SPAN_REDUCTION: Final = "contextledger.reduction"
SPAN_RESTORE: Final = "contextledger.restore"
SPAN_SUMMARIZE: Final = "contextledger.summarize"

# -- GenAI and database semantic conventions --------------------------------------------------
CONVERSATION_ID: Final = "gen_ai.conversation.id"
AGENT_NAME: Final = "gen_ai.agent.name"
INPUT_MESSAGES: Final = "gen_ai.input.messages"
OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
DB_SYSTEM: Final = "db.system.name"

# -- contextledger.* -------------------------------------------------------------------------
BACKEND: Final = "contextledger.backend"
VERSION: Final = "contextledger.version"
MODEL_CALL: Final = "contextledger.model_call"

COMMIT_EXPECTED_VERSION: Final = "contextledger.commit.expected_version"
COMMIT_CHANGESET_ID: Final = "contextledger.commit.changeset_id"
COMMIT_APPENDED: Final = "contextledger.commit.appended"
COMMIT_EVICTED: Final = "contextledger.commit.evicted"
COMMIT_RETRIES: Final = "contextledger.commit.retries"
COMMIT_CONFLICT: Final = "contextledger.commit.conflict"
COMMIT_OUTCOME: Final = "contextledger.commit.outcome"
COMMIT_OUTCOME_UNKNOWN: Final = "contextledger.commit.outcome_unknown"
COMMIT_SETTLED: Final = "contextledger.commit.settled"
COMMIT_REPLY_LOST: Final = "contextledger.commit.reply_lost"

REDUCTION_ID: Final = "contextledger.reduction.id"
REDUCTION_TRIGGER: Final = "contextledger.reduction.trigger"
REDUCTION_STRATEGY: Final = "contextledger.reduction.strategy"
REDUCTION_MANAGER: Final = "contextledger.reduction.manager"
REDUCTION_OUTCOME: Final = "contextledger.reduction.outcome"
REDUCTION_REASON: Final = "contextledger.reduction.reason"
REDUCTION_MESSAGES_BEFORE: Final = "contextledger.reduction.messages_before"
REDUCTION_MESSAGES_AFTER: Final = "contextledger.reduction.messages_after"
REDUCTION_TOKENS_BEFORE: Final = "contextledger.reduction.tokens_before"
REDUCTION_TOKENS_AFTER: Final = "contextledger.reduction.tokens_after"
REDUCTION_EVICTED: Final = "contextledger.reduction.evicted"
REDUCTION_SUMMARY_ID: Final = "contextledger.reduction.summary_id"

RESTORE_FOUND: Final = "contextledger.restore.found"
RESTORE_ENTRIES: Final = "contextledger.restore.entries"
RESTORE_BYTES: Final = "contextledger.restore.bytes"

SUMMARIZE_ENTRIES: Final = "contextledger.summarize.entries"
SUMMARIZE_TOKENS: Final = "contextledger.summarize.tokens"
SUMMARIZE_OUTPUT_CHARS: Final = "contextledger.summarize.output_chars"
SUMMARIZER: Final = "contextledger.summarizer"

# -- metrics ---------------------------------------------------------------------------------
METRIC_COMMIT_DURATION: Final = "contextledger.commit.duration"
METRIC_CONFLICTS: Final = "contextledger.commit.conflicts"
METRIC_RETRIES: Final = "contextledger.commit.retries"
METRIC_OUTCOME_UNKNOWN: Final = "contextledger.commit.outcome_unknown"
METRIC_REDUCTIONS: Final = "contextledger.reductions"
METRIC_TOKENS_EVICTED: Final = "contextledger.tokens.evicted"
METRIC_WINDOW_TOKENS: Final = "contextledger.window.tokens"
METRIC_RESTORE_DURATION: Final = "contextledger.restore.duration"

BUCKETS_SECONDS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Bucket advice for the latency histograms: a local commit takes well under a millisecond."""
BUCKETS_TOKENS: Final = (64, 256, 1024, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576)
"""Bucket advice for the window histogram, from a short chat to a million-token window."""
