"""The password hashes of an htpasswd file that Pulsar's basic authentication checks.

Pulsar's ``AuthenticationProviderBasic`` accepts two forms (``htpasswd -m`` and ``htpasswd -d``):
Apache's MD5 crypt, ``$apr1$<salt>$<hash>``, and the traditional crypt(3) DES hash, 13
characters whose first two are the salt. Both are written out here (Python's ``crypt`` module is
gone from 3.13): the MD5 one from the standard ``hashlib.md5``, the DES one with DES itself, since
crypt(3) perturbs DES's expansion table with the salt and so cannot use a library cipher.
"""

from __future__ import annotations

import hashlib
import hmac

APR1_MAGIC = "$apr1$"
_ALPHABET = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


class UnsupportedHash(ValueError):
    """A stored hash in neither form; the message says what was found."""


def check_hash_format(hashed: str) -> None:
    """Raise UnsupportedHash unless ``hashed`` is an APR1 MD5 or a DES crypt hash."""
    if hashed.startswith(APR1_MAGIC):
        if len(hashed.split("$")) != 4:
            raise UnsupportedHash("an $apr1$ hash must be $apr1$<salt>$<hash>")
    elif len(hashed) != 13 or any(c not in _ALPHABET for c in hashed):
        kind = f"a ${hashed.split('$')[1]}$ hash" if hashed.startswith("$") and "$" in hashed[1:] else "no hash"
        raise UnsupportedHash(
            f"{kind}: Pulsar's basic authentication checks $apr1$ MD5 (htpasswd -m) and crypt DES (htpasswd -d) only"
        )


def verify_password(password: str, hashed: str) -> bool:
    """Whether ``password`` hashes to ``hashed`` (compared in constant time)."""
    if hashed.startswith(APR1_MAGIC):
        salt = hashed.split("$")[2]
        computed = apr1_md5_crypt(password.encode(), salt.encode())
    else:
        computed = des_crypt(password.encode(), hashed[:2])
    return hmac.compare_digest(computed.encode(), hashed.encode())


# ---- Apache MD5 crypt ----


def apr1_md5_crypt(password: bytes, salt: bytes) -> str:
    """``$apr1$<salt>$<22 characters>``: the MD5-based crypt with Apache's magic string."""
    salt = salt[:8]
    magic = APR1_MAGIC.encode()
    alternate = hashlib.md5(password + salt + password).digest()
    context = hashlib.md5(password + magic + salt)
    for length in range(len(password), 0, -16):
        context.update(alternate[: min(16, length)])
    length = len(password)
    while length:
        context.update(b"\0" if length & 1 else password[:1])
        length >>= 1
    digest = context.digest()
    for round_ in range(1000):
        step = hashlib.md5(password if round_ & 1 else digest)
        if round_ % 3:
            step.update(salt)
        if round_ % 7:
            step.update(password)
        step.update(digest if round_ & 1 else password)
        digest = step.digest()
    encoded = "".join(
        _to64((digest[a] << 16) | (digest[b] << 8) | digest[c], 4)
        for a, b, c in ((0, 6, 12), (1, 7, 13), (2, 8, 14), (3, 9, 15), (4, 10, 5))
    )
    return f"{APR1_MAGIC}{salt.decode()}${encoded}{_to64(digest[11], 2)}"


def _to64(value: int, count: int) -> str:
    chars = []
    for _ in range(count):
        chars.append(_ALPHABET[value & 0x3F])
        value >>= 6
    return "".join(chars)


# ---- crypt(3) DES ----
# DES's tables (FIPS 46-3), 1-based bit positions as the standard prints them.

_PC1 = (57, 49, 41, 33, 25, 17, 9, 1, 58, 50, 42, 34, 26, 18, 10, 2, 59, 51, 43, 35, 27, 19, 11, 3, 60, 52, 44, 36,
        63, 55, 47, 39, 31, 23, 15, 7, 62, 54, 46, 38, 30, 22, 14, 6, 61, 53, 45, 37, 29, 21, 13, 5, 28, 20, 12, 4)  # fmt: skip
