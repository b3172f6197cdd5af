"""The summarizers' earlier home: everything here lives in :mod:`contextledger.managers.summarizers`."""

from __future__ import annotations

from contextledger.managers.summarizers import (
    SUMMARY_MARK,
    ExtractiveSummarizer,
    Summarizer,
    coverage_of,
    is_summary,
    summarize_texts,
    summarizer_name,
)

__all__ = [
    "SUMMARY_MARK",
    "ExtractiveSummarizer",
    "Summarizer",
    "coverage_of",
    "is_summary",
    "summarize_texts",
    "summarizer_name",
]
