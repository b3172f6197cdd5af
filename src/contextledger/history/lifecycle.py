"""Data lifecycle: erase one entry for good, and prune old evicted history.

The ledger keeps everything a reduction removes; these are the explicit exceptions.

* :func:`erase` removes the content of one message entry, its revisions, and the text of
  every summary that covered it (directly or through a summary it superseded): those
  summaries are marked redacted, or re-summarized when a summarizer is given. A
  :class:`~contextledger.model.records.Tombstone` (entry id, when, why) stays, so the audit
  trail says that something was erased and why. The entry keeps its place (and its
  tool-pair structure, emptied) so the view stays one a provider accepts. One atomic
  operation per conversation on every store, and it follows lineage: every fork (of a
  fork...) that holds the entry is erased too, and copies in other ledgers are erased
  when given or reported. The store is then asked to make the bytes leave its files
  (:func:`settle_erasure`): the SQLite file is written with ``secure_delete`` and its
  WAL checkpointed (waiting, bounded, for other readers); PostgreSQL leaves dead row
  versions until ``VACUUM``; on Redis the keys hold the new values only, and the
  persistence files until rewritten. The :class:`Erasure` report says what is left.
* :func:`prune` deletes evicted message entries (and their revisions) whose eviction is
  older than a cut-off, and superseded summaries unless ``keep_summaries``; the active
  view is never touched, and each pruned entry leaves a tombstone (reason ``prune``).
"""

from __future__ import annotations

from contextledger.history.erasure import DEFAULT_SETTLE_TIMEOUT, Erasure, catch_up, erase, settle_erasure
from contextledger.history.pruning import prune
from contextledger.history.redaction import (
    ERASED_TEXT,
    PRUNE_REASON,
    REDACTED_TEXT,
    erase_blocks,
    summaries_covering,
)

__all__ = [
    "DEFAULT_SETTLE_TIMEOUT",
    "ERASED_TEXT",
    "PRUNE_REASON",
    "REDACTED_TEXT",
    "Erasure",
    "catch_up",
    "erase",
    "erase_blocks",
    "prune",
    "settle_erasure",
    "summaries_covering",
]
