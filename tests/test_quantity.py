"""fluence_core.quantity: Kubernetes quantities read exactly."""

from __future__ import annotations

import time
from fractions import Fraction

import pytest

from fluence_core.quantity import QuantityError, cpu_cores, memory_mib, parse_quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", 1),
        ("500m", Fraction(1, 2)),
        ("1.5", Fraction(3, 2)),
        ("2k", 2000),
        ("1M", 10**6),
        ("1G", 10**9),
        ("1e3", 1000),
        ("1P", 10**15),
        ("9223372036854775.807", Fraction(2**63 - 1, 1000)),
        ("8191Ti", 8191 * 2**40),
        (".5", Fraction(1, 2)),
        ("5.", 5),
        ("1e-3", Fraction(1, 1000)),
        ("1Ki", 1024),
        ("4Gi", 4 * 2**30),
        ("100n", Fraction(1, 10**7)),
        ("250u", Fraction(1, 4000)),
        (" 3 ", 3),
        (2, 2),
        (0.25, Fraction(1, 4)),
    ],
)
def test_parse_quantity_is_exact(text: str | float, value: Fraction | int) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1..2", "1Xi", "Gi", "1 Gi", ".", "1e", "1.2.3",
                                  "1_000", "\u0663", "1e3Ki", "1.5e3m", "0x10", "inf", "NaN"])
def test_parse_quantity_rejects_text_that_is_not_a_quantity_naming_it(text: str) -> None:
    with pytest.raises(ValueError, match="quantity"):
        parse_quantity(text)


def test_parse_quantity_rejects_a_bool() -> None:
    with pytest.raises(ValueError):
        parse_quantity(True)


def test_cpu_cores_reads_millicores_as_fractions_of_a_core() -> None:
    assert cpu_cores("1500m") == Fraction(3, 2)


def test_memory_mib_reads_binary_suffixes_exactly() -> None:
    assert memory_mib("4Gi") == 4096


def test_memory_mib_of_decimal_bytes_is_a_fraction_not_rounded() -> None:
    assert memory_mib("1G") == Fraction(10**9, 2**20)


@pytest.mark.parametrize("text", ["1e5000", "1e18", "1e10000000", "1E", "8Ei", "8192Pi",
                                  "9223372036854775.808", "-1e19", "99999999999999999999"])
def test_a_quantity_past_int64_milli_units_is_refused_saying_so(text: str) -> None:
    with pytest.raises(QuantityError, match="too large.*int64 milli-units"):
        parse_quantity(text)


def test_a_huge_integer_is_refused_without_printing_its_digits() -> None:
    with pytest.raises(QuantityError, match="an integer of 1001 digits is too large"):
        parse_quantity(10**1000)


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 1e300])
def test_a_float_that_is_not_finite_or_too_large_is_refused(value: float) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(value)


def test_precision_below_a_nano_unit_is_rounded_up_to_one_as_the_api_server_does() -> None:
    assert parse_quantity("1e-10000000") == Fraction(1, 10**9)
    assert parse_quantity("0.1n") == Fraction(1, 10**9)
    assert parse_quantity("1.0000000001") == 1 + Fraction(1, 10**9)


def test_a_text_longer_than_the_limit_is_refused_before_it_is_read() -> None:
    with pytest.raises(QuantityError, match="longer than 64 characters"):
        parse_quantity("1" * 65)


def test_the_exponent_does_not_drive_the_cost_of_parsing() -> None:
    """1e10000000 once cost 9-19 s; a bounded parse refuses it like any other large value.
    A generous wall-clock bound keeps this meaningful on a loaded machine."""
    started = time.perf_counter()
    for text in ("1e10000000", "1e-10000000", "1e99999999999999999999999999999999999999999"):
        for _ in range(100):
            try:
                parse_quantity(text)
            except QuantityError:
                pass
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize("read", [cpu_cores, memory_mib])
def test_cpu_and_memory_are_never_negative(read: object) -> None:
    with pytest.raises(QuantityError, match="negative"):
        read("-4")  # type: ignore[operator]
