"""A real PNG, small enough to inline in a message."""

from __future__ import annotations

import struct
import zlib

__all__ = ["tiny_png"]


def tiny_png(width: int = 24, height: int = 16) -> bytes:
    """A real PNG (a blue-to-green gradient) so the browser can decode the inline image."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(
        b"\x00" + b"".join(bytes((40, 80 + 7 * y, 255 - 9 * x)) for x in range(width)) for y in range(height)
    )
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
