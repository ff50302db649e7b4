"""fluence_core.quantity: Kubernetes quantities read exactly."""

from __future__ import annotations

from fractions import Fraction

import pytest

from fluence_core.quantity import cpu_cores, memory_mib, parse_quantity


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
        ("1E", 10**18),
        ("1Ki", 1024),
        ("4Gi", 4 * 2**30),
        ("100n", Fraction(1, 10**7)),
        ("250u", Fraction(1, 4000)),
        (" 3 ", 3),
        (2, 2),
        (0.25, Fraction(1, 4)),
    ],
)
def test_parse_quantity_is_exact(text: str | int | float, value: Fraction | int) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1..2", "1Xi", "Gi", "1 Gi"])
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
