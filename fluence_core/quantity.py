"""Kubernetes resource quantities ("500m", "4Gi", "1e3") as exact, bounded numbers.

Fluence needs two readings only: CPU in cores (rounded up to whole cores by the
callers) and memory in MiB. Parsing is exact (``Fraction``) so that rounding
happens once, where the rule says it should.

The API server stores any quantity its grammar admits (``cpu: 1e5000`` included),
so the text is hostile until checked. Every value is bounded before a big number
is ever built: its magnitude in milli-units must fit a signed 64-bit integer (the
bound kube-scheduler's ``MilliValue`` assumes, without checking), and precision
finer than a nano-unit is rounded up to one, as the API server rounds. The work
done is linear in the text's length, which is itself bounded, never in the
exponent: ``1e10000000`` is refused as fast as ``1e30``.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

MIB = 2**20
MAX_MILLI = 2**63 - 1
"""The largest quantity, in milli-units (about 9.2e15 cores, or 8 PiB of memory)."""
MAX_VALUE = Fraction(MAX_MILLI, 1000)
_TOO_LARGE = f"the limit is {MAX_MILLI // 1000}.{MAX_MILLI % 1000:03d}, int64 milli-units"
MAX_TEXT = 64
"""Longest quantity text accepted; canonical Kubernetes quantities are far shorter."""

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?"
    r"(?:(?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)|[eE](?P<exp>[+-]?[0-9]+)|(?P<decimal>[numkMGTPE]?))",
    re.ASCII,
)
_NANO_EXPONENT = -9
_LOG10_2 = math.log10(2)


class QuantityError(ValueError):
    """A quantity that is not one, or lies outside the bounds Fluence accepts."""


def parse_quantity(value: str | float) -> Fraction:
    """The exact value of a quantity; raises :class:`QuantityError` naming the bad text."""
    if isinstance(value, bool):
        raise QuantityError(f"not a quantity: {value!r}")
    if isinstance(value, int):
        if abs(value) > MAX_VALUE:
            raise QuantityError(f"quantity {_shorten(value)} is too large"
                                f" ({_TOO_LARGE})")
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"not a finite quantity: {value!r}")
        return parse_quantity(repr(value))
    if not isinstance(value, str):
        raise QuantityError(f"not a quantity: {_shorten(value)} ({type(value).__name__})")
    return _parse_text(value)


@lru_cache(maxsize=4096)
def _parse_text(text: str) -> Fraction:
    """Parse a quantity's text; a cluster repeats a few texts ("1", "500m", "4Gi") for every
    pod, so each is parsed once (a Fraction is immutable, so sharing it is safe; a refusal
    is not cached, but costs as little as a parse)."""
    if len(text) > MAX_TEXT:
        raise QuantityError(f"quantity {_shorten(text)} is longer than {MAX_TEXT} characters")
    match = _QUANTITY.fullmatch(text.strip())
    if not match or not (match["int"] or match["frac"]):
        raise QuantityError(f"not a Kubernetes quantity: {text!r}")
    frac = match["frac"] or ""
    digits = ((match["int"] or "") + frac).lstrip("0")
    if not digits:
        return Fraction(0)
    if match["binary"]:
        exponent10, exponent2 = -len(frac), _BINARY[match["binary"]]
    elif match["exp"] is not None:
        exponent10, exponent2 = int(match["exp"]) - len(frac), 0
    else:
        exponent10, exponent2 = _DECIMAL[match["decimal"]] - len(frac), 0
    # The value is digits * 10**exponent10 * 2**exponent2, at least 10**(len(digits)-1+...):
    # refuse by magnitude before any power is built.
    magnitude = len(digits) - 1 + exponent10 + exponent2 * _LOG10_2
    if magnitude >= 19:
        raise QuantityError(f"quantity {text!r} is too large"
                            f" ({_TOO_LARGE})")
    nanos = _ceil_nanos(int(digits), exponent10) << exponent2
    result = Fraction(nanos, 10**-_NANO_EXPONENT)
    if result > MAX_VALUE:
        raise QuantityError(f"quantity {text!r} is too large"
                            f" ({_TOO_LARGE})")
    return -result if match["sign"] == "-" else result


def _ceil_nanos(digits: int, exponent10: int) -> int:
    """``digits * 10**exponent10`` in nano-units, precision below a nano rounded up."""
    shift = exponent10 - _NANO_EXPONENT
    if shift >= 0:
        return digits * _power_of_ten(shift)  # shift < 29 here: the magnitude was checked
    if -shift > MAX_TEXT:
        return 1  # smaller than a nano-unit, however many digits the text had
    return -(-digits // _power_of_ten(-shift))


def _power_of_ten(exponent: int) -> int:
    result: int = pow(10, exponent)
    return result


def _shorten(value: object) -> str:
    """A short, cheap description: never the decimal text of a huge integer."""
    if isinstance(value, int) and value.bit_length() > 100:
        return f"an integer of {math.floor(value.bit_length() * _LOG10_2) + 1} digits"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _non_negative(value: str | float, amount: Fraction) -> Fraction:
    if amount < 0:
        raise QuantityError(f"quantity {_shorten(value)} is negative")
    return amount


def cpu_cores(value: str | float) -> Fraction:
    """A CPU (or any counted resource) quantity in units; never negative."""
    return _non_negative(value, parse_quantity(value))


def memory_mib(value: str | float) -> Fraction:
    """A memory quantity (bytes) in MiB; never negative."""
    return _non_negative(value, parse_quantity(value)) / MIB
