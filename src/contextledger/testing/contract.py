"""The full store contract: the required part and every capability's, for a store that has them all.

Subclass :class:`StoreContract` in a test module where a ``store`` fixture yields a
fresh, empty store, and a ``lost_reply`` fixture yields a
:class:`~contextledger.testing.exactly_once.LostReply` (a fresh store whose commits can
lose their reply). The tests of a capability the store does not declare are skipped,
saying which (:class:`~contextledger.testing.declared.CapabilityContract`); a new backend
can start with :class:`~contextledger.testing.required.RequiredContract` alone.
"""

from __future__ import annotations

from contextledger.testing.encryption import EncryptionContract
from contextledger.testing.exactly_once import ExactlyOnceContract
from contextledger.testing.history import HistoryContract
from contextledger.testing.lifecycle import LifecycleContract, PinHistoryContract
from contextledger.testing.lineage import ExpiryContract, LineageContract
from contextledger.testing.owners import OwnersContract
from contextledger.testing.paging import KeyedPagingContract, PagingContract
from contextledger.testing.required import RequiredContract
from contextledger.testing.retention import RetentionContract
from contextledger.testing.sessions import SessionsContract
from contextledger.testing.transfer import TransferContract
from contextledger.testing.travel import TimeTravelContract

__all__ = ["StoreContract"]


class StoreContract(
    RequiredContract,
    HistoryContract,
    SessionsContract,
    PagingContract,
    KeyedPagingContract,
    OwnersContract,
    EncryptionContract,
    LineageContract,
    ExpiryContract,
    TransferContract,
    RetentionContract,
    TimeTravelContract,
    PinHistoryContract,
    LifecycleContract,
    ExactlyOnceContract,
):
    """The contract suite: the required part plus one contract per capability.

    Requires a ``store`` fixture yielding a fresh empty store, and a ``lost_reply``
    fixture for the exactly-once tests (see :mod:`contextledger.testing.exactly_once`).
    """
