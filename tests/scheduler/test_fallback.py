"""A record that cannot be restored exactly: the bound pods stay and are held from what they
request; only members not yet bound are released (issue 27)."""

from __future__ import annotations

import json
import logging
from typing import Callable

import pytest

from fluence_core import names
from fluence_core.kube.api import NODES, PODGROUPS, PODS
from fluence_core.resource_config import parse_resource_config
from fluence_core.scheduler.restart.fallback import HELD_FROM_POD, RELEASED
from tests.scheduler.conftest import Harness, node, pod, pod_group
from tests.scheduler.parts import ONE_QPU, TWO_QPUS, WANTS_QPU

pytestmark = pytest.mark.usefixtures("clean_env")


Factory = Callable[..., Harness]


def _annotations(h: Harness, resource: str, name: str) -> dict[str, str]:
    found = h.cluster.get(resource, name, "default")
    assert found is not None
    return dict(found["metadata"].get("annotations") or {})


def _set_record(h: Harness, resource: str, name: str, raw: str) -> None:
    h.cluster.patch(resource, name, {"metadata": {"annotations": {
        names.ALLOCATION_ANNOTATION: raw}}}, "default")


def _held_backends(h: Harness) -> list[str]:
    return sorted(v.backend for a in h.scheduler.matcher.allocations().values()
                  for v in a.virtual)


def test_a_corrupt_record_on_a_qpu_holder_keeps_it_running_and_its_qpu_held(
    harness_factory: Factory, caplog: pytest.LogCaptureFixture,
) -> None:
    h = harness_factory(node("n0"), pod("holder", "100m", requests=WANTS_QPU), resources=ONE_QPU)
    h.cycle()
    _set_record(h, PODS, "holder", "{not json")
    with caplog.at_level(logging.WARNING, logger="fluence"):
        h.restart()
    h.cycle()
    assert h.node_of("holder") == "n0"
    assert _held_backends(h) == ["cepheus"]
    assert "cannot read a record: pods/default/holder" in caplog.text
    events = h.cluster.events(reason=HELD_FROM_POD, involved_name="holder")
    assert events and "qpu on cepheus" in events[0]["message"]
    rewritten = json.loads(_annotations(h, PODS, "holder")[names.ALLOCATION_ANNOTATION])
    assert rewritten[0]["pods"] == ["holder"], "the record is written again from the pod"
    h.add(pod("second", "100m", requests=WANTS_QPU))
    h.cycle()
    assert h.node_of("second") is None, "the qpu stays the holder's"


def test_a_record_whose_job_ids_clash_keeps_both_pods_and_holds_the_second_from_the_cluster(
    harness_factory: Factory,
) -> None:
    h = harness_factory(node("n0"), pod("first", "1", requests=WANTS_QPU),
                        pod("other", "1", requests=WANTS_QPU), resources=TWO_QPUS)
    h.cycle()
    assert h.node_of("first") and h.node_of("other")
    raw = _annotations(h, PODS, "first")[names.ALLOCATION_ANNOTATION]
    other = json.loads(_annotations(h, PODS, "other")[names.ALLOCATION_ANNOTATION])
    clash = json.loads(raw)
    clash[0]["pods"] = ["other"]
    clash[0]["allocations"]["qpu"]["virtual"] = other[0]["allocations"]["qpu"]["virtual"]
    _set_record(h, PODS, "other", json.dumps(clash))  # same job ids as first's record
    h.restart()
    h.cycle()
    assert h.node_of("first") == "n0" and h.node_of("other") == "n0"
    assert _held_backends(h) == ["ankaa", "cepheus"], "each pod keeps its own backend"
    assert h.cluster.events(reason=HELD_FROM_POD, involved_name="other")
    h.restart()  # the rewritten record now restores exactly
    assert not h.scheduler.records.unrestored
    assert _held_backends(h) == ["ankaa", "cepheus"]


