"""InterPodAffinity: the pod's affinity and anti-affinity, and existing pods' anti-affinity."""

from __future__ import annotations

from typing import Any

from fluence_core.feasibility.inter_pod_affinity import (
    AFFINITY, ANTI_AFFINITY, EXISTING_ANTI_AFFINITY, InterPodAffinity,
)
from tests.feasibility.kube_objects import affinity, node, pod, refusals, snapshot, term

ZONE = "zone"
HOST = "kubernetes.io/hostname"
NODES = [node("a1", labels={ZONE: "a"}), node("a2", labels={ZONE: "a"}),
         node("b1", labels={ZONE: "b"}), node("nozone")]
APP_DB = {"matchLabels": {"app": "db"}}


def _fine(result: dict[str, tuple[str, ...]]) -> set[str]:
    return {n for n, reasons in result.items() if not reasons}


def _run(
    new: dict[str, Any], existing: list[dict[str, Any]], **storage: Any
) -> dict[str, tuple[str, ...]]:
    return refusals(InterPodAffinity(), new, snapshot(NODES, existing, **storage))


def test_affinity_follows_the_matching_pods_domain() -> None:
    db = pod("db", labels={"app": "db"}, node_name="a1")
    result = _run(pod("web", affinity=affinity(pod_affinity=[term(APP_DB, ZONE)])), [db])
    assert _fine(result) == {"a1", "a2"}
    assert result["b1"] == (AFFINITY,) and result["nozone"] == (AFFINITY,)


def test_affinity_with_no_match_anywhere_refuses_every_node() -> None:
    result = _run(pod("web", affinity=affinity(pod_affinity=[term(APP_DB, ZONE)])), [])
    assert _fine(result) == set()


def test_the_first_pod_of_a_self_affine_group_may_go_where_the_key_exists() -> None:
    first = pod("db0", labels={"app": "db"}, affinity=affinity(pod_affinity=[term(APP_DB, ZONE)]))
    assert _fine(_run(first, [])) == {"a1", "a2", "b1"}


def test_self_affinity_exception_ends_once_a_match_exists() -> None:
    first = pod("db1", labels={"app": "db"}, affinity=affinity(pod_affinity=[term(APP_DB, ZONE)]))
    assert _fine(_run(first, [pod("db0", labels={"app": "db"}, node_name="b1")])) == {"b1"}


def test_affinity_needs_one_pod_matching_every_term() -> None:
    terms = [term(APP_DB, ZONE), term({"matchLabels": {"tier": "x"}}, ZONE)]
    existing = [pod("db", labels={"app": "db"}, node_name="a1"),
                pod("x", labels={"tier": "x"}, node_name="a1")]
    assert _fine(_run(pod("web", affinity=affinity(pod_affinity=terms)), existing)) == set()
    both = [pod("dbx", labels={"app": "db", "tier": "x"}, node_name="b1")]
    assert _fine(_run(pod("web", affinity=affinity(pod_affinity=terms)), both)) == {"b1"}


def test_affinity_looks_only_in_the_pods_namespace_by_default() -> None:
    db = pod("db", namespace="other", labels={"app": "db"}, node_name="a1")
    assert (
        _fine(_run(pod("web", affinity=affinity(pod_affinity=[term(APP_DB, ZONE)])), [db])) == set()
    )
    listed = term(APP_DB, ZONE, namespaces=["other"])
    assert _fine(_run(pod("web", affinity=affinity(pod_affinity=[listed])), [db])) == {"a1", "a2"}


def test_namespace_selector_picks_namespaces_by_label() -> None:
    db = pod("db", namespace="prod", labels={"app": "db"}, node_name="b1")
    namespaces = [{"metadata": {"name": "prod", "labels": {"env": "prod"}}}]
    chosen = term(APP_DB, ZONE, namespaceSelector={"matchLabels": {"env": "prod"}})
    result = _run(pod("web", affinity=affinity(pod_affinity=[chosen])), [db], namespaces=namespaces)
    assert _fine(result) == {"b1"}
    everywhere = term(APP_DB, ZONE, namespaceSelector={})
    assert _fine(_run(pod("web", affinity=affinity(pod_affinity=[everywhere])), [db])) == {"b1"}


def test_anti_affinity_keeps_out_of_the_matching_pods_domain() -> None:
    db = pod("db", labels={"app": "db"}, node_name="a1")
    result = _run(pod("web", affinity=affinity(anti=[term(APP_DB, ZONE)])), [db])
    assert _fine(result) == {"b1", "nozone"}           # a node without the key is not in a domain
    assert result["a2"] == (ANTI_AFFINITY,)


def test_anti_affinity_by_hostname_is_one_per_node() -> None:
    db = pod("db0", labels={"app": "db"}, node_name="a1")
    new = pod("db1", labels={"app": "db"}, affinity=affinity(anti=[term(APP_DB, HOST)]))
    assert _fine(_run(new, [db])) == {"a2", "b1", "nozone"}


def test_existing_pods_anti_affinity_keeps_the_pod_out() -> None:
    guard = pod(
        "guard",
        node_name="b1",
        affinity=affinity(anti=[term({"matchLabels": {"app": "web"}}, ZONE)]),
    )
    result = _run(pod("web", labels={"app": "web"}), [guard])
    assert result["b1"] == (EXISTING_ANTI_AFFINITY,)
    assert _fine(result) == {"a1", "a2", "nozone"}
    assert _fine(_run(pod("other", labels={"app": "other"}), [guard])) == {
        "a1",
        "a2",
        "b1",
        "nozone",
    }


def test_an_absent_label_selector_matches_no_pod() -> None:
    db = pod("db", labels={"app": "db"}, node_name="a1")
    assert _fine(_run(pod("web", affinity=affinity(anti=[term(None, ZONE)])), [db])) == {
        "a1", "a2", "b1", "nozone"}
    assert _fine(_run(pod("web", affinity=affinity(anti=[term({}, ZONE)])), [db])) == {
        "b1",
        "nozone",
    }
