"""A ZeroMQ CURVE certificate for the brokers' overlay, made in Python.

Every broker of one instance must hold the same certificate (``flux keygen``
makes one per host, which is why it cannot run in each pod). The keys are
X25519, written Z85-encoded in the ZPL layout Flux reads.
"""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)

_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def z85(data: bytes) -> str:
    """Z85 (ZeroMQ RFC 32) of ``data``, whose length must be a multiple of 4."""
    if len(data) % 4:
        raise ValueError("Z85 encodes multiples of 4 bytes")
    out: list[str] = []
    for i in range(0, len(data), 4):
        value = int.from_bytes(data[i:i + 4], "big")
        chunk: list[str] = []
        for _ in range(5):
            value, digit = divmod(value, 85)
            chunk.append(_Z85[digit])
        out.extend(reversed(chunk))
    return "".join(out)


def curve_certificate(name: str) -> str:
    """A fresh secret certificate (public and secret key) in ZPL."""
    key = X25519PrivateKey.generate()
    secret = key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return ("#   ZeroMQ CURVE **Secret** Certificate (fluence-flux)\n"
            "#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.\n\n"
            "metadata\n"
            f'    name = "{name}"\n'
            "curve\n"
            f'    public-key = "{z85(public)}"\n'
            f'    secret-key = "{z85(secret)}"\n')
