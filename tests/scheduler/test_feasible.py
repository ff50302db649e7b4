"""fluence_core.scheduler.feasible: Kubernetes' filters narrow each pod's nodes before the match."""

from __future__ import annotations

from typing import Any, Callable

from fluence_core.kube.api import EVENTS, NODES, PODS
from fluence_core.feasibility.run import default_filters
from fluence_core.models import Group, PodRequest
from fluence_core.scheduler.core import Scheduler
from fluence_core.scheduler.feasible import FeasibleNodes
from fluence_core.settings import load_settings
from tests.scheduler.conftest import Harness, node, pod, pod_group
from tests.scheduler.parts import cluster_of, started_view

Factory = Callable[..., Harness]
GPU_TAINT = {"key": "gpu", "value": "true", "effect": "NoSchedule"}
HOST_PORT = {"containerPort": 80, "hostPort": 8080}


def _reason(h: Harness, name: str) -> str:
    found = h.cluster.get(PODS, name, "default")
    assert found is not None
    conditions = (found.get("status") or {}).get("conditions") or []
    return next(c["message"] for c in conditions if c["type"] == "PodScheduled")


def test_a_pod_tolerating_a_taint_uses_the_tainted_node(harness_factory: Factory) -> None:
    h = harness_factory(
        node("plain", cpu=1),
        node("gpu", taints=[GPU_TAINT]),
        pod("trainer", "2", tolerations=[{"key": "gpu", "operator": "Exists"}]),
    )
    h.cycle()
    assert h.node_of("trainer") == "gpu"


def test_a_pod_not_tolerating_the_taint_is_told_why_in_kube_schedulers_words(
        harness_factory: Factory) -> None:
    h = harness_factory(*(node(f"gpu{i}", taints=[GPU_TAINT]) for i in range(4)),
                        *(node(f"cpu{i}", cpu=2) for i in range(8)), pod("big", "4"))
    h.cycle()
    assert h.node_of("big") is None
    # cpu is the graph's to count; the taint is the filters'
    assert _reason(h, "big").startswith(
        "0/12 nodes are available: 4 node(s) had untolerated taint {gpu: true}")


def test_required_node_affinity_picks_the_zone(harness_factory: Factory) -> None:
    zone_b = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["b"]}]}]}}}
    h = harness_factory(node("a1", zone="a"),
                        node("b1", zone="b"),
                        pod("p", affinity=zone_b))
    h.cycle()
    assert h.node_of("p") == "b1"


def test_a_pod_tolerating_the_cordon_may_use_a_cordoned_node(harness_factory: Factory) -> None:
    cordon = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
               "effect": "NoSchedule"}]
    h = harness_factory(node("n0", unschedulable=True),
                        pod("daemon", tolerations=cordon), pod("plain"))
    h.cycle()
    assert h.node_of("daemon") == "n0" and h.node_of("plain") is None
    assert _reason(h, "plain") == "0/1 nodes are available: 1 node(s) were unschedulable."


def test_anti_affinity_between_pods_placed_one_after_another(harness_factory: Factory) -> None:
    one_per_node = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname",
         "labelSelector": {"matchLabels": {"app": "db"}}}]}}
    nodes = [node(f"n{i}", hostname=True) for i in range(2)]
    dbs = [pod(f"db{i}", labels={"app": "db"}, affinity=one_per_node) for i in range(3)]
    h = harness_factory(*nodes, *dbs)
    h.cycle()
    placed = [h.node_of(f"db{i}") for i in range(3)]
    assert sorted(n for n in placed if n) == ["n0", "n1"] and placed.count(None) == 1


def test_host_ports_keep_two_pods_apart_within_one_cycle(harness_factory: Factory) -> None:
    h = harness_factory(node("n0"), node("n1"),
                        *(pod(name, ports=[HOST_PORT]) for name in ("w0", "w1", "w2")))
    h.cycle()
    placed = sorted(n or "-" for n in (h.node_of("w0"), h.node_of("w1"), h.node_of("w2")))
    assert placed == ["-", "n0", "n1"]


def test_a_gang_waits_with_the_reason_of_the_member_that_fits_nowhere(
    harness_factory: Factory,
) -> None:
    h = harness_factory(node("n0"), pod_group("g", 2), pod("a", group="g"),
                        pod("b", group="g", nodeSelector={"pool": "gpu"}))
    h.cycle()
    assert h.node_of("a") is None and h.node_of("b") is None
    assert "didn't match Pod's node affinity/selector" in _reason(h, "a")