_PC2 = (14, 17, 11, 24, 1, 5, 3, 28, 15, 6, 21, 10, 23, 19, 12, 4, 26, 8, 16, 7, 27, 20, 13, 2,
        41, 52, 31, 37, 47, 55, 30, 40, 51, 45, 33, 48, 44, 49, 39, 56, 34, 53, 46, 42, 50, 36, 29, 32)  # fmt: skip
_SHIFTS = (1, 1, 2, 2, 2, 2, 2, 2, 1, 2, 2, 2, 2, 2, 2, 1)
_IP = (58, 50, 42, 34, 26, 18, 10, 2, 60, 52, 44, 36, 28, 20, 12, 4, 62, 54, 46, 38, 30, 22, 14, 6,
       64, 56, 48, 40, 32, 24, 16, 8, 57, 49, 41, 33, 25, 17, 9, 1, 59, 51, 43, 35, 27, 19, 11, 3,
       61, 53, 45, 37, 29, 21, 13, 5, 63, 55, 47, 39, 31, 23, 15, 7)  # fmt: skip
_FP = tuple(_IP.index(bit) + 1 for bit in range(1, 65))  # the inverse of IP
# E: each 4-bit group with its neighbours' edge bits, 6 bits per S-box.
_E = tuple((4 * group + offset - 1) % 32 + 1 for group in range(8) for offset in range(6))
_P = (16, 7, 20, 21, 29, 12, 28, 17, 1, 15, 23, 26, 5, 18, 31, 10,
      2, 8, 24, 14, 32, 27, 3, 9, 19, 13, 30, 6, 22, 11, 4, 25)  # fmt: skip
_S = (
    (14, 4, 13, 1, 2, 15, 11, 8, 3, 10, 6, 12, 5, 9, 0, 7, 0, 15, 7, 4, 14, 2, 13, 1, 10, 6, 12, 11, 9, 5, 3, 8,
     4, 1, 14, 8, 13, 6, 2, 11, 15, 12, 9, 7, 3, 10, 5, 0, 15, 12, 8, 2, 4, 9, 1, 7, 5, 11, 3, 14, 10, 0, 6, 13),
    (15, 1, 8, 14, 6, 11, 3, 4, 9, 7, 2, 13, 12, 0, 5, 10, 3, 13, 4, 7, 15, 2, 8, 14, 12, 0, 1, 10, 6, 9, 11, 5,
     0, 14, 7, 11, 10, 4, 13, 1, 5, 8, 12, 6, 9, 3, 2, 15, 13, 8, 10, 1, 3, 15, 4, 2, 11, 6, 7, 12, 0, 5, 14, 9),
    (10, 0, 9, 14, 6, 3, 15, 5, 1, 13, 12, 7, 11, 4, 2, 8, 13, 7, 0, 9, 3, 4, 6, 10, 2, 8, 5, 14, 12, 11, 15, 1,
     13, 6, 4, 9, 8, 15, 3, 0, 11, 1, 2, 12, 5, 10, 14, 7, 1, 10, 13, 0, 6, 9, 8, 7, 4, 15, 14, 3, 11, 5, 2, 12),
    (7, 13, 14, 3, 0, 6, 9, 10, 1, 2, 8, 5, 11, 12, 4, 15, 13, 8, 11, 5, 6, 15, 0, 3, 4, 7, 2, 12, 1, 10, 14, 9,
     10, 6, 9, 0, 12, 11, 7, 13, 15, 1, 3, 14, 5, 2, 8, 4, 3, 15, 0, 6, 10, 1, 13, 8, 9, 4, 5, 11, 12, 7, 2, 14),
    (2, 12, 4, 1, 7, 10, 11, 6, 8, 5, 3, 15, 13, 0, 14, 9, 14, 11, 2, 12, 4, 7, 13, 1, 5, 0, 15, 10, 3, 9, 8, 6,
     4, 2, 1, 11, 10, 13, 7, 8, 15, 9, 12, 5, 6, 3, 0, 14, 11, 8, 12, 7, 1, 14, 2, 13, 6, 15, 0, 9, 10, 4, 5, 3),
    (12, 1, 10, 15, 9, 2, 6, 8, 0, 13, 3, 4, 14, 7, 5, 11, 10, 15, 4, 2, 7, 12, 9, 5, 6, 1, 13, 14, 0, 11, 3, 8,
     9, 14, 15, 5, 2, 8, 12, 3, 7, 0, 4, 10, 1, 13, 11, 6, 4, 3, 2, 12, 9, 5, 15, 10, 11, 14, 1, 7, 6, 0, 8, 13),
    (4, 11, 2, 14, 15, 0, 8, 13, 3, 12, 9, 7, 5, 10, 6, 1, 13, 0, 11, 7, 4, 9, 1, 10, 14, 3, 5, 12, 2, 15, 8, 6,
     1, 4, 11, 13, 12, 3, 7, 14, 10, 15, 6, 8, 0, 5, 9, 2, 6, 11, 13, 8, 1, 4, 10, 7, 9, 5, 0, 15, 14, 2, 3, 12),
    (13, 2, 8, 4, 6, 15, 11, 1, 10, 9, 3, 14, 5, 0, 12, 7, 1, 15, 13, 8, 10, 3, 7, 4, 12, 5, 6, 11, 0, 14, 9, 2,
     7, 11, 4, 1, 9, 12, 14, 2, 0, 6, 10, 13, 15, 3, 5, 8, 2, 1, 14, 7, 4, 10, 8, 13, 15, 12, 9, 0, 3, 5, 6, 11),
)  # fmt: skip

