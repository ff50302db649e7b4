"""Kubernetes resource quantities ("500m", "4Gi", "1e3") as exact numbers.

Fluence needs two readings only: CPU in cores (rounded up to whole cores by the
callers) and memory in MiB. Parsing is exact (``Fraction``) so that rounding
happens once, where the rule says it should.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL: dict[str, Fraction | int] = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")
MIB = 2**20


def parse_quantity(value: str | int | float) -> Fraction:
    """The exact value of a quantity; raises ``ValueError`` naming the bad text."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, (int, float)):
        return Fraction(str(value))
    return _parse_text(value)


@lru_cache(maxsize=4096)
def _parse_text(value: str) -> Fraction:
    """Parse a quantity's text; a cluster repeats a few texts ("1", "500m", "4Gi") for every
    pod, so each is parsed once (a Fraction is immutable, so sharing it is safe)."""
    match = _QUANTITY.match(value.strip())
    if not match:
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    number, suffix = match.groups()
    try:
        base = Fraction(number)
    except ValueError:
        raise ValueError(f"not a Kubernetes quantity: {value!r}") from None
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    if suffix in _DECIMAL:
        return base * Fraction(_DECIMAL[suffix])
    raise ValueError(f"unknown quantity suffix {suffix!r} in {value!r}")


def cpu_cores(value: str | int | float) -> Fraction:
    """A CPU quantity in cores."""
    return parse_quantity(value)


def memory_mib(value: str | int | float) -> Fraction:
    """A memory quantity (bytes) in MiB."""
    return parse_quantity(value) / MIB
