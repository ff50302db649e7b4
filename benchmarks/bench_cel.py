"""How fast each CEL library for Python evaluates a DRA selector over devices.

The question behind :mod:`fluence_core.dra.cel`'s choice: a selector is compiled
once and evaluated once per device, with a ``device`` variable built for that
device. This measures both for every library importable here, on the same
expression and the same synthetic devices, and prints a table::

    python benchmarks/bench_cel.py [--devices 2000]

Libraries that are not installed are reported as such, not failed:
``cel-python`` (``celpy``, pure Python), ``cel-expr-python`` (Google's C++
runtime, ``cel_expr_python``: what Fluence uses) and ``common-expression-language``
(Rust, ``cel``).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

EXPRESSION = ('device.driver == "gpu.example.com" && '
              'device.attributes["gpu.example.com"].model == "a100" && '
              'device.attributes["gpu.example.com"].numa >= 1')


def devices(count: int) -> list[dict[str, Any]]:
    """``count`` devices as plain data, alike but for their attributes."""
    return [{"driver": "gpu.example.com",
             "attributes": {"gpu.example.com": {"model": "a100" if i % 2 else "t4",
                                                "numa": i % 4}},
             "capacity": {}} for i in range(count)]


def with_celpy() -> tuple[Callable[[], Any], Callable[[Any, dict[str, Any]], bool]]:
    import celpy

    env = celpy.Environment()

    def compile_() -> Any:
        return env.program(env.compile(EXPRESSION))

    def run(program: Any, device: dict[str, Any]) -> bool:
        return bool(program.evaluate({"device": celpy.json_to_cel(device)}))
    return compile_, run


def with_google() -> tuple[Callable[[], Any], Callable[[Any, dict[str, Any]], bool]]:
    from cel_expr_python import cel

    env = cel.NewEnv(variables={"device": cel.Type.DYN})

    def compile_() -> Any:
        return env.compile(EXPRESSION)

    def run(program: Any, device: dict[str, Any]) -> bool:
        return bool(program.eval(data={"device": device}).value())
    return compile_, run


def with_rust() -> tuple[Callable[[], Any], Callable[[Any, dict[str, Any]], bool]]:
    import cel

    def compile_() -> Any:
        return cel.compile(EXPRESSION)

    def run(program: Any, device: dict[str, Any]) -> bool:
        return bool(program.execute({"device": device}))
    return compile_, run


LIBRARIES = {"cel-python": with_celpy, "cel-expr-python": with_google,
             "common-expression-language": with_rust}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=2000)
    args = parser.parse_args()
    population = devices(args.devices)
    print(f"{'library':28} {'compile (ms)':>13} {'per device (us)':>16} {'matched':>8}")
    for name, make in LIBRARIES.items():
        try:
            compile_, run = make()
        except ImportError:
            print(f"{name:28} not installed")
            continue
        start = time.perf_counter()
        program = compile_()
        compiled = time.perf_counter() - start
        start = time.perf_counter()
        matched = sum(run(program, d) for d in population)
        each = (time.perf_counter() - start) / len(population)
        print(f"{name:28} {compiled * 1e3:13.2f} {each * 1e6:16.1f} {matched:8d}")


if __name__ == "__main__":
    main()
