"""DRA's CEL selectors, evaluated over a device as Kubernetes evaluates them.

The one module that evaluates a DeviceClass's or a request's selector. Each
expression is compiled once (:func:`compile_selector` keeps a bounded cache),
and each device keeps its verdict per expression (:attr:`Device.verdicts`), so
a selector costs one evaluation per device however many pods ask.

A selector sees one variable, ``device``, with Kubernetes' fields:

* ``device.driver``: the driver's name;
* ``device.attributes["<domain>"].<name>``: bool, int, string, or a version
  (compare with ``semver("1.2.3")`` and ``.isGreaterThan``/``.isLessThan``/
  ``.compareTo``); an unknown domain is an empty map, so
  ``"x" in device.attributes["d"]`` is false rather than an error;
* ``device.capacity["<domain>"].<name>``: a quantity (``quantity("16Gi")``,
  ``.compareTo``, ``.isGreaterThan``, ``.isLessThan``, ``.asInteger()``,
  ``.asApproximateFloat()``).

A selector that does not compile, fails at run time (a missing attribute) or
does not yield a bool is a :class:`SelectorError` whose message names the
expression and what went wrong: the allocator turns it into the pod's reason,
never into a crash.

The library is cel-python (``celpy``), which the core already uses for the
webhook's match conditions; ``docs/dra.md`` records why it was kept over the
compiled alternatives measured beside it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from functools import lru_cache
from typing import Any, Final

import celpy
from celpy import celtypes

from fluence_core.dra.devices import Device, Version
from fluence_core.quantity import QuantityError, parse_quantity

CACHE_SIZE: Final = 4096
"""Compiled expressions kept (DeviceClasses and requests rarely hold more)."""


class SelectorError(ValueError):
    """A selector that cannot be compiled or evaluated; the message is the reason."""


class Quantity:
    """A capacity value in a selector: an exact number with Kubernetes' methods."""

    __slots__ = ("value",)

    def __init__(self, value: Fraction) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"quantity({self.value})"


class Semver:
    """A version attribute in a selector."""

    __slots__ = ("version",)

    def __init__(self, version: Version) -> None:
        self.version = version

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and other.version.key() == self.version.key()

    def __hash__(self) -> int:
        return hash(self.version.key())


class _Domains(celtypes.MapType):
    """``device.attributes`` / ``device.capacity``: an unknown domain reads as empty."""

    def __getitem__(self, key: Any) -> Any:
        try:
            return super().__getitem__(key)
        except KeyError:
            return celtypes.MapType({})


def _order(left: Any, right: Any) -> int:
    if isinstance(left, Quantity) and isinstance(right, Quantity):
        a: Any = left.value
        b: Any = right.value
    elif isinstance(left, Semver) and isinstance(right, Semver):
        a, b = left.version.key(), right.version.key()
    else:
        raise TypeError(f"cannot compare {left!r} with {right!r}")
    return int(a > b) - int(a < b)


def _quantity(text: Any) -> Quantity:
    try:
        return Quantity(parse_quantity(str(text)))
    except QuantityError as error:
        raise ValueError(str(error)) from None


def _as_integer(q: Quantity) -> celtypes.IntType:
    if q.value.denominator != 1:
        raise ValueError(f"{q.value} is not an integer")
    return celtypes.IntType(int(q.value))


_FUNCTIONS: Final[Mapping[str, Callable[..., Any]]] = {
    "quantity": _quantity,
    "semver": lambda text: Semver(Version(str(text))),
    "compareTo": lambda a, b: celtypes.IntType(_order(a, b)),
    "isGreaterThan": lambda a, b: celtypes.BoolType(_order(a, b) > 0),
    "isLessThan": lambda a, b: celtypes.BoolType(_order(a, b) < 0),
    "asInteger": _as_integer,
    "asApproximateFloat": lambda q: celtypes.DoubleType(float(q.value)),
    "isInteger": lambda q: celtypes.BoolType(q.value.denominator == 1),
    "sign": lambda q: celtypes.IntType((q.value > 0) - (q.value < 0)),
}

_ENVIRONMENT: Final = celpy.Environment()


@lru_cache(maxsize=CACHE_SIZE)
def compile_selector(expression: str) -> celpy.Runner:
    """The compiled program of ``expression`` (cached); SelectorError if it does not parse."""
    try:
        tree = _ENVIRONMENT.compile(expression)
        return _ENVIRONMENT.program(tree, functions=dict(_FUNCTIONS))
    except Exception as error:  # the library raises its own parse errors and plain ones
        raise SelectorError(f"CEL selector {expression!r} does not compile: "
                            f"{_first_line(error)}") from None


def _value(value: Any) -> Any:
    if isinstance(value, Version):
        return Semver(value)
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    return celtypes.StringType(value)


def _activation(device: Device) -> dict[str, Any]:
    attributes = _Domains({
        celtypes.StringType(domain): celtypes.MapType({
            celtypes.StringType(k): _value(v) for k, v in values.items()})
        for domain, values in device.attributes.items()})
    capacity = _Domains({
        celtypes.StringType(domain): celtypes.MapType({
            celtypes.StringType(k): Quantity(v) for k, v in values.items()})
        for domain, values in device.capacity.items()})
    return {"device": celtypes.MapType({
        celtypes.StringType("driver"): celtypes.StringType(device.id.driver),
        celtypes.StringType("attributes"): attributes,
        celtypes.StringType("capacity"): capacity,
    })}


def matches(expression: str, device: Device) -> bool:
    """Whether ``device`` satisfies the selector; SelectorError when it cannot be told.

    The verdict is kept on the device, so each (expression, device) is evaluated once.
    """
    verdict = device.verdicts.get(expression)
    if verdict is None:
        verdict = device.verdicts[expression] = _evaluate(expression, device)
    if isinstance(verdict, str):
        raise SelectorError(verdict)
    return verdict


def _evaluate(expression: str, device: Device) -> bool | str:
    program = compile_selector(expression)
    try:
        result = program.evaluate(_activation(device))
    except Exception as error:  # a CEL runtime error is a verdict, not a crash
        return f"CEL selector {expression!r} on device {device.id}: {_first_line(error)}"
    if isinstance(result, Exception):
        return f"CEL selector {expression!r} on device {device.id}: {_first_line(result)}"
    if not isinstance(result, celtypes.BoolType | bool):
        return (f"CEL selector {expression!r} on device {device.id} yields "
                f"{type(result).__name__}, not a bool")
    return bool(result)


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0][:300]