def test_a_record_naming_a_backend_the_graph_lost_keeps_the_pod_and_says_what_is_not_held(
    harness_factory: Factory, caplog: pytest.LogCaptureFixture,
) -> None:
    h = harness_factory(node("n0"), pod("holder", "100m", requests=WANTS_QPU),
                        resources=TWO_QPUS)
    h.cycle()
    backend = _annotations(h, PODS, "holder")[names.BACKEND_ANNOTATION]
    kept = "ankaa" if backend == "cepheus" else "cepheus"
    h.config = parse_resource_config(f"resources: [{{type: qpu, name: {kept}}}]", "kept.yaml")
    with caplog.at_level(logging.WARNING, logger="fluence"):
        h.restart()
    assert h.node_of("holder") == "n0"
    assert f"no 1 free qpu on backend {backend}" in caplog.text
    assert _held_backends(h) == [], "the other backend is not taken in its place"
    assert h.scheduler.matcher.allocations(), "its millicores are held"


def test_a_gang_with_a_corrupt_record_keeps_its_bound_members_and_places_the_rest(
    harness_factory: Factory,
) -> None:
    h = harness_factory(node("n0"), node("n1"), pod_group("g", 3),
                        *(pod(f"g-{i}", "2", group="g") for i in range(3)))
    h.cycle()
    placed = {f"g-{i}": h.node_of(f"g-{i}") for i in range(3)}
    assert all(placed.values())
    h.cluster.delete(PODS, "g-2", "default")  # its controller makes it again
    h.add(pod("g-2", "2", group="g"))
    _set_record(h, PODGROUPS, "g", "[{\"pods\": 7}]")
    h.restart()
    h.cycle()
    assert {name: h.node_of(name) for name in ("g-0", "g-1")} == \
        {name: placed[name] for name in ("g-0", "g-1")}
    assert h.node_of("g-2") is not None, "the late member joins the two held ones"
    held = h.scheduler.records.held[("podgroups", "default", "g")]
    assert sorted(p for r in held for p in r.pods) == ["g-0", "g-1", "g-2"]


def test_a_record_that_cannot_be_kept_releases_its_unbound_members_with_an_event(
    harness_factory: Factory,
) -> None:
    h = harness_factory(node("n0"), pod_group("g", 2), pod("g-0", "2", group="g"),
                        pod("g-1", "2", group="g"))
    h.cycle()
    h.cluster.delete(PODS, "g-1", "default")
    h.add(pod("g-1", "2", group="g"))
    h.add(pod("theirs", "2", scheduler="default-scheduler", node_name="n0"))
    h.restart()
    assert h.node_of("g-0") == "n0"
    assert h.cluster.events(reason=RELEASED, involved_name="g-1")
    assert h.node_of("g-1") is None, "no room beside g-0 and theirs"
    assert h.cluster.get(PODS, "g-0", "default") is not None


def test_a_lone_qpu_pod_whose_record_was_removed_still_holds_its_qpu(
    harness_factory: Factory,
) -> None:
    h = harness_factory(node("n0"), pod("holder", "100m", requests=WANTS_QPU), resources=ONE_QPU)
    h.cycle()
    h.cluster.patch(PODS, "holder", {"metadata": {"annotations": {
        names.ALLOCATION_ANNOTATION: None, names.JOBIDS_ANNOTATION: None}}}, "default")
    h.restart()
    assert _held_backends(h) == ["cepheus"]
    assert names.ALLOCATION_ANNOTATION in _annotations(h, PODS, "holder"), "written again"


def test_a_pod_of_another_scheduler_holding_a_qpu_is_pinned_with_it(
    harness_factory: Factory,
) -> None:
    theirs = pod("theirs", "1", scheduler="default-scheduler", node_name="n0",
                 requests=WANTS_QPU)
    h = harness_factory(node("n0"), theirs, pod("mine", "1", requests=WANTS_QPU), resources=ONE_QPU)
    h.cycle()
    assert h.node_of("mine") is None
    h.finish("theirs")
    h.cycle()
    assert h.node_of("mine") == "n0"