Bits = list[int]


def des_crypt(password: bytes, salt: str) -> str:
    """The 13-character crypt(3) hash: the salt, then 25 DES encryptions of a zero block under the
    first 8 bytes of the password (7 bits each), with the salt swapping pairs of E's outputs."""
    if len(salt) != 2 or any(c not in _ALPHABET for c in salt):
        raise UnsupportedHash(f"a crypt DES salt is 2 characters of {_ALPHABET}, got {salt!r}")
    key = [(byte << 1 >> (7 - bit)) & 1 for byte in password[:8].ljust(8, b"\0") for bit in range(8)]
    expansion = list(_E)
    for index, char in enumerate(salt):
        value = _ALPHABET.index(char)
        for bit in range(6):
            if value >> bit & 1:
                position = 6 * index + bit
                expansion[position], expansion[position + 24] = expansion[position + 24], expansion[position]
    subkeys = des_subkeys(key)
    block = [0] * 64
    for _ in range(25):
        block = des_encrypt_block(block, subkeys, expansion)
    bits = block + [0, 0]
    return salt + "".join(_ALPHABET[int("".join(map(str, bits[6 * i : 6 * i + 6])), 2)] for i in range(11))


def des_subkeys(key: Bits) -> list[Bits]:
    """DES's 16 round keys (48 bits each) from a 64-bit key."""
    permuted = _permute(key, _PC1)
    left, right = permuted[:28], permuted[28:]
    subkeys = []
    for shift in _SHIFTS:
        left, right = left[shift:] + left[:shift], right[shift:] + right[:shift]
        subkeys.append(_permute(left + right, _PC2))
    return subkeys


def des_encrypt_block(block: Bits, subkeys: list[Bits], expansion: tuple[int, ...] | list[int] = _E) -> Bits:
    """One DES encryption of a 64-bit block, with the given (possibly salted) expansion table."""
    permuted = _permute(block, _IP)
    left, right = permuted[:32], permuted[32:]
    for subkey in subkeys:
        mixed = [bit ^ key_bit for bit, key_bit in zip(_permute(right, expansion), subkey, strict=True)]
        substituted: Bits = []
        for box in range(8):
            six = mixed[6 * box : 6 * box + 6]
            row = six[0] << 1 | six[5]
            column = six[1] << 3 | six[2] << 2 | six[3] << 1 | six[4]
            value = _S[box][16 * row + column]
            substituted += [value >> 3 & 1, value >> 2 & 1, value >> 1 & 1, value & 1]
        left, right = right, [a ^ b for a, b in zip(left, _permute(substituted, _P), strict=True)]
    return _permute(right + left, _FP)


def _permute(bits: Bits, table: tuple[int, ...] | list[int]) -> Bits:
    return [bits[position - 1] for position in table]
