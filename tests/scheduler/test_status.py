"""``fluence status``'s view, rebuilt read-only from what the cluster records."""

from __future__ import annotations

from typing import Callable

from fluence_core.cluster_api import PODS
from fluence_core.scheduler.core import Scheduler
from fluence_core.scheduler.status import collect_status
from fluence_core.settings import load_settings
from tests.scheduler.conftest import Harness, node, pod, pod_group

QPU = """
resources:
  - type: qdevice
    name: cepheus
    with: [{type: qpu}]
"""


def test_status_shows_use_holders_and_why_groups_wait(
    harness_factory: Callable[..., Harness],
) -> None:
    theirs = pod("theirs", "1", scheduler="default-scheduler", node_name="n1")
    quantum = pod("q", "1", requests={"fluxion.flux-framework.org/qpu": "1"})
    members = [pod(f"g{i}", "2", group="g") for i in range(2)]
    h = harness_factory(
        node("n0"),
        node("n1"),
        theirs,
        quantum,
        pod_group("g", 2),
        *members,
        pod_group("big", 3),
        pod("big-0", group="big"),
        pod("huge", "64"),
        resources=QPU,
    )
    h.cycle()
    before = h.cluster.resource_version
    viewer = Scheduler(h.cluster, load_settings(), config=h.config, read_only=True)
    viewer.start()
    report = collect_status(viewer)
    assert h.cluster.resource_version == before, "status writes nothing"
    uses = {n.name: n for n in report.nodes}
    assert uses["n0"].fluence_cores + uses["n1"].fluence_cores == 5
    assert uses["n1"].other_cores == 1
    assert report.virtual == [("/cluster0/cepheus0", "qdevice", "default/q")]
    owners = {h_.owner: h_ for h_ in report.held}
    assert owners["podgroups/default/g"].pods == ["g0", "g1"]
    why = {p.group: p.why for p in report.pending}
    assert "1 of 3 members ready" in why["default/big"]
    assert why["default/huge"] == "0/2 nodes are available: 2 Insufficient cpu."
    assert h.cluster.get(PODS, "huge", "default")["spec"].get("nodeName") is None
