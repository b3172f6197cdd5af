"""Test support shipped with the library: the store contract suite (the ``testing`` extra).

Every :class:`~contextledger.stores.base.CompleteStore` must pass
:class:`~contextledger.testing.contract.StoreContract` unchanged. Use it from a test
module with a ``store`` fixture that yields a fresh, empty store and a ``lost_reply``
fixture (see :class:`~contextledger.testing.exactly_once.LostReply`)::

    from contextledger.testing import StoreContract

    class TestMyStore(StoreContract):
        pass

It needs pytest: ``pip install 'contextledger[testing]'``.

The hosts' session contracts live beside it and need their host SDK as well:
:class:`contextledger.testing.strands.StrandsSessionContract` (a ``store`` fixture) and
:class:`contextledger.testing.openai_agents.OpenAISessionContract` (a ``ledger_url``
fixture yielding ``(url, options)``).
"""

try:
    import pytest  # noqa: F401 - checked here so the error names the extra
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without pytest
    raise ImportError(
        "contextledger.testing needs pytest, which is not installed: pip install 'contextledger[testing]'"
    ) from exc

from contextledger.testing.contract import StoreContract
from contextledger.testing.declared import CapabilityContract
from contextledger.testing.encryption import EncryptionContract
from contextledger.testing.exactly_once import ExactlyOnceContract, LostReply
from contextledger.testing.history import HistoryContract
from contextledger.testing.lifecycle import LifecycleContract, PinHistoryContract
from contextledger.testing.lineage import ExpiryContract, LineageContract
from contextledger.testing.required import RequiredContract
from contextledger.testing.sessions import SessionsContract

__all__ = [
    "CapabilityContract",
    "EncryptionContract",
    "ExactlyOnceContract",
    "ExpiryContract",
    "HistoryContract",
    "LifecycleContract",
    "LineageContract",
    "LostReply",
    "PinHistoryContract",
    "RequiredContract",
    "SessionsContract",
    "StoreContract",
]
