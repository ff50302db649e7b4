"""DRA's CEL selectors, evaluated over a device as Kubernetes evaluates them.

The one module that evaluates a DeviceClass's or a request's selector. Each expression
is compiled once (:func:`compile_selector` keeps a bounded cache), and each device keeps
its verdict per expression (``Device.verdicts``), so a selector costs one evaluation per
device however many pods ask. :func:`compile_selector` lists what a selector sees.

A selector that does not compile, fails at run time (a missing attribute) or does not
yield a bool is a :class:`SelectorError` whose message names the expression and what
went wrong: the allocator turns it into the pod's reason, never into a crash. The
library is Google's ``cel-expr-python`` (the C++ CEL runtime), the fastest of those
measured; docs/dra.md has the figures.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any, Final

from cel_expr_python import cel

from fluence_core.dra.devices import Device, Version
from fluence_core.quantity import QuantityError, parse_quantity

CACHE_SIZE: Final = 4096
"""Compiled expressions kept (DeviceClasses and requests rarely hold more)."""

_DOMAIN: Final = re.compile(r"""device\s*\.\s*(?:attributes|capacity)\s*\[\s*(["'])(.*?)\1""")


class SelectorError(ValueError):
    """A selector that cannot be compiled or evaluated; the message is the reason."""


def _quantity(text: str) -> float:
    try:
        return float(parse_quantity(text))
    except QuantityError as error:
        raise ValueError(str(error)) from None


def _semver(text: str) -> str:
    if not re.fullmatch(r"v?\d+(\.\d+){0,2}([-+][0-9A-Za-z.+-]*)?", text):
        raise ValueError(f"{text!r} is not a semantic version")
    return text


def _order(a: Any, b: Any) -> int:
    if isinstance(a, str):
        left: Any = Version(a).key()
        right: Any = Version(b).key()
    else:
        left, right = a, b
    return int(left > right) - int(left < right)


def _as_integer(value: float) -> int:
    if not float(value).is_integer():
        raise ValueError(f"{value} is not an integer")
    return int(value)


def _overloads(name: str, result: cel.Type, impl: Callable[..., Any]) -> cel.FunctionDecl:
    """A method on quantities (doubles) and on versions (strings)."""
    return cel.FunctionDecl(name, [
        cel.Overload(f"{name}_quantity", result, [cel.Type.DOUBLE, cel.Type.DOUBLE],
                     is_member=True, impl=impl),
        cel.Overload(f"{name}_version", result, [cel.Type.STRING, cel.Type.STRING],
                     is_member=True, impl=impl),
    ])


def _unary(name: str, result: cel.Type, impl: Callable[..., Any]) -> cel.FunctionDecl:
    return cel.FunctionDecl(name, [cel.Overload(f"{name}_quantity", result, [cel.Type.DOUBLE],
                                                is_member=True, impl=impl)])


_FUNCTIONS: Final = [
    cel.FunctionDecl("quantity", [cel.Overload("quantity_string", cel.Type.DOUBLE,
                                               [cel.Type.STRING], impl=_quantity)]),
    cel.FunctionDecl("semver", [cel.Overload("semver_string", cel.Type.STRING,
                                             [cel.Type.STRING], impl=_semver)]),
    _overloads("compareTo", cel.Type.INT, _order),
    _overloads("isGreaterThan", cel.Type.BOOL, lambda a, b: _order(a, b) > 0),
    _overloads("isLessThan", cel.Type.BOOL, lambda a, b: _order(a, b) < 0),
    _unary("asInteger", cel.Type.INT, _as_integer),
    _unary("asApproximateFloat", cel.Type.DOUBLE, float),
    _unary("isInteger", cel.Type.BOOL, lambda v: float(v).is_integer()),
    _unary("sign", cel.Type.INT, lambda v: int(v > 0) - int(v < 0)),
]

_ENVIRONMENT: Final = cel.NewEnv(variables={"device": cel.Type.DYN}, functions=_FUNCTIONS)


class Selector:
    """One compiled expression, and the attribute domains it names."""

    def __init__(self, expression: str) -> None:
        self.expression = expression
        try:
            self.program = _ENVIRONMENT.compile(expression)
        except Exception as error:  # the runtime raises RuntimeError with its parser's report
            raise SelectorError(f"CEL selector {shown(expression)} does not compile: "
                                f"{_first_line(error)}") from None
        self.domains = frozenset(m.group(2) for m in _DOMAIN.finditer(expression))


@lru_cache(maxsize=CACHE_SIZE)
def compile_selector(expression: str) -> Selector:
    """The compiled ``expression`` (cached); SelectorError if it does not compile.

    A selector sees one variable, ``device``, with Kubernetes' fields:

    * ``device.driver``: the driver's name;
    * ``device.attributes["<domain>"].<name>``: bool, int, string, or a version
      (a string here; compare with ``semver("1.2.3")`` and ``.isGreaterThan``,
      ``.isLessThan``, ``.compareTo``, which order versions by their numbers); a
      domain the device has no attribute of reads as an empty map, so
      ``"x" in device.attributes["d"]`` is false rather than an error;
    * ``device.capacity["<domain>"].<name>``: a quantity (``quantity("16Gi")``,
      ``.compareTo``, ``.isGreaterThan``, ``.isLessThan``, ``.asInteger()``,
      ``.asApproximateFloat()``, ``.isInteger()``, ``.sign()``). Quantities are
      held as doubles: exact for whole numbers up to 2^53 (8 PiB of bytes).
    """
    return Selector(expression)


def _plain(value: Any) -> Any:
    return value.text if isinstance(value, Version) else value


def device_data(device: Device) -> dict[str, Any]:
    """``device`` as the selector sees it (built once per device)."""
    data = device.selector_view
    if not data:
        data.update({
            "driver": device.id.driver,
            "attributes": {domain: {k: _plain(v) for k, v in values.items()}
                           for domain, values in device.attributes.items()},
            "capacity": {domain: {k: float(v) for k, v in values.items()}
                         for domain, values in device.capacity.items()},
        })
    return data


def matches(expression: str, device: Device) -> bool:
    """Whether ``device`` satisfies the selector; SelectorError when it cannot be told.

    The verdict is kept on the device, so each (expression, device) is evaluated once.
    """
    verdict = device.verdicts.get(expression)
    if verdict is None:
        verdict = device.verdicts[expression] = _evaluate(compile_selector(expression), device)
    if isinstance(verdict, str):
        raise SelectorError(verdict)
    return bool(verdict)


def _evaluate(selector: Selector, device: Device) -> bool | str:
    data = device_data(device)
    missing = [d for d in selector.domains
               if d not in data["attributes"] or d not in data["capacity"]]
    if missing:  # a domain the device has nothing of is an empty map, as in Kubernetes
        data = {"driver": data["driver"],
                "attributes": {**{d: {} for d in missing}, **data["attributes"]},
                "capacity": {**{d: {} for d in missing}, **data["capacity"]}}
    where = f"CEL selector {shown(selector.expression)} on device {device.id}"
    try:
        result = selector.program.eval(data={"device": data})
        value = result.value()
        kind = result.type()
    except Exception as error:  # an implementation raising is a verdict too, never a crash
        return f"{where}: {_first_line(error)}"
    if kind == cel.Type.ERROR:
        return f"{where}: {_first_line(value)}"
    if kind != cel.Type.BOOL:
        return f"{where} yields {kind.name().lower()}, not a bool"
    return bool(value)


SHOWN: Final = 120
"""Characters of an expression a reason quotes: enough to find it, and a selector of
100,000 characters does not become a pod condition of that size."""


def shown(expression: str) -> str:
    """``expression`` quoted for a reason, cut to :data:`SHOWN` characters."""
    if len(expression) <= SHOWN:
        return repr(expression)
    return f"{expression[:SHOWN]!r}... ({len(expression)} characters)"


def _first_line(error: object) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0][:300]