def test_labels_changing_retry_the_waiting_pod(harness_factory: Factory) -> None:
    h = harness_factory(node("n0"), pod("p", nodeSelector={"pool": "x"}))
    h.cycle()
    assert h.node_of("p") is None
    h.cluster.patch(NODES, "n0", {"metadata": {"labels": {"pool": "x"}}})
    h.cycle()
    assert h.node_of("p") == "n0"


def test_a_filter_plugin_blocked_is_not_asked(harness_factory: Factory) -> None:
    h = harness_factory(node("gpu", taints=[GPU_TAINT]), pod("p"))
    h.scheduler = Scheduler(h.cluster, load_settings(disable_plugins="filter-taint-toleration"),
                            clock=h.clock)
    h.scheduler.start()
    h.cycle()
    assert h.node_of("p") == "gpu"


def test_the_failed_scheduling_event_carries_the_summary(harness_factory: Factory) -> None:
    h = harness_factory(node("n0"), pod("p", nodeName="", nodeSelector={"x": "y"}))
    h.cycle()
    events = [e["message"] for e in h.cluster.list(EVENTS, "default").items]
    assert "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector." in events


def test_a_pod_placed_with_anti_affinity_keeps_later_pods_of_the_same_cycle_away(
        harness_factory: Factory) -> None:
    keep_web_away = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname",
         "labelSelector": {"matchLabels": {"app": "web"}}}]}}
    nodes = [node(f"n{i}", 1 if i == 0 else 4, hostname=True)
             for i in range(3)]
    # placed in name order: a web pod, then the guard, then two more web pods of the same shape
    webs = [pod(name, labels={"app": "web"}) for name in ("a-web", "c-web", "d-web")]
    h = harness_factory(*nodes, webs[0], pod("b-guard", affinity=keep_web_away), *webs[1:])
    h.cycle()
    guard = h.node_of("b-guard")
    assert guard is not None
    assert [h.node_of(n) != guard for n in ("a-web", "c-web", "d-web")] == [True] * 3


def test_pods_of_other_schedulers_subtract_exactly_their_millicores(
    harness_factory: Factory,
) -> None:
    daemons = [
        pod(f"ds{i}", "50m", scheduler="default-scheduler", node_name="n0") for i in range(10)
    ]
    h = harness_factory(node("n0", cpu=1), *daemons, pod("half", "500m"), pod("more", "1m"))
    h.cycle()
    assert h.node_of("half") == "n0" and h.node_of("more") is None


def test_a_thousand_tenth_cpu_pods_bind_on_a_hundred_nodes(harness_factory: Factory) -> None:
    h = harness_factory(*(node(f"n{i}", cpu=8) for i in range(100)),
                        *(pod(f"p{i}", "100m") for i in range(1000)))
    h.cycle()
    assert sum(1 for i in range(1000) if h.node_of(f"p{i}")) == 1000


def _claim(name: str, storage_class: str, volume: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"storageClassName": storage_class, "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}}}
    if volume:
        spec["volumeName"] = volume
    return {"metadata": {"name": name, "namespace": "default"}, "spec": spec}


def _storage(h: Harness, *objects: tuple[Any, dict[str, Any]]) -> None:
    for resource, body in objects:
        namespace = (body["metadata"] or {}).get("namespace")
        h.cluster.create(resource, body, namespace)


def test_a_wait_for_first_consumer_claim_learns_the_node_chosen(harness_factory: Factory) -> None:
    from fluence_core.kube.api import PERSISTENT_VOLUME_CLAIMS, STORAGE_CLASSES

    h = harness_factory(node("n0"), node("n1", taints=[GPU_TAINT]))
    _storage(h, (STORAGE_CLASSES, {"metadata": {"name": "csi"}, "provisioner": "csi.example.com",
                                   "volumeBindingMode": "WaitForFirstConsumer"}),
             (PERSISTENT_VOLUME_CLAIMS, _claim("data", "csi")))
    h.add(pod("p", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]))
    h.cycle()
    assert h.node_of("p") == "n0"
    claim = h.cluster.get(PERSISTENT_VOLUME_CLAIMS, "data", "default")
    assert claim is not None
    assert claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == "n0"


