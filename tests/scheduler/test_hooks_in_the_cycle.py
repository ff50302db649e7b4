"""Each scheduler hook, as a plugin meets it: through a scheduler's cycle over a fake cluster.

A plugin registered next to the built-ins steers what the scheduler does, and the
tests check what a user would see: where pods bind, what is written on their owner,
what is given back when a step fails. (The steps are ordered in
:mod:`fluence_core.hookspecs`; ``test_cycle`` and ``test_scheduler`` cover the
prefilter, filter and postfilter.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Callable

from fluence_core import hookimpl
from fluence_core.kube.api import PODGROUPS, PODS
from fluence_core.feasibility.builtins import KUBE_ORDER
from fluence_core.feasibility.facts import NodeFacts, PodFacts, Snapshot
from fluence_core.matcher.embedded import EmbeddedMatcher
from fluence_core.plugins import get_plugin_manager
from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import load_settings
from tests.scheduler.conftest import Harness, node, pod, pod_group

Factory = Callable[..., Harness]


def with_plugins(h: Harness, *plugins: object, **settings: Any) -> Harness:
    """``h``'s scheduler replaced by one with ``plugins`` registered beside the built-ins."""
    config = load_settings(**settings)
    manager = get_plugin_manager(config, extra_plugins=[(f"p{i}", p) for i, p in
                                                        enumerate(plugins)])
    h.scheduler = Scheduler(h.cluster, config, manager)
    h.scheduler.start()
    return h


# -- fluence_matcher ---------------------------------------------------------------------


class Recording(EmbeddedMatcher):
    """A plugin's own matcher (the embedded one, so its answers are known)."""


class OwnMatcher:
    def __init__(self) -> None:
        self.made: list[Recording] = []

    @hookimpl(tryfirst=True)
    def fluence_matcher(self, settings: Any, graph: Any) -> Recording:
        self.made.append(Recording(graph))
        return self.made[-1]


def test_a_plugins_matcher_is_the_one_that_holds_what_the_scheduler_placed(
        harness_factory: Factory) -> None:
    plugin = OwnMatcher()
    h = with_plugins(harness_factory(node("n0"), pod("p", "2")), plugin)
    h.cycle()
    assert h.node_of("p") == "n0"
    (matcher,) = plugin.made
    assert [a.nodes[0].node for a in matcher.allocations().values()] == ["n0"]


class CannotServe:
    def __init__(self) -> None:
        self.asked = 0

    @hookimpl(tryfirst=True)
    def fluence_matcher(self, settings: Any, graph: Any) -> None:
        self.asked += 1
        return None


def test_a_matcher_plugin_that_cannot_serve_leaves_the_embedded_default_to_place(
        harness_factory: Factory) -> None:
    plugin = CannotServe()
    h = with_plugins(harness_factory(node("n0"), pod("p", "2")), plugin)
    h.cycle()
    assert plugin.asked == 1 and h.node_of("p") == "n0"


# -- fluence_feasibility_filters ---------------------------------------------------------


class NotOnN0:
    """A third party's node filter: n0 is reserved for something else."""

    name = "NotOnN0"
    reads_pods = False

    def prepare(self, pod: PodFacts, snapshot: Snapshot) -> Callable[[NodeFacts], Sequence[str]]:
        return lambda node: ("n0 is reserved",) if node.name == "n0" else ()


class ContributesAFilter:
    @hookimpl
    def fluence_feasibility_filters(self, settings: Any) -> list[NotOnN0]:
        return [NotOnN0()]


def test_a_contributed_filter_keeps_pods_off_the_nodes_it_refuses(
        harness_factory: Factory) -> None:
    h = with_plugins(harness_factory(node("n0"), node("n1"), pod("a", "4"), pod("b", "4")),
                     ContributesAFilter(), match_policy="lonode")  # n0 would come first
    h.cycle()
    placed = {name: h.node_of(name) for name in ("a", "b")}
    assert sorted(placed.values(), key=str) == [None, "n1"], placed
    (waiting,) = [name for name, node in placed.items() if node is None]
    message = h.cluster.events(reason="FailedScheduling", involved_name=waiting)[-1]["message"]
    assert "n0 is reserved" in message


