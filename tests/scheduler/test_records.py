"""fluence_core.scheduler.records: the durable record, read, written and restored."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from fluence_core import names
from fluence_core.kube.api import PODS
from fluence_core.graph import ResourceGraph
from fluence_core.kube.errors import ApiError
from fluence_core.matcher.base import Allocation, NodeShare, VirtualShare
from fluence_core.matcher.embedded import EmbeddedMatcher
from fluence_core.models import NodeInfo
from fluence_core.scheduler.records import HeldPlacement, RecordBook, read_records
from tests.scheduler.conftest import node, pod, pod_group
from tests.scheduler.parts import cluster_of

ON_N0 = Allocation(7, (NodeShare("n0", cores=(0, 1), memory=(0, 1), memory_mib=8192),))


def _recorded(name: str, pods: list[str], **extra: Any) -> dict[str, Any]:
    record = [{"pods": pods, "allocations": {"compute": json.loads(ON_N0.to_json())}}]
    return pod(name, annotations={names.ALLOCATION_ANNOTATION: json.dumps(record)}, **extra)


def _matcher() -> EmbeddedMatcher:
    return EmbeddedMatcher(ResourceGraph([NodeInfo.from_kube(node("n0"))]))


def _gang(owner: str = "g") -> HeldPlacement:
    return HeldPlacement("podgroups", "default", owner, ["a", "b"], {"compute": ON_N0})


def test_a_record_reads_back_what_was_written() -> None:
    book = RecordBook(cluster_of())
    book.held[("podgroups", "default", "g")] = [_gang()]
    written = book.annotations(("podgroups", "default", "g"))
    obj = pod_group("g", 2)
    obj["metadata"]["annotations"] = {k: v for k, v in written.items() if v is not None}
    assert read_records("podgroups", obj)[0].allocations["compute"] == ON_N0
    assert written[names.JOBIDS_ANNOTATION] == "7"


def test_an_unreadable_record_names_its_owner() -> None:
    broken = pod("p", annotations={names.ALLOCATION_ANNOTATION: "{not json"})
    with pytest.raises(ValueError, match="pods/default/p: unreadable"):
        read_records("pods", broken)


def test_write_puts_the_owners_records_on_it_and_clears_them_when_empty() -> None:
    cluster = cluster_of(pod_group("g", 2))
    book = RecordBook(cluster)
    owner = ("podgroups", "default", "g")
    book.held[owner] = [_gang()]
    book.write(owner)
    annotations = cluster.get("podgroups", "g", "default")["metadata"]["annotations"]
    assert annotations[names.JOBIDS_ANNOTATION] == "7"
    book.held[owner] = []
    book.write(owner)
    annotations = cluster.get("podgroups", "g", "default")["metadata"].get("annotations") or {}
    assert names.JOBIDS_ANNOTATION not in annotations


def test_a_lone_pod_holding_only_compute_writes_no_record() -> None:
    cluster = cluster_of(pod("p"))
    book = RecordBook(cluster)
    book.held[("pods", "default", "p")] = [HeldPlacement("pods", "default", "p", ["p"],
                                                         {"compute": ON_N0})]
    assert not book.held[("pods", "default", "p")][0].durable
    assert book.annotations(("pods", "default", "p")) == {}
    book.write(("pods", "default", "p"))
    assert not cluster.get(PODS, "p", "default")["metadata"].get("annotations")


def test_a_lone_pod_holding_a_virtual_resource_keeps_its_record() -> None:
    qpu = VirtualShare("/cluster0/qpu0", "qpu", "qpu0", "cepheus")
    held = HeldPlacement("pods", "default", "p", ["p"], {"compute": ON_N0,
                                                          "qpu": Allocation(8, virtual=(qpu,))})
    cluster = cluster_of(pod("p"))
    book = RecordBook(cluster)
    book.held[("pods", "default", "p")] = [held]
    assert held.durable
    book.write(("pods", "default", "p"))
    annotations = cluster.get(PODS, "p", "default")["metadata"]["annotations"]
    assert annotations[names.JOBIDS_ANNOTATION] == "7,8"


def test_a_record_read_at_start_is_cleared_even_when_what_remains_needs_none() -> None:
    recorded = _recorded("p", ["p"], node_name="n0")
    cluster = cluster_of(recorded)
    book = RecordBook(cluster)
    book.restore([("pods", recorded)], _matcher(), lambda ns, name: True)
    book.held[("pods", "default", "p")] = []
    book.write(("pods", "default", "p"))
    annotations = cluster.get(PODS, "p", "default")["metadata"].get("annotations") or {}
    assert names.ALLOCATION_ANNOTATION not in annotations


def test_a_read_only_book_writes_nothing() -> None:
    cluster = cluster_of(pod_group("g", 2))
    book = RecordBook(cluster, read_only=True)
    book.held[("podgroups", "default", "g")] = [_gang()]
    book.write(("podgroups", "default", "g"))
    assert not cluster.get("podgroups", "g", "default")["metadata"].get("annotations")


def test_writing_on_a_gone_owner_is_quiet_and_other_errors_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = cluster_of()
    book = RecordBook(cluster)
    book.write(("pods", "default", "gone"))  # NotFound: nothing to record on

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise ApiError(500, "boom", "InternalError")

    cluster.patch = refuse  # type: ignore[method-assign]
    with caplog.at_level(logging.ERROR, logger="fluence"):
        book.held[("podgroups", "default", "g")] = [_gang()]
        book.write(("podgroups", "default", "g"))
    assert "cannot write the record on podgroups default/g" in caplog.text


def test_restore_re_holds_records_whose_pods_live() -> None:
    alive_pod = _recorded("p", ["p"], node_name="n0")
    cluster = cluster_of(alive_pod)
    book, matcher = RecordBook(cluster), _matcher()
    book.restore([("pods", alive_pod)], matcher, lambda ns, name: True)
    assert list(matcher.allocations()) == [7]
    assert book.held[("pods", "default", "p")][0].jobids == [7]


def test_restore_drops_a_record_whose_pods_are_gone_and_rewrites_its_owner() -> None:
    group = pod_group("g", 2)
    record = [{"pods": ["a", "b"], "allocations": {"compute": json.loads(ON_N0.to_json())}}]
    group["metadata"]["annotations"] = {names.ALLOCATION_ANNOTATION: json.dumps(record)}
    cluster = cluster_of(group)
    book, matcher = RecordBook(cluster), _matcher()
    book.restore([("podgroups", group)], matcher, lambda ns, name: False)
    assert dict(matcher.allocations()) == {}
    assert book.held[("podgroups", "default", "g")] == []
    written = cluster.get("podgroups", "g", "default")["metadata"].get("annotations") or {}
    assert names.ALLOCATION_ANNOTATION not in written


def test_restore_skips_a_record_the_matcher_cannot_hold(caplog: pytest.LogCaptureFixture) -> None:
    elsewhere = _recorded("p", ["p"])
    book = RecordBook(cluster_of(elsewhere))
    matcher = EmbeddedMatcher(ResourceGraph([NodeInfo.from_kube(node("n9"))]))
    with caplog.at_level(logging.ERROR, logger="fluence"):
        book.restore([("pods", elsewhere)], matcher, lambda ns, name: True)
    assert book.held[("pods", "default", "p")] == []
    assert "cannot restore default/p" in caplog.text


def test_covers_looks_where_a_pods_record_can_live() -> None:
    book = RecordBook(cluster_of())
    book.held[("podgroups", "default", "g")] = [HeldPlacement("podgroups", "default", "g",
                                                              ["a"], {})]
    assert book.covers(("default", "a"), pod("a", group="g"))
    assert not book.covers(("default", "a"), pod("a"))
    assert not book.covers(("default", "b"), pod("b", group="g"))


def test_held_members_counts_the_live_members_of_each_pod_group() -> None:
    book = RecordBook(cluster_of())
    book.held[("podgroups", "default", "g")] = [HeldPlacement("podgroups", "default", "g",
                                                              ["a", "b", "c"], {})]
    book.held[("pods", "default", "solo")] = [HeldPlacement("pods", "default", "solo",
                                                            ["solo"], {})]
    members = book.held_members(lambda ns, name: name != "c")
    assert dict(members) == {("default", "g"): 2}
    with pytest.raises(KeyError):
        members[("default", "other")]
