"""End-to-end message encryption, wire-compatible with the official Pulsar clients.

A producer given ``encryption_key`` and ``crypto_key_reader`` encrypts each entry's payload after
compression (AES-256-GCM under a data key wrapped with each key name's RSA public key); a consumer
or reader given ``crypto_key_reader`` decrypts before decompression, and otherwise does what its
``crypto_failure_action`` says. The broker only passes the bytes through.
"""

from __future__ import annotations

from .context import ConsumerCryptoFailureAction, EncryptionContext, EncryptionKey
from .decryptor import MessageDecryptor
from .encryptor import MessageEncryptor
from .keys import CryptoKeyReader, EncryptionKeyInfo, KeyReader

__all__ = [
    "ConsumerCryptoFailureAction",
    "CryptoKeyReader",
    "EncryptionContext",
    "EncryptionKey",
    "EncryptionKeyInfo",
    "KeyReader",
    "MessageDecryptor",
    "MessageEncryptor",
]
