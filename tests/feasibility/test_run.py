"""feasible(): kube-scheduler's order, first refusal per node, and its summary wording."""

from __future__ import annotations

from fluence_core.feasibility import default_filters, feasible, nodes_to_find
from fluence_core.feasibility.node_affinity import NodeAffinity
from fluence_core.feasibility.facts import NodeFacts
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


# -- enough feasible nodes (kube-scheduler's percentageOfNodesToScore) ---------------------

def _spread_pod(name: str) -> dict[str, object]:
    """A pod whose answer reads the placed pods (hostname spread), so never lasting."""
    constraint = {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                  "whenUnsatisfiable": "DoNotSchedule",
                  "labelSelector": {"matchLabels": {"app": "s"}}}
    return pod(name, labels={"app": "s"}, topologySpreadConstraints=[constraint])


def test_nodes_to_find_follows_kube_schedulers_adaptive_percentage() -> None:
    assert nodes_to_find(99) == 99  # fewer than 100 nodes: every node
    assert nodes_to_find(100) == 100
    assert nodes_to_find(200) == 100  # 49 % of 200 is 98: never fewer than 100
    assert nodes_to_find(1000) == 420  # 50 - 1000/125 = 42 %
    assert nodes_to_find(5000) == 500  # 50 - 40 = 10 %
    assert nodes_to_find(60000) == 3000  # the 5 % floor
    assert nodes_to_find(1000, percentage=30) == 300
    assert nodes_to_find(1000, percentage=100) == 1000


def test_a_search_that_reads_placed_pods_stops_at_enough_feasible_nodes_from_its_start() -> None:
    cluster = [node(f"n{i}") for i in range(10)]
    result = feasible(facts(_spread_pod("p")), snapshot(cluster), enough=3, start=8)
    assert result.nodes == ["n8", "n9", "n0"]
    assert result.searched == 3 and result.total == 10 and result.partial


def test_refused_nodes_count_as_searched_but_not_as_found() -> None:
    cluster = [node(f"n{i}", taints=[GPU_TAINT] if i % 2 else None) for i in range(10)]
    result = feasible(facts(_spread_pod("p")), snapshot(cluster), enough=2, start=1)
    assert result.nodes == ["n2", "n4"] and result.searched == 4
    assert sorted(result.refused) == ["n1", "n3"]


def test_an_answer_of_the_nodes_alone_asks_every_node_whatever_enough_says() -> None:
    cluster = [node(f"n{i}") for i in range(10)]
    of_nodes = [f for f in default_filters() if not f.reads_pods]
    result = feasible(facts(pod("p")), snapshot(cluster), of_nodes, enough=3, start=5)
    assert result.lasting and len(result.nodes) == 10 and not result.partial


def test_a_search_finding_too_few_asks_every_node_and_summarises_them_all() -> None:
    cluster = [node(f"n{i}", taints=[GPU_TAINT] if i else None) for i in range(10)]
    result = feasible(facts(_spread_pod("p")), snapshot(cluster), enough=3, start=4)
    assert result.nodes == ["n0"] and not result.partial
    assert result.summary() == (
        "1/10 nodes are available: 9 node(s) had untolerated taint {gpu: true}.")
