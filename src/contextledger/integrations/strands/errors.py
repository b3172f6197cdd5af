"""Errors the Strands integration raises: contextledger's and Strands' at once."""

from __future__ import annotations

from strands.types.exceptions import ContextWindowOverflowException

from contextledger.errors import ReductionFailed

__all__ = ["StrandsReductionFailed"]


class StrandsReductionFailed(ReductionFailed, ContextWindowOverflowException):
    """A context overflow nothing could be reduced for, inside a Strands agent.

    It is contextledger's :class:`~contextledger.errors.ReductionFailed` and Strands'
    ``ContextWindowOverflowException`` both, so an application's ``except
    ContextWindowOverflowException`` handler catches it as it catches the overflows of
    Strands' own managers; the manager's original error is its ``__cause__``.
    """