def test_the_scheduler_asks_kube_schedulers_filters_in_its_order_then_the_contributed_ones(
        harness_factory: Factory) -> None:
    h = with_plugins(harness_factory(node("n0")), ContributesAFilter())
    # every built-in, loaded through its entry point, in the order of the one list
    # (feasibility/builtins.py): a new built-in filter needs no edit here
    # (installed third-party filters, such as examples/filter-plugin, come between)
    asked = [f.name for f in h.scheduler.cycle.feasible.filters]
    assert asked[:len(KUBE_ORDER)] == list(KUBE_ORDER)
    assert "NotOnN0" in asked[len(KUBE_ORDER):]


# -- fluence_score_plugins ---------------------------------------------------------------


class PrefersTheLastNode:
    """A third party's preference: the highest-numbered feasible node is best."""

    name = "PrefersTheLastNode"
    weight = 1

    def __init__(self) -> None:
        self.asked: list[str] = []

    def score(self, pod: PodFacts, snapshot: Snapshot,
              nodes: Sequence[NodeFacts]) -> Mapping[str, int]:
        self.asked.append(pod.name)
        last = max(node.name for node in nodes)
        return {node.name: 100 if node.name == last else 0 for node in nodes}


class ContributesAScore:
    def __init__(self) -> None:
        self.plugin = PrefersTheLastNode()

    @hookimpl
    def fluence_score_plugins(self, settings: Any) -> list[PrefersTheLastNode]:
        return [self.plugin]


def test_a_contributed_score_decides_among_the_nodes_a_pod_may_use(
        harness_factory: Factory) -> None:
    contributed = ContributesAScore()
    h = with_plugins(harness_factory(node("n0"), node("n1"), pod("p", "2")),
                     contributed, match_policy="lonode")  # n0 would come first
    h.cycle()
    assert contributed.plugin.asked == ["p"]
    assert h.node_of("p") == "n1"


def test_the_scheduler_scores_with_kube_schedulers_weights_and_the_contributed_ones(
        harness_factory: Factory) -> None:
    h = with_plugins(harness_factory(node("n0")), ContributesAScore())
    assert sorted((s.name, s.weight) for s in h.scheduler.cycle.feasible.scores) == [
        ("InterPodAffinity", 2), ("NodeAffinity", 2), ("PodTopologySpread", 2),
        ("PrefersTheLastNode", 1), ("TaintToleration", 3)]


def test_preferences_are_not_read_with_no_tiers(harness_factory: Factory) -> None:
    contributed = ContributesAScore()
    h = with_plugins(harness_factory(node("n0"), node("n1"), pod("p", "2")),
                     contributed, match_policy="lonode", preference_tiers=0)
    h.cycle()
    assert h.node_of("p") == "n0" and contributed.plugin.asked == []


# -- fluence_reserve, fluence_prebind, fluence_unreserve ---------------------------------


class Stamps:
    """Reserves, annotates the group's owner, and can be told to fail its reservation."""

    def __init__(self, key: str, fail: bool = False) -> None:
        self.key = key
        self.fail = fail
        self.reserved: list[dict[str, str | None]] = []
        self.unreserved: list[str] = []

    @hookimpl
    def fluence_reserve(self, group: Any, placements: Any, ctx: Any) -> None:
        self.reserved.append({key: p.node for key, p in placements.items()})
        if self.fail:
            raise RuntimeError(f"{self.key} cannot stamp")

    @hookimpl
    def fluence_prebind(self, group: Any, placements: Any, ctx: Any) -> dict[str, str]:
        return {f"example.org/{self.key}": group.name}

    @hookimpl
    def fluence_unreserve(self, group: Any, placements: Any, ctx: Any) -> None:
        self.unreserved.append(group.name)


