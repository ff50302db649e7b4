"""The dedicated-nodes filter, in a real scheduling cycle over the in-memory cluster."""

from __future__ import annotations

import pytest

from fluence_core.api import NodeFacts, PodFacts, load_settings
from fluence_core.testing import SchedulerHarness, get_plugin_manager, make_node_dict, make_pod_dict
from fluence_filter_dedicated.plugin import DEDICATED_LABEL, REASON, DedicatedNodes


def dedicated_node(name: str, namespace: str) -> dict[str, object]:
    return make_node_dict(name, 4, "16Gi", labels={DEDICATED_LABEL: namespace})


def test_the_entry_point_loads_the_filter() -> None:
    manager = get_plugin_manager(load_settings())
    assert manager.get_plugin("filter-dedicated") is not None


def test_disabled_the_filter_keeps_no_node(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUENCE_DISABLE_PLUGINS", "filter-dedicated")
    harness = SchedulerHarness()
    harness.namespaces("team-b")
    harness.add(dedicated_node("team-a-node", "team-a"),
                make_pod_dict("web", "1", namespace="team-b"))
    harness.cycle()
    assert harness.node_of("web", "team-b") == "team-a-node"


def test_a_pod_of_another_namespace_goes_to_the_shared_node(
        scheduler_harness: SchedulerHarness) -> None:
    scheduler_harness.namespaces("team-b")
    scheduler_harness.add(dedicated_node("team-a-node", "team-a"),
                          make_node_dict("shared-node", 2, "16Gi"),
                          make_pod_dict("web", "1", namespace="team-b"))
    scheduler_harness.cycle()
    assert scheduler_harness.node_of("web", "team-b") == "shared-node"


def test_the_owning_namespace_may_use_its_node(scheduler_harness: SchedulerHarness) -> None:
    scheduler_harness.namespaces("team-a")
    scheduler_harness.add(dedicated_node("team-a-node", "team-a"),
                          make_pod_dict("train", "3", namespace="team-a"))
    scheduler_harness.cycle()
    assert scheduler_harness.node_of("train", "team-a") == "team-a-node"


def test_a_pod_waits_when_only_another_namespaces_node_has_room(
        scheduler_harness: SchedulerHarness) -> None:
    scheduler_harness.namespaces("team-b")
    scheduler_harness.add(dedicated_node("team-a-node", "team-a"),
                          make_pod_dict("web", "1", namespace="team-b"))
    scheduler_harness.cycle()
    assert scheduler_harness.node_of("web", "team-b") is None


def test_the_check_names_its_reason() -> None:
    pod = PodFacts(namespace="team-b", name="web", labels={})
    check = DedicatedNodes().prepare(pod, snapshot=None)  # type: ignore[arg-type]
    assert check(NodeFacts(name="n", labels={DEDICATED_LABEL: "team-a"})) == (REASON,)
    assert check(NodeFacts(name="n", labels={})) == ()