def test_a_claim_bound_to_a_zonal_volume_pins_the_pod(harness_factory: Factory) -> None:
    from fluence_core.kube.api import PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES

    volume = {
        "metadata": {"name": "pv-b"},
        "spec": {
            "storageClassName": "local",
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
                    ]
                }
            },
        },
    }
    h = harness_factory(node("a1", labels={"zone": "a"}), node("b1", labels={"zone": "b"}))
    _storage(h, (PERSISTENT_VOLUMES, volume),
             (PERSISTENT_VOLUME_CLAIMS, _claim("data", "local", volume="pv-b")))
    h.add(pod("p", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]))
    h.cycle()
    assert h.node_of("p") == "b1"


def test_a_missing_claim_is_named_in_the_reason(harness_factory: Factory) -> None:
    h = harness_factory(node("n0"),
                        pod("p", volumes=[{"name": "d",
                                           "persistentVolumeClaim": {"claimName": "gone"}}]))
    h.cycle()
    assert _reason(h, "p") == '0/1 nodes are available: persistentvolumeclaim "gone" not found.'


def test_the_kept_snapshot_reads_again_only_the_pods_that_changed() -> None:
    view = started_view(cluster_of(node("n0", pods="110"), node("n1", pods="110"),
                                   pod("a", node_name="n0", ports=[HOST_PORT]),
                                   pod("b", "1", node_name="n1")))
    feasible_nodes = FeasibleNodes(view, default_filters(), set)
    feasible_nodes.begin()
    before = {p.name: p for p in feasible_nodes.snapshot().pods}
    view.handle("pods", "DELETED", pod("a", node_name="n0", ports=[HOST_PORT]))
    view.handle("pods", "ADDED", pod("c", node_name="n1", ports=[HOST_PORT]))
    feasible_nodes.begin()
    after = feasible_nodes.snapshot()
    assert sorted(p.name for p in after.pods) == ["b", "c"]
    assert next(p for p in after.pods if p.name == "b") is before["b"], "b was not read again"
    assert [p.name for p in after.pods_on("n1")] == ["b", "c"] and after.pods_on("n0") == []
    ported = pod("d", ports=[HOST_PORT])
    asked = feasible_nodes.constrain(Group("g", (PodRequest.from_kube(ported),)), [ported])
    assert not isinstance(asked, str) and asked.pods[0].allowed == frozenset({"n0"})


def test_a_finished_pod_leaves_the_kept_snapshot_and_a_new_node_brings_all_back() -> None:
    view = started_view(cluster_of(node("n0"), pod("a", "1", node_name="n0")))
    feasible_nodes = FeasibleNodes(view, default_filters(), set)
    feasible_nodes.begin()
    assert [p.name for p in feasible_nodes.snapshot().pods] == ["a"]
    done = pod("a", "1", node_name="n0")
    done["status"] = {"phase": "Succeeded"}
    view.handle("pods", "MODIFIED", done)
    feasible_nodes.begin()
    assert feasible_nodes.snapshot().pods == []
    view.handle("pods", "ADDED", pod("b", "1", node_name="n0"))
    view.handle("nodes", "ADDED", node("n1"))
    feasible_nodes.begin()
    fresh = feasible_nodes.snapshot()
    assert [p.name for p in fresh.pods] == ["b"] and len(fresh.nodes) == 2


def test_pods_differing_only_in_their_token_volume_share_one_answer() -> None:
    tokened = [pod(name, "1", volumes=[{"name": f"kube-api-access-{name}", "projected": {}}])
               for name in ("a", "b")]
    view = started_view(cluster_of(node("n0", pods="110"), *tokened))
    asked: list[str] = []

    class Counting:
        name, reads_pods = "Counting", False

        def prepare(self, facts: Any, snapshot: Any) -> Callable[[Any], tuple[str, ...]]:
            asked.append(facts.name)
            return lambda node_facts: ()

    feasible_nodes = FeasibleNodes(view, [Counting()], set)
    feasible_nodes.begin()
    for name in ("a", "b"):
        one = view.pods[("default", name)]
        assert not isinstance(feasible_nodes.constrain(
            Group(name, (PodRequest.from_kube(one),)), [one]), str)
    assert asked == ["a"]
