"""Test support shipped with the library: the store contract suite.

Every :class:`~contextledger.stores.base.LedgerStore` must pass
:class:`~contextledger.testing.contract.StoreContract` unchanged. Use it from a test
module with a ``store`` fixture that yields a fresh, empty store::

    from contextledger.testing import StoreContract

    class TestMyStore(StoreContract):
        pass
"""

from contextledger.testing.contract import StoreContract

__all__ = ["StoreContract"]
