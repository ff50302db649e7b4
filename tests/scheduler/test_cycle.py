"""fluence_core.scheduler.cycle: one pass, through the hooks, with a typed context."""

from __future__ import annotations

from typing import Any

from fluence_core import hookimpl
from fluence_core.matcher.group import GroupMatch
from fluence_core.plugins import get_plugin_manager
from fluence_core.scheduler import groups as g
from fluence_core.scheduler.binder import Binder, Reporter
from fluence_core.scheduler.context import SchedulingContext
from fluence_core.scheduler.core import Scheduler
from fluence_core.scheduler.cycle import Cycle
from fluence_core.scheduler.metrics import SchedulerMetrics
from fluence_core.scheduler.preempt import Preemptor
from fluence_core.scheduler.view import ClusterView
from fluence_core.settings import load_settings
from tests.scheduler.conftest import node, pod, pod_group
from tests.scheduler.parts import cluster_of, started_view


def _cycle(view: ClusterView, *plugins: object, **settings: Any) -> Cycle:
    cluster = view.records.cluster
    config = load_settings(**settings)
    manager = get_plugin_manager(config, extra_plugins=[(f"p{i}", p) for i, p in
                                                        enumerate(plugins)])
    metrics = SchedulerMetrics()
    reporter = Reporter(cluster, metrics, clock=lambda: 0.0)
    binder = Binder(cluster, view, view.records, manager, reporter)
    return Cycle(config, manager, view, view.records, binder, reporter,
                 Preemptor(cluster, view, view.records), metrics)


class _Seen:
    """Records the context every hook receives; vetoes n0 in the filter."""

    def __init__(self) -> None:
        self.contexts: dict[str, list[SchedulingContext]] = {}

    def _saw(self, hook: str, ctx: SchedulingContext) -> None:
        self.contexts.setdefault(hook, []).append(ctx)

    @hookimpl
    def fluence_prefilter(self, group: Any, ctx: SchedulingContext) -> None:
        self._saw("prefilter", ctx)

    @hookimpl
    def fluence_filter(self, pod: Any, node: str, ctx: SchedulingContext) -> str | None:
        self._saw("filter", ctx)
        return "draining" if node == "n0" else None

    @hookimpl
    def fluence_postfilter(self, group: Any, reason: str, ctx: SchedulingContext) -> None:
        self._saw("postfilter", ctx)

    @hookimpl
    def fluence_reserve(self, group: Any, placements: Any, ctx: SchedulingContext) -> None:
        self._saw("reserve", ctx)


def test_every_hook_gets_a_typed_context_of_this_cycles_graph_and_matcher() -> None:
    view = started_view(cluster_of(node("n0"), node("n1"), pod("p", "1")))
    seen = _Seen()
    results = _cycle(view, seen, match_policy="lonode").schedule_once()
    assert results[0].placed == {"default/p": "n1"}
    for hook in ("prefilter", "filter", "postfilter", "reserve"):
        ctx = seen.contexts[hook][0]
        assert isinstance(ctx, SchedulingContext), hook
        assert ctx.graph is view.graph and ctx.matcher is view.matcher, hook


def test_the_filter_sees_the_matchs_planned_pods_per_node() -> None:
    members = [pod(f"w{i}", "1", group="gang") for i in range(3)]
    view = started_view(cluster_of(node("n0"), node("n1", cpu=8), pod_group("gang", 3),
                                   *members))
    seen = _Seen()
    _cycle(view, seen, match_policy="lonode").schedule_once()
    first = seen.contexts["filter"][0]
    assert sum(first.planned.values()) == 3
    assert first.pods_on("n0") == view.pods_on("n0")


def test_the_postfilter_sees_the_vetoed_nodes_and_a_rematch_avoids_them() -> None:
    view = started_view(cluster_of(node("n0"), node("n1"), pod("p", "1")))
    seen = _Seen()
    _cycle(view, seen, match_policy="lonode").schedule_once()
    assert list(seen.contexts["postfilter"][0].vetoed) == ["n0"]
    assert list(seen.contexts["prefilter"][0].vetoed) == []


def test_a_failed_group_waits_for_the_generation_to_move() -> None:
    view = started_view(cluster_of(node("n0", cpu=2), pod("big", "4")))
    cycle = _cycle(view)
    assert cycle.schedule_once()[0].reason
    assert cycle.schedule_once() == []
    view.generation += 1
    assert len(cycle.schedule_once()) == 1


def test_a_prefilter_veto_is_the_reason_the_group_waits() -> None:
    class Closed:
        @hookimpl
        def fluence_prefilter(self, group: Any, ctx: SchedulingContext) -> str:
            return "closed"

    view = started_view(cluster_of(node("n0"), pod("p")))
    assert _cycle(view, Closed()).schedule_once()[0].reason == "prefilter: closed"
    assert dict(view.matcher.allocations()) == {}


def test_match_never_uses_an_excluded_node() -> None:
    view = started_view(cluster_of(node("n0"), node("n1"), pod("p")))
    pending = g.pending_groups(view.unplaced.values(), view.pod_groups)[0]
    outcome = _cycle(view).match(pending.requests(), exclude=["n0"])
    assert isinstance(outcome, GroupMatch)
    assert [p.node for p in outcome.placements.values()] == ["n1"]


class _Ticking:
    """A clock a second later at each reading: any cycle is past its budget after one step."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def _backlog(cycle_budget_seconds: float) -> Scheduler:
    """A scheduler on a ticking clock over ten pods that cannot fit."""
    cluster = cluster_of(node("n0", cpu=2), *[pod(f"big{i}", "4") for i in range(10)])
    scheduler = Scheduler(cluster, load_settings(cycle_budget_seconds=cycle_budget_seconds),
                          clock=_Ticking())
    scheduler.start()
    return scheduler


def test_a_cycle_past_its_budget_ends_once_new_pods_arrived() -> None:
    scheduler = _backlog(0.5)
    scheduler.cycle.arrived = lambda: True
    first = {r.group for r in scheduler.schedule_once()}
    assert 1 <= len(first) < 10, "one attempt at least, then it hands over"
    second = {r.group for r in scheduler.schedule_once()}
    assert second and not second & first, "the next cycle goes on with the groups not reached"


def test_a_cycle_past_its_budget_goes_on_while_no_pod_arrived() -> None:
    scheduler = _backlog(0.5)
    scheduler.cycle.arrived = lambda: False
    assert len(scheduler.schedule_once()) == 10


def test_a_budget_of_zero_never_ends_a_cycle_early() -> None:
    scheduler = _backlog(0.0)
    scheduler.cycle.arrived = lambda: True
    assert len(scheduler.schedule_once()) == 10
