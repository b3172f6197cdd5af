from contextledger.testing import StoreContract


class TestStoreContract(StoreContract):
    """Runs the contract suite against every backend of the ``store`` fixture."""
