"""The Strands session contract (``contextledger.testing.strands``) on every backend."""

from __future__ import annotations

from contextledger.testing.strands import StrandsSessionContract


class TestStrandsSessionContract(StrandsSessionContract):
    """Runs the Strands contract against every backend of the ``store`` fixture."""
