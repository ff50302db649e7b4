"""A node that shrinks (or goes) under held pods: the pods stay accounted, and no false ERROR.

Issue 32: a node shrink logged ``ERROR ... cannot re-hold jobid``, and the job was then held
nowhere, so its running pods were invisible to the next match. A held core numbered past the
node's new size cannot be held again where it was; that is what a shrink means, not an
error. The pods are held from what they request on the node as it is now (what it has left,
when it is overcommitted), with a warning saying which node shrank.
"""

from __future__ import annotations

import logging
from typing import Callable

import pytest

from fluence_core.kube.api import NODES
from fluence_core.scheduler.restart.fallback import HELD_FROM_POD
from tests.scheduler.conftest import Harness, node, pod, pod_group

pytestmark = pytest.mark.usefixtures("clean_env")

Factory = Callable[..., Harness]


def _shrink(h: Harness, name: str, cpu: int) -> None:
    h.cluster.patch_status(NODES, name, {"status": {"allocatable": {"cpu": str(cpu)}}})


def _held_cores(h: Harness, name: str = "n0") -> int:
    return sum(len(share.cores) for a in h.scheduler.matcher.allocations().values()
               for share in a.nodes if share.node == name)


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    """ERRORs about held jobs (the false ``cannot re-hold`` / ``cannot restore`` lines); an
    unrelated error, such as a plugin that fails to load, is another test's business."""
    return [r.getMessage() for r in caplog.records
            if r.levelno >= logging.ERROR and "jobid" in r.getMessage()]


def test_a_node_that_shrinks_under_lone_pods_keeps_it_full_and_logs_no_error(
    harness_factory: Factory, caplog: pytest.LogCaptureFixture,
) -> None:
    h = harness_factory(node("n0", 8), *(pod(f"p{i}", "2") for i in range(4)))
    h.cycle()
    with caplog.at_level(logging.WARNING, logger="fluence"):
        _shrink(h, "n0", 4)
        h.cycle()
    assert _errors(caplog) == []
    assert "node n0 shrank: jobid" in caplog.text
    assert "node n0 has 4 cores now" in caplog.text
    assert _held_cores(h) == 4, "the node is overcommitted: every core it has is held"
    h.add(pod("late", "1"))
    h.cycle()
    assert h.node_of("late") is None


def test_a_node_that_shrinks_under_a_gang_keeps_its_members_held(
    harness_factory: Factory, caplog: pytest.LogCaptureFixture,
) -> None:
    h = harness_factory(node("n0", 8), pod_group("g", 4),
                        *(pod(f"g{i}", "2", group="g") for i in range(4)))
    h.cycle()
    assert all(h.node_of(f"g{i}") == "n0" for i in range(4))
    with caplog.at_level(logging.WARNING, logger="fluence"):
        _shrink(h, "n0", 4)
        h.cycle()
    assert _errors(caplog) == []
    assert _held_cores(h) == 4
    h.add(pod("late", "1"))
    h.cycle()
    assert h.node_of("late") is None, "the gang's running pods still fill the node"
    assert all(h.node_of(f"g{i}") == "n0" for i in range(4)), "no member is touched"
    events = h.cluster.events(reason=HELD_FROM_POD, involved_name="g0")
    assert events and "node n0 has 4 cores now" in events[0]["message"]


def test_a_shrink_that_still_fits_holds_the_pod_on_other_cores(
    harness_factory: Factory, caplog: pytest.LogCaptureFixture,
) -> None:
    h = harness_factory(node("n0", 8), *(pod(f"p{i}", "2") for i in range(4)))
    h.cycle()
    h.finish("p0")
    h.finish("p1")
    h.cycle()  # cores 0-3 free, p2 and p3 hold 4-7
    with caplog.at_level(logging.WARNING, logger="fluence"):
        _shrink(h, "n0", 6)
        h.cycle()
    assert _errors(caplog) == []
    assert "no room left" not in caplog.text
    assert _held_cores(h) == 4, "p2 and p3 still hold two cores each"
    h.add(pod("fits", "2"))
    h.cycle()
    assert h.node_of("fits") == "n0"
    h.add(pod("does-not", "1"))
    h.cycle()
    assert h.node_of("does-not") is None


def test_a_restart_after_a_node_shrank_holds_the_gang_from_its_pods_without_an_error(
    harness_factory: Factory, caplog: pytest.LogCaptureFixture,
) -> None:
    h = harness_factory(node("n0", 8), pod_group("g", 4),
                        *(pod(f"g{i}", "2", group="g") for i in range(4)))
    h.cycle()
    _shrink(h, "n0", 4)
    with caplog.at_level(logging.WARNING, logger="fluence"):
        h.restart()
    assert _errors(caplog) == []
    assert ("the record of podgroups/default/g (jobids [1]) cannot be held where it says: "
            "node n0 has 4 cores now") in caplog.text
    assert _held_cores(h) == 4
    h.add(pod("late", "1"))
    h.cycle()
    assert h.node_of("late") is None


def test_a_restart_after_a_node_went_holds_the_members_left_without_an_error(
    harness_factory: Factory, caplog: pytest.LogCaptureFixture,
) -> None:
    h = harness_factory(node("n0", 4), node("n1", 4), pod_group("g", 4),
                        *(pod(f"g{i}", "2", group="g") for i in range(4)))
    h.cycle()
    h.cluster.delete(NODES, "n1")
    with caplog.at_level(logging.WARNING, logger="fluence"):
        h.restart()
    assert _errors(caplog) == []
    assert "cannot be held where it says: node n1 is gone" in caplog.text
    assert _held_cores(h, "n0") == 4, "the members on n0 are held there"
