"""Slices and keys outside the hierarchy on a real kube-apiserver: a gang cut into Kueue's
slices keeps each slice inside one rack of its block; a gang whose size is no multiple of
its slice size waits, saying so; a PodGroup's topology key that is no configured level is
honoured as kube-scheduler honours it; a Job's slice annotations reach the PodGroup the
webhook makes (skipped without KUBEBUILDER_ASSETS)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from fluence_core import names
from fluence_core.kube.client import KubeCluster
from fluence_core.settings import load_settings
from fluence_core.testing import make_pod_dict, make_pod_group_dict
from fluence_core.testing_apiserver import wait_for, webhook_beside
from tests.e2e.test_scheduler_e2e import Run, running

pytestmark = pytest.mark.e2e

BLOCK_LABEL = "example.com/block"
ISLAND_LABEL = "example.com/island"


class Blocks(Run):
    """The scheduler's run helper, with nodes labelled by block and rack (or any label)."""

    def labelled(self, suffix: str, **labels: str) -> str:
        name = self.node(suffix)
        self.kube.patch("nodes", name, {"metadata": {"labels": {
            key: f"{self.ns}-{value}" for key, value in labels.items()}}})
        return name

    def annotated_gang(self, name: str, size: int, cpu: str, annotations: dict[str, str],
                       constraints: dict[str, object] | None = None) -> None:
        group = make_pod_group_dict(name, size, self.ns)
        if constraints:
            group["spec"]["schedulingConstraints"] = constraints
        self.kube.create("podgroups", group, self.ns)
        for i in range(size):
            self.kube.create("pods", make_pod_dict(
                f"{name}-{i}", cpu, annotations=annotations, namespace=self.ns, group=name,
                nodeSelector={"e2e-ns": self.ns}), self.ns)

    def label_of(self, pod: str, key: str) -> str | None:
        node = self.node_of(pod)
        found = self.kube.get("nodes", node) if node else None
        return None if found is None else found["metadata"]["labels"].get(key)

    def why(self, pod: str) -> str:
        return " | ".join(e["message"] for e in self.events(pod, "FailedScheduling"))


@pytest.fixture
def blocks(kube: KubeCluster, kube_namespace: str) -> Iterator[Blocks]:
    with running(Blocks(kube, kube_namespace)) as harness:
        yield harness


def sliced(size: int) -> dict[str, str]:
    return {names.KUEUE_REQUIRED_TOPOLOGY_ANNOTATION: BLOCK_LABEL,
            names.KUEUE_SLICE_REQUIRED_TOPOLOGY_ANNOTATION: names.RACK_LABEL,
            names.KUEUE_SLICE_SIZE_ANNOTATION: str(size)}


def start_with_block_and_rack(blocks: Blocks) -> None:
    blocks.start_scheduler(load_settings(topology_levels=[BLOCK_LABEL, names.RACK_LABEL]))


def test_slices_of_two_fill_racks_of_three_and_two_free_nodes_two_and_two(
        blocks: Blocks) -> None:
    for i in range(3):
        blocks.labelled(f"a{i}", **{BLOCK_LABEL: "x", names.RACK_LABEL: "r3"})
    for i in range(2):
        blocks.labelled(f"b{i}", **{BLOCK_LABEL: "x", names.RACK_LABEL: "r2"})
    start_with_block_and_rack(blocks)
    blocks.annotated_gang("g", 4, "4", sliced(2))
    blocks.wait(lambda: all(blocks.node_of(f"g-{i}") for i in range(4)), "the gang bound")
    racks = [blocks.label_of(f"g-{i}", names.RACK_LABEL) for i in range(4)]
    assert Counter(racks) == {f"{blocks.ns}-r3": 2, f"{blocks.ns}-r2": 2}, racks
    assert racks[0] == racks[1] and racks[2] == racks[3], "each slice of 2 inside one rack"


def test_a_gang_that_is_no_multiple_of_its_slice_size_waits_saying_so(blocks: Blocks) -> None:
    for i in range(4):
        blocks.labelled(f"a{i}", **{BLOCK_LABEL: "x", names.RACK_LABEL: "r"})
    start_with_block_and_rack(blocks)
    blocks.annotated_gang("g", 3, "1", sliced(2))
    blocks.wait(lambda: "not a multiple of its slice size 2" in blocks.why("g-0"),
                "the slice size's FailedScheduling event")
    assert "the group has 3 pods" in blocks.why("g-0")
    assert not any(blocks.node_of(f"g-{i}") for i in range(3))


def test_a_pod_group_key_that_is_no_configured_level_holds_the_gang_in_one_domain(
        blocks: Blocks) -> None:
    for i in range(2):
        blocks.labelled(f"s{i}", **{ISLAND_LABEL: "small"})
    for i in range(3):
        blocks.labelled(f"m{i}", **{ISLAND_LABEL: "middle"})
    for i in range(4):
        blocks.labelled(f"l{i}", **{ISLAND_LABEL: "large"})
    blocks.start_scheduler(load_settings())  # no topology levels configured
    blocks.annotated_gang("g", 3, "4", {}, {"topology": [{"key": ISLAND_LABEL}]})
    blocks.wait(lambda: all(blocks.node_of(f"g-{i}") for i in range(3)), "the gang bound")
    assert {blocks.label_of(f"g-{i}", ISLAND_LABEL) for i in range(3)} == {
        f"{blocks.ns}-middle"}, "inside one island, the smallest that holds it"
    blocks.annotated_gang("h", 5, "4", {}, {"topology": [{"key": ISLAND_LABEL}]})
    blocks.wait(lambda: f"must stay inside one domain of node label ({ISLAND_LABEL})"
                in blocks.why("h-0"), "the island's FailedScheduling event")
    assert not any(blocks.node_of(f"h-{i}") for i in range(5)), "6 nodes free, 4 in one island"


def test_a_jobs_slice_annotations_reach_the_pod_group_the_webhook_makes(
        kube: KubeCluster, kube_namespace: str, tmp_path: Path) -> None:
    ns = kube_namespace
    settings = load_settings(webhook_config=f"fluence-slices-{ns}")
    try:
        with webhook_beside(kube, settings, tmp_path / "tls", namespace=ns,
                            resources=("pods", "jobs")):
            kube.create("jobs", {"metadata": {"name": "train"}, "spec": {
                "completionMode": "Indexed", "completions": 4, "parallelism": 4,
                "suspend": True,
                "template": {"metadata": {"labels": {names.GROUP_LABEL: "train"},
                                          "annotations": sliced(2)},
                             "spec": {"schedulerName": names.SCHEDULER_NAME,
                                      "restartPolicy": "Never",
                                      "containers": [{"name": "c", "image": "busybox"}]}}}},
                ns)
            group = wait_for(lambda: kube.get("podgroups", "train", ns),
                             "the Job's PodGroup, made by the webhook's controller")
        carried = group["metadata"].get("annotations") or {}
        assert {k: carried.get(k) for k in sliced(2)} == sliced(2)
        assert group["spec"]["schedulingConstraints"] == {"topology": [{"key": BLOCK_LABEL}]}
    finally:
        kube.delete("jobs", "train", ns)
