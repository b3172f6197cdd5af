"""Cold caches on demand: what ``floor.py --cold`` and ``touched.py`` run before each measured step."""

from __future__ import annotations


class CacheEvictor:
    """Evicts the processor's data and unified caches: writes one byte in every 64-byte line of a large buffer.

    The buffer is allocated and touched once here, so an eviction costs no page faults;
    ``megabytes`` should exceed the last-level cache (a few times over on a shared one).
    """

    LINE = 64

    def __init__(self, megabytes: int) -> None:
        """Allocate the buffer and write it once.

        Raises:
            ValueError: ``megabytes`` is not positive.
        """
        if megabytes <= 0:
            raise ValueError(f"an eviction buffer needs a positive size, got {megabytes} MB")
        self._buffer = bytearray(megabytes << 20)
        self._zeros = bytes(len(self._buffer) // self.LINE)
        self()

    def __call__(self) -> None:
        """Evict: one C loop, one store per line of the buffer."""
        self._buffer[:: self.LINE] = self._zeros
