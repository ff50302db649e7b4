"""The one list of built-in filters, and the entry points pyproject.toml declares for it."""

from __future__ import annotations

import tomllib
from pathlib import Path

from fluence_core import names
from fluence_core.feasibility import default_filters
from fluence_core.feasibility.builtins import (
    BUILTIN_FILTERS, ENTRY_POINT_PREFIX, KUBE_ORDER, entry_point_name,
)
from fluence_core.feasibility.run import in_kube_order

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _declared_filters() -> list[tuple[str, str]]:
    """(entry-point name, module) of every ``filter-*`` entry point, in the file's order."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    group = project["entry-points"][names.ENTRY_POINT_GROUP]
    return [(name, module) for name, module in group.items()
            if name.startswith(ENTRY_POINT_PREFIX)]


def test_pyprojects_filter_entry_points_are_the_builtins_in_their_order() -> None:
    expected = [(entry_point_name(f), f.__module__) for f in BUILTIN_FILTERS]
    assert _declared_filters() == expected, (
        "pyproject.toml's filter-* entry points and feasibility/builtins.py drifted apart")


def test_each_builtins_module_contributes_its_filter_through_the_hook() -> None:
    import importlib

    from fluence_core.settings import Settings

    for builtin in BUILTIN_FILTERS:
        module = importlib.import_module(builtin.__module__)
        contributed = module.fluence_feasibility_filters(settings=Settings())
        assert [type(f) for f in contributed] == [builtin], builtin.__module__


def test_the_default_filters_are_every_builtin_in_the_lists_order() -> None:
    assert tuple(f.name for f in default_filters()) == KUBE_ORDER
    assert len(set(KUBE_ORDER)) == len(KUBE_ORDER) == len(BUILTIN_FILTERS)


def test_any_set_of_filters_runs_in_the_lists_order_then_the_others() -> None:
    class Mine:
        name = "Mine"
        reads_pods = False

        def prepare(self, pod: object, snapshot: object) -> None:
            return None

    mine = Mine()
    shuffled = [mine, *reversed(default_filters())]
    assert [f.name for f in in_kube_order(shuffled)] == [*KUBE_ORDER, "Mine"]
