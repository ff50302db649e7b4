"""feasible(): kube-scheduler's order, first refusal per node, and its summary wording."""

from __future__ import annotations

from fluence_core.feasibility import default_filters, feasible
from fluence_core.feasibility.node_affinity import NodeAffinity
from fluence_core.feasibility.objects import NodeFacts
from tests.feasibility.kube_objects import facts, node, pod, snapshot

GPU_TAINT = {"key": "gpu", "value": "true", "effect": "NoSchedule"}


def _cluster() -> list[dict[str, object]]:
    tainted = [node(f"gpu{i}", taints=[GPU_TAINT]) for i in range(4)]
    small = [node(f"cpu{i}", cpu="2") for i in range(8)]
    return tainted + small


def test_summary_reads_as_kube_schedulers() -> None:
    result = feasible(facts(pod("p", cpu="4")), snapshot(_cluster()))
    assert result.nodes == []
    assert result.summary() == (
        "0/12 nodes are available: 4 node(s) had untolerated taint {gpu: true}, 8 Insufficient cpu."
    )


def test_a_node_is_refused_by_the_first_filter_only() -> None:
    # gpu nodes are also too small: only the taint is reported, as kube-scheduler stops there
    cluster = [node(f"gpu{i}", cpu="2", taints=[GPU_TAINT]) for i in range(2)]
    result = feasible(facts(pod("p", cpu="4")), snapshot(cluster))
    assert result.refused == {
        f"gpu{i}": ("node(s) had untolerated taint {gpu: true}",) for i in range(2)
    }


def test_tolerating_pod_uses_the_tainted_nodes() -> None:
    tolerating = pod("p", cpu="4", tolerations=[{"key": "gpu", "operator": "Exists"}])
    result = feasible(facts(tolerating), snapshot(_cluster()))
    assert result.nodes == ["gpu0", "gpu1", "gpu2", "gpu3"]


def test_several_reasons_of_one_node_are_all_counted() -> None:
    result = feasible(facts(pod("p", cpu="4", memory="64Gi")), snapshot([node("n", cpu="2")]))
    assert result.summary() == "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory."


def test_a_prefilter_refusal_is_the_whole_message() -> None:
    claimed = pod("p", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "d"}}])
    result = feasible(facts(claimed), snapshot(_cluster()))
    assert result.summary() == '0/12 nodes are available: persistentvolumeclaim "d" not found.'


def test_a_filter_left_out_is_not_asked() -> None:
    pinned = pod("p", nodeSelector={"zone": "x"})
    everything = feasible(facts(pinned), snapshot([node("n")]))
    assert everything.nodes == []
    without = [f for f in default_filters() if not isinstance(f, NodeAffinity)]
    assert feasible(facts(pinned), snapshot([node("n")]), without).nodes == ["n"]


def test_only_the_given_nodes_are_judged() -> None:
    snap = snapshot(_cluster())
    subset = [n for n in snap.nodes if n.name.startswith("cpu")][:2]
    result = feasible(facts(pod("p", cpu="1")), snap, nodes=subset)
    assert result.nodes == ["cpu0", "cpu1"] and result.total == 2


def test_the_snapshot_counts_only_bound_live_pods() -> None:
    pods = [pod("bound", node_name="n", cpu="1"), pod("pending", cpu="1"),
            {**pod("done", node_name="n", cpu="1"), "status": {"phase": "Succeeded"}}]
    snap = snapshot([node("n")], pods)
    assert [p.name for p in snap.pods_on("n")] == ["bound"]
    assert isinstance(snap.node("n"), NodeFacts) and snap.node("zz") is None
