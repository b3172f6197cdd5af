"""Encryption at rest: keys, and the sealed form of what a ledger stores of a conversation's content.

Optional (``pip install 'contextledger[crypto]'``). Message content and host metadata,
summaries, revisions (original contents) and the manager's and host's state are sealed
with AES-256-GCM (``cryptography``) under a key the user provides; ids, roles, seqs,
token estimates, pin flags, timestamps, reductions, pin events and tombstones stay clear,
so listings, ordering and the view's rules work on them unchanged.

A sealed value is a token ``clenc1.<key id>.<base64url(nonce | ciphertext)>``, bound
(as authenticated data) to where it belongs -- session, agent, what and which id -- so a
token copied to another row does not open. Each token names its key, so a
:class:`Keyring` holding the new key and the old ones reads everything while
``contextledger encryption rotate`` re-seals the ledger under the new key in batches.
A wrong key is :class:`~contextledger.errors.EncryptionError` and a key that is not in
the keyring :class:`~contextledger.errors.EncryptionKeyMissing`: never bytes in place of
the value.

The stored forms keep the shapes the stores expect: content is one block
``{"cl_encrypted": token}``, metadata ``{"cl_encrypted": token}`` (plus the clear pin
flag), a summary's text the token itself, state ``{"cl_encrypted": token}``.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from contextledger.errors import ConfigurationError, EncryptionError, EncryptionKeyMissing
from contextledger.model.jsonvalues import ContentBlock, decode_blocks, decode_shared, encode_blocks, encode_value
from contextledger.model.stored import SEALED

__all__ = [
    "ENV_KEYS",
    "SEALED",
    "KeyProvider",
    "Keyring",
    "Sealer",
    "key_id_of",
    "new_key",
]

ENV_KEYS = "CONTEXTLEDGER_ENCRYPTION_KEYS"
"""The environment variable that holds the keys: ``id:base64key[,id:base64key...]``, the current one first."""
_PREFIX = "clenc1."
_KEY_ID = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
_NONCE = 12


def new_key() -> str:
    """A fresh 256-bit key, base64url-encoded (what :meth:`Keyring.parse` and the environment variable take)."""
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode("ascii")


class KeyProvider:
    """What a ledger asks of its keys: the current one, and any one by id.

    Subclass it (or pass a :class:`Keyring`) to fetch keys from a secrets manager.
    """

    def current(self) -> tuple[str, bytes]:
        """The id and bytes of the key new values are sealed with."""
        raise NotImplementedError

    def key(self, key_id: str) -> bytes | None:
        """The key ``key_id``, or ``None`` when it is not known."""
        raise NotImplementedError


class Keyring(KeyProvider):
    """Keys by id; the first is current, the others only open what they sealed (during a rotation).

    Args:
        keys: ``(id, key)`` pairs, the current key first; a key is 32 bytes (AES-256),
            or their base64 (url-safe or standard) text.

    Raises:
        ConfigurationError: No key, an id that is not 1-40 letters, digits, ``_`` or
            ``-``, an id given twice, or a key that is not 32 bytes.
    """

    def __init__(self, keys: list[tuple[str, bytes | str]]) -> None:
        if not keys:
            raise ConfigurationError("a keyring needs at least one key")
        self._keys: dict[str, bytes] = {}
        for key_id, key in keys:
            if not isinstance(key_id, str) or not _KEY_ID.match(key_id):
                raise ConfigurationError(f"a key id is 1-40 letters, digits, '_' or '-', got {key_id!r}")
            if key_id in self._keys:
                raise ConfigurationError(f"key id {key_id!r} is given twice")
            self._keys[key_id] = _key_bytes(key_id, key)
        self._current = keys[0][0]

    @classmethod
    def parse(cls, text: str) -> Keyring:
        """A keyring from ``id:base64key[,id:base64key...]`` (the current key first).

        Raises:
            ConfigurationError: The text is not of that form (the keys are never echoed).
        """
        pairs: list[tuple[str, bytes | str]] = []
        for part in text.split(","):
            key_id, sep, key = part.strip().partition(":")
            if not sep:
                raise ConfigurationError(f"keys are id:base64key separated by commas; {key_id[:40]!r}... has no id")
            pairs.append((key_id, key))
        return cls(pairs)

    @classmethod
    def from_env(cls, name: str = ENV_KEYS) -> Keyring | None:
        """The keyring in the environment variable ``name``, or ``None`` when it is unset or empty.

        Raises:
            ConfigurationError: The variable is set but malformed.
        """
        text = os.environ.get(name, "").strip()
        return cls.parse(text) if text else None

    @property
    def ids(self) -> tuple[str, ...]:
        """The key ids, the current one first."""
        return tuple(self._keys)

    def current(self) -> tuple[str, bytes]:
        """The id and bytes of the current key."""
        return self._current, self._keys[self._current]

    def key(self, key_id: str) -> bytes | None:
        """The key ``key_id``, or ``None``."""
        return self._keys.get(key_id)

    def __repr__(self) -> str:
        return f"Keyring(ids={list(self._keys)!r})"  # never the keys


def _key_bytes(key_id: str, key: bytes | str) -> bytes:
    if isinstance(key, str):
        text = key.strip()
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) != 32:
            try:
                raw = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
            except (binascii.Error, ValueError):
                raw = b""
        key = raw
    if len(key) != 32:
        raise ConfigurationError(f"key {key_id!r} must be 32 bytes (AES-256), base64-encoded in text")
    return bytes(key)


def key_id_of(token: str) -> str | None:
    """The id of the key a token was sealed with, or ``None`` when ``token`` is not one."""
    if not token.startswith(_PREFIX):
        return None
    key_id, _, _ = token[len(_PREFIX) :].partition(".")
    return key_id or None


@dataclass(frozen=True)
class Sealer:
    """Seals and opens values under a :class:`KeyProvider`, each bound to its place.

    Args:
        keys: Where the keys come from.
    """

    keys: KeyProvider
    _ciphers: dict[bytes, Any] = field(default_factory=dict, repr=False, compare=False)

    def _cipher(self, key: bytes) -> Any:
        """The AES-GCM cipher of ``key`` (built once per key)."""
        cipher = self._ciphers.get(key)
        if cipher is None:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM

            cipher = self._ciphers[key] = AESGCM(key)
        return cipher

    def __post_init__(self) -> None:
        try:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM  # noqa: F401
        except ImportError as exc:  # pragma: no cover - the extra is installed in the tests
            raise ConfigurationError(
                "encryption at rest needs the cryptography package: pip install 'contextledger[crypto]'"
            ) from exc

    # -- tokens -------------------------------------------------------------------------

    def seal_text(self, text: str, place: str) -> str:
        """``text`` sealed under the current key, bound to ``place``."""
        key_id, key = self.keys.current()
        nonce = secrets.token_bytes(_NONCE)
        sealed = self._cipher(key).encrypt(nonce, text.encode("utf-8", "surrogatepass"), place.encode("utf-8"))
        return f"{_PREFIX}{key_id}.{base64.urlsafe_b64encode(nonce + sealed).decode('ascii')}"

    def open_text(self, token: str, place: str) -> str:
        """The text ``token`` seals, checked against ``place``.

        Raises:
            EncryptionKeyMissing: The key it names is not known.
            EncryptionError: The key is wrong or the token was damaged or moved.
        """
        from cryptography.exceptions import InvalidTag

        where = " / ".join(part for part in place.split("\x1f") if part)
        key_id = key_id_of(token)
        if key_id is None:
            raise EncryptionError(f"{where}: not a sealed value")
        key = self.keys.key(key_id)
        if key is None:
            raise EncryptionKeyMissing(
                f"{where} is sealed with key {key_id!r}, which is not among the keys given", key_id=key_id
            )
        try:
            raw = base64.urlsafe_b64decode(token[len(_PREFIX) + len(key_id) + 1 :])
            plain: bytes = self._cipher(key).decrypt(raw[:_NONCE], raw[_NONCE:], place.encode("utf-8"))
        except (InvalidTag, binascii.Error, ValueError) as exc:
            raise EncryptionError(
                f"{where} does not open with key {key_id!r}: a wrong key, or a damaged or moved value"
            ) from exc
        return plain.decode("utf-8", "surrogatepass")

    def seal_json(self, value: Any, place: str) -> str:
        """A JSON value (bytes tagged) sealed as one token."""
        return self.seal_text(json.dumps(value, ensure_ascii=False, separators=(",", ":")), place)

    def open_json(self, token: str, place: str) -> Any:
        """The JSON value a token seals."""
        return json.loads(self.open_text(token, place))

    # -- stored forms --------------------------------------------------------------------

    def seal_content(self, content: list[ContentBlock], place: str) -> list[ContentBlock]:
        """Content blocks as one sealed block."""
        return [{SEALED: self.seal_json(encode_blocks(content), place)}]

    def open_content(self, content: Any, place: str) -> list[ContentBlock]:
        """Blocks from their sealed form (content written before encryption is returned as it is)."""
        token = sealed_token(content)
        if token is None:
            return list(content)
        blocks: list[ContentBlock] = decode_blocks(self.open_json(token, place))
        return blocks

    def seal_mapping(self, value: Mapping[str, Any], place: str) -> dict[str, Any]:
        """A mapping (metadata, state) as ``{"cl_encrypted": token}``."""
        return {SEALED: self.seal_json(encode_value(dict(value)), place)}

    def open_mapping(self, value: Any, place: str) -> dict[str, Any]:
        """A mapping from its sealed form (a mapping written before encryption is returned as it is)."""
        if isinstance(value, Mapping) and isinstance(value.get(SEALED), str):
            opened: dict[str, Any] = decode_shared(self.open_json(value[SEALED], place))
            return opened
        return dict(value)


def sealed_token(content: Any) -> str | None:
    """The token of sealed content (one ``cl_encrypted`` block), or ``None`` when it is not sealed."""
    if isinstance(content, list | tuple) and len(content) == 1:
        block = content[0]
        if isinstance(block, Mapping) and len(block) == 1 and isinstance(block.get(SEALED), str):
            token: str = block[SEALED]
            return token
    return None


ProviderLike = KeyProvider | Callable[[], KeyProvider]
"""What ``Ledger.connect(encryption=...)`` takes: a key provider, or a callable that returns one."""