def test_running_gang_members_no_record_names_are_held_with_their_group(
    harness_factory: Factory,
) -> None:
    h = harness_factory(node("n0"), node("n1"), pod_group("g", 3),
                        *(pod(f"g-{i}", "2", group="g") for i in range(3)))
    h.cycle()
    h.cluster.delete(PODS, "g-2", "default")
    h.add(pod("g-2", "2", group="g"))
    h.cluster.patch(PODGROUPS, "g", {"metadata": {"annotations": {
        names.ALLOCATION_ANNOTATION: None, names.JOBIDS_ANNOTATION: None}}}, "default")
    h.restart()
    h.cycle()
    held = h.scheduler.records.held[("podgroups", "default", "g")]
    assert sorted(p for r in held for p in r.pods) == ["g-0", "g-1", "g-2"]
    assert h.cluster.events(reason=HELD_FROM_POD, involved_name="g-0")
    assert not h.scheduler.view.pins, "held with their group, not pinned apart"


def _garble(h: Harness) -> None:
    _set_record(h, PODS, "holder", "{not json")


def _clash(h: Harness) -> None:
    other = json.loads(_annotations(h, PODS, "first")[names.ALLOCATION_ANNOTATION])
    mine = json.loads(_annotations(h, PODS, "holder")[names.ALLOCATION_ANNOTATION])
    for kind, allocation in mine[0]["allocations"].items():
        allocation["jobid"] = other[0]["allocations"][kind]["jobid"]
    _set_record(h, PODS, "holder", json.dumps(mine))


def _shrink_node(h: Harness) -> None:
    h.cluster.patch_status(NODES, "n0", {"status": {"allocatable": {"cpu": "2"}}})


def _drop_backend(h: Harness) -> None:
    held = _annotations(h, PODS, "holder")[names.BACKEND_ANNOTATION]
    kept = "ankaa" if held == "cepheus" else "cepheus"
    h.config = parse_resource_config(f"resources: [{{type: qpu, name: {kept}}}]", "kept.yaml")


@pytest.mark.parametrize("spoil, said", [
    (_garble, "cannot read a record: pods/default/holder"),
    (_clash, "cannot restore default/holder jobids"),
    (_shrink_node, "cannot be held where it says: node n0 has 2 cores now"),
    (_drop_backend, "is no longer in the graph"),
], ids=["corrupt-annotation", "job-id-collision", "changed-node", "unknown-vertex"])
def test_every_record_that_cannot_be_restored_exactly_warns_and_posts_an_event_on_its_pod(
    harness_factory: Factory, caplog: pytest.LogCaptureFixture,
    spoil: Callable[[Harness], None], said: str,
) -> None:
    """Issue 27's four causes: the pod stays where it runs, held from what it requests, with
    a WARNING and a HeldFromPod Event on the pod saying why."""
    h = harness_factory(node("n0", cpu=4), node("n1", cpu=4),
                        pod("first", "1", requests=WANTS_QPU),  # read and restored first,
                        pod("holder", "3", requests=WANTS_QPU), resources=TWO_QPUS)  # so
    h.cycle()  # first keeps the ids holder's record is given
    assert h.node_of("first") == h.node_of("holder") == "n0"
    spoil(h)
    with caplog.at_level(logging.WARNING, logger="fluence"):
        h.restart()
        h.cycle()
    assert h.node_of("holder") == "n0", "neither deleted nor moved"
    assert said in caplog.text
    warned = [r for r in caplog.records if r.levelno == logging.WARNING
              and "fluence holds default/holder on n0 from what it requests" in r.getMessage()]
    assert warned, caplog.text
    events = h.cluster.events(reason=HELD_FROM_POD, involved_name="holder")
    assert events and events[0]["type"] == "Warning"
    assert "default/holder" in events[0]["message"]
    assert not h.cluster.events(reason=HELD_FROM_POD, involved_name="first")
