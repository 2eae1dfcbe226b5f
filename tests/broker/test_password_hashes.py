"""The htpasswd hashes Pulsar's basic authentication checks, against the tools that make them."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from cryptography.hazmat.decrepit.ciphers.algorithms import TripleDES
from cryptography.hazmat.primitives.ciphers import Cipher, modes

from airflow_pulsar.broker.password_hashes import (
    UnsupportedHash,
    apr1_md5_crypt,
    check_hash_format,
    des_crypt,
    des_encrypt_block,
    des_subkeys,
    verify_password,
)

# Made by `openssl passwd -apr1 -salt abcdefgh secret` and Perl's crypt("secret", "ab") (libc).
APR1_SECRET = "$apr1$abcdefgh$h9FWgUz3n9YxylKLlR5SQ/"
DES_SECRET = "abNANd1rDfiNc"


def _bits(data: bytes) -> list[int]:
    return [(byte >> (7 - i)) & 1 for byte in data for i in range(8)]


def test_des_matches_a_library_cipher() -> None:
    # Unsalted DES is plain DES: TripleDES with one key three times is single DES.
    for _ in range(20):
        key, block = os.urandom(8), os.urandom(8)
        expected = Cipher(TripleDES(key * 3), modes.ECB()).encryptor().update(block)
        assert des_encrypt_block(_bits(block), des_subkeys(_bits(key))) == _bits(expected)


def test_known_hashes_verify() -> None:
    assert verify_password("secret", APR1_SECRET) and not verify_password("Secret", APR1_SECRET)
    assert verify_password("secret", DES_SECRET) and not verify_password("secreT", DES_SECRET)
    # crypt DES reads the first 8 characters only.
    assert des_crypt(b"password-long", "ab") == des_crypt(b"password", "ab")


@pytest.mark.parametrize("password", ["", "a", "secret", "p\u00e9 with spaces", "x" * 40])
def test_apr1_matches_openssl(password: str) -> None:
    expected = subprocess.run(
        ["openssl", "passwd", "-apr1", "-salt", "s4ltS4lt", password], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert apr1_md5_crypt(password.encode(), b"s4ltS4lt") == expected


@pytest.mark.skipif(shutil.which("perl") is None, reason="Perl's crypt() is the reference for DES crypt here")
@pytest.mark.parametrize(("password", "salt"), [("secret", "ab"), ("", ".."), ("longpassword", "Zz"), ("p\u00e9", "9/")])
def test_des_crypt_matches_libc(password: str, salt: str) -> None:
    expected = subprocess.run(
        ["perl", "-e", "print crypt($ARGV[0], $ARGV[1])", password, salt], capture_output=True, check=True
    ).stdout.decode()
    assert des_crypt(password.encode(), salt) == expected


@pytest.mark.parametrize(
    ("hashed", "message"),
    [("$6$salt$hash", r"a \$6\$ hash: Pulsar's basic authentication checks"), ("plain", "no hash"), ("$apr1$x", "must be")],
)
def test_unsupported_hashes_are_named(hashed: str, message: str) -> None:
    with pytest.raises(UnsupportedHash, match=message):
        check_hash_format(hashed)