def gang(size: int) -> list[dict[str, Any]]:
    return [pod_group("gang", size), *(pod(f"w{i}", "1", group="gang") for i in range(size))]


def test_every_plugin_reserves_and_annotates_the_gangs_pod_group_before_it_binds(
        harness_factory: Factory) -> None:
    first, second = Stamps("first"), Stamps("second")
    h = with_plugins(harness_factory(node("n0"), *gang(2)), first, second)
    h.cycle()
    assert [h.node_of(f"w{i}") for i in range(2)] == ["n0", "n0"]
    assert first.reserved == second.reserved == [{"default/w0": "n0", "default/w1": "n0"}]
    annotations = h.cluster.get(PODGROUPS, "gang", "default")["metadata"]["annotations"]
    assert annotations["example.org/first"] == annotations["example.org/second"] == "default/gang"
    assert first.unreserved == second.unreserved == []


def test_a_failed_reservation_binds_nothing_and_every_plugin_unreserves(
        harness_factory: Factory) -> None:
    fine, failing = Stamps("fine"), Stamps("failing", fail=True)
    h = with_plugins(harness_factory(node("n0"), *gang(2)), fine, failing)
    (result,) = h.cycle()
    assert "failing cannot stamp" in (result.reason or "")
    assert [h.node_of(f"w{i}") for i in range(2)] == [None, None]
    assert fine.unreserved == failing.unreserved == ["default/gang"]
    assert dict(h.scheduler.view.matcher.allocations()) == {}, "the allocation is given back"
    annotations = h.cluster.get(PODGROUPS, "gang", "default")["metadata"].get("annotations")
    assert not any(key.startswith("example.org/") for key in annotations or {})


def test_a_lone_pods_prebind_annotations_are_written_on_the_pod(
        harness_factory: Factory) -> None:
    h = with_plugins(harness_factory(node("n0"), pod("solo", "1")), Stamps("mine"))
    h.cycle()
    solo = h.cluster.get(PODS, "solo", "default")
    assert solo["spec"]["nodeName"] == "n0"
    assert solo["metadata"]["annotations"]["example.org/mine"]


# -- fluence_postfilter ------------------------------------------------------------------


class VetoesN0:
    def __init__(self, exclude: list[str] | None) -> None:
        self.exclude = exclude
        self.reasons: list[str] = []

    @hookimpl
    def fluence_filter(self, pod: Any, node: str, ctx: Any) -> str | None:
        return "n0 is draining" if node == "n0" else None

    @hookimpl
    def fluence_postfilter(self, group: Any, reason: str, ctx: Any) -> list[str] | None:
        self.reasons.append(reason)
        return self.exclude


def test_a_postfilters_exclusions_are_avoided_by_the_rematch_besides_the_vetoed_node(
        harness_factory: Factory) -> None:
    plugin = VetoesN0(exclude=["n1"])
    h = with_plugins(harness_factory(node("n0"), node("n1"), node("n2"), pod("p", "1")),
                     plugin, match_policy="lonode")
    h.cycle()
    assert h.node_of("p") == "n2"
    assert plugin.reasons == ["filter vetoed n0: n0 is draining"]


def test_when_no_postfilter_answers_the_group_waits_with_the_filters_reason(
        harness_factory: Factory) -> None:
    plugin = VetoesN0(exclude=None)  # pod-limit's postfilter would ask for the rematch
    h = with_plugins(harness_factory(node("n0"), node("n1"), pod("p", "1")),
                     plugin, match_policy="lonode", disable_plugins=["pod-limit"])
    h.cycle()
    assert h.node_of("p") is None
    message = h.cluster.events(reason="FailedScheduling", involved_name="p")[-1]["message"]
    assert "n0 is draining" in message
