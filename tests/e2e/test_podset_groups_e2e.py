"""Groups of PodSets on a real kube-apiserver: a JobSet's leader gang and worker gang that
name one ``podset-group-name`` share one rack, and a group no rack can hold places none of
its gangs; gangs of one group stating different levels wait, saying so (skipped without
KUBEBUILDER_ASSETS)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fluence_core import names
from fluence_core.kube.client import KubeCluster
from fluence_core.settings import load_settings
from fluence_core.testing import make_pod_dict, make_pod_group_dict
from tests.e2e.test_slices_e2e import BLOCK_LABEL, Blocks
from tests.e2e.test_scheduler_e2e import running

pytestmark = pytest.mark.e2e

STATED = {names.KUEUE_REQUIRED_TOPOLOGY_ANNOTATION: names.RACK_LABEL,
          names.KUEUE_PODSET_GROUP_ANNOTATION: "lw"}


@pytest.fixture
def racks(kube: KubeCluster, kube_namespace: str) -> Iterator[Blocks]:
    with running(Blocks(kube, kube_namespace)) as harness:
        yield harness


def _jobset(racks: Blocks, gangs: dict[str, int],
            stated: dict[str, dict[str, str]] | None = None) -> None:
    """The PodGroups the webhook's controller makes for a JobSet's Jobs (the topology the
    Jobs state, and the JobSet they belong to), all made before any pod, as the Jobs are;
    then each Job's pods of 4 cores."""
    said = {name: (stated or {}).get(name, STATED) for name in gangs}
    for name, size in gangs.items():
        racks.kube.create("podgroups", make_pod_group_dict(
            name, size, racks.ns, annotations={
                **said[name], names.PODSET_GROUP_WORKLOAD_ANNOTATION: "JobSet/js"}), racks.ns)
    for name, size in gangs.items():
        for i in range(size):
            racks.kube.create("pods", make_pod_dict(
                f"{name}-{i}", "4", annotations=said[name], namespace=racks.ns, group=name,
                nodeSelector={"e2e-ns": racks.ns}), racks.ns)


def _racks(racks: Blocks, *sizes: int) -> None:
    for r, size in enumerate(sizes):
        for i in range(size):
            racks.labelled(f"r{r}-{i}", **{names.RACK_LABEL: f"r{r}"})
    racks.start_scheduler(load_settings(topology_levels=[names.RACK_LABEL]))


def test_a_leader_and_its_workers_share_the_rack_that_holds_them_all(racks: Blocks) -> None:
    _racks(racks, 1, 4)  # alone, the leader's best fit is the rack of one node
    _jobset(racks, {"leader": 1, "workers": 3})
    pods = ["leader-0", *(f"workers-{i}" for i in range(3))]
    racks.wait(lambda: all(racks.node_of(p) for p in pods), "the group bound")
    assert {racks.label_of(p, names.RACK_LABEL) for p in pods} == {f"{racks.ns}-r1"}


def test_a_group_no_rack_can_hold_places_none_of_its_gangs(racks: Blocks) -> None:
    _racks(racks, 2, 3)  # the leader fits either rack, the workers the second: not both
    _jobset(racks, {"leader": 1, "workers": 3})
    racks.wait(lambda: "group of PodSets lw" in racks.why("leader-0")
               and "group of PodSets lw" in racks.why("workers-0"),
               "both gangs' FailedScheduling events naming the group")
    assert not any(racks.node_of(p) for p in ["leader-0", *(f"workers-{i}" for i in range(3))])


def test_gangs_of_one_group_stating_different_levels_wait_saying_so(racks: Blocks) -> None:
    for r in range(2):
        for i in range(2):
            racks.labelled(f"r{r}-{i}", **{BLOCK_LABEL: "x", names.RACK_LABEL: f"r{r}"})
    racks.start_scheduler(load_settings(topology_levels=[BLOCK_LABEL, names.RACK_LABEL]))
    blockwide = {**STATED, names.KUEUE_REQUIRED_TOPOLOGY_ANNOTATION: BLOCK_LABEL}
    _jobset(racks, {"leader": 1, "workers": 2}, {"workers": blockwide})
    racks.wait(lambda: "must state the same topology" in racks.why("workers-0"),
               "the FailedScheduling event naming the disagreement")
    why = racks.why("workers-0")
    assert f"required {names.RACK_LABEL}" in why and f"required {BLOCK_LABEL}" in why, why
    assert not any(racks.node_of(p) for p in ("leader-0", "workers-0", "workers-1"))
