"""Fluence against kube-scheduler v1.36 where a soft preference decides the node.

Each generated case (:mod:`preference_cases`) is built so that kube-scheduler's
choice is fixed by one preference (preferred node affinity, a PreferNoSchedule
taint, ScheduleAnyway spread, preferred pod affinity or anti-affinity, or two of
them weighed against each other by kube-scheduler's weights) up to ties
between equally preferred nodes: the case names that class. The pod is placed
once by kube-scheduler and once by Fluence on the same API server; both must bind
to a node of the class. Fluence's choice within the class is its matcher's
policy. The table is printed (``-s`` shows it).

``FLUENCE_PREF_CASES`` sets the number of cases (default 35, five of each kind).
Skipped without ``KUBEBUILDER_ASSETS`` or without kube-scheduler.
"""

from __future__ import annotations

import os
import time
from collections import Counter

import pytest

from fluence_core.testing_apiserver import ApiServer, ensure_namespace
from tests.e2e.preference_cases import generate
from tests.e2e.test_fidelity_differential_e2e import (
    NAMESPACE, _place_with_fluence, _place_with_kube, _set_up, _tear_down, control_plane,
)

pytestmark = pytest.mark.e2e

CASES = int(os.environ.get("FLUENCE_PREF_CASES", "35"))

__all__ = ["control_plane"]  # the module-scoped API server with kube-scheduler beside it


def test_fluence_picks_a_node_of_kube_schedulers_preference_class(
        control_plane: ApiServer) -> None:
    kube = control_plane.cluster(qps=1000, burst=1000)
    ensure_namespace(kube, NAMESPACE)
    table: Counter[tuple[str, str]] = Counter()
    wrong = []
    for case in generate(CASES):
        _set_up(kube, case)
        time.sleep(0.2)
        try:
            kube_node, kube_why = _place_with_kube(kube, case.pod, f"p{case.index}-k")
            fluence_node, fluence_why = _place_with_fluence(kube, case.pod, f"p{case.index}-f")
        finally:
            _tear_down(kube, case)
        kube_in = kube_node in case.preferred
        fluence_in = fluence_node in case.preferred
        table[(case.kind, "kube in class" if kube_in else "KUBE OUTSIDE")] += 1
        table[(case.kind, "fluence in class" if fluence_in else "FLUENCE OUTSIDE")] += 1
        if not (kube_in and fluence_in):
            wrong.append(f"case {case.index} ({case.kind}): class {sorted(case.preferred)}; "
                         f"kube {kube_node or kube_why}; fluence {fluence_node or fluence_why}")
    print(f"\npreference classes over {CASES} cases (kube-scheduler v1.36 vs fluence):")
    for (kind, verdict), count in sorted(table.items()):
        print(f"  {count:3d}  {kind:20} {verdict}")
    for line in wrong:
        print("  DIFFER " + line)
    assert not wrong, "\n".join(wrong)
