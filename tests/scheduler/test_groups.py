"""fluence_core.scheduler.groups: what a pod or group is, and where its record lives."""

from __future__ import annotations

from fluence_core.scheduler import groups as g
from tests.scheduler.conftest import pod, pod_group


def test_a_gang_waits_until_min_count_members_are_ready() -> None:
    members = [pod(f"w{i}", group="gang") for i in range(2)]
    [pending] = g.pending_groups(members, {("default", "gang"): pod_group("gang", 3)})
    assert not pending.ready and "2 of 3 members ready" in (pending.waiting or "")


def test_members_already_held_lower_what_a_gang_still_needs() -> None:
    members = [pod("w2", group="gang")]
    groups = {("default", "gang"): pod_group("gang", 3)}
    [pending] = g.pending_groups(members, groups, {("default", "gang"): 2})
    assert pending.ready and pending.min_count == 1


def test_a_pods_record_lives_on_itself_or_its_pod_group() -> None:
    assert g.owners_of(("ns", "a"), pod("a", namespace="ns")) == [("pods", "ns", "a")]
    assert g.owners_of(("ns", "a"), pod("a", group="gang", namespace="ns")) == [
        ("pods", "ns", "a"), ("podgroups", "ns", "gang")]


def test_a_groups_record_owner_is_its_pod_group_or_its_lone_pod() -> None:
    [gang] = g.pending_groups([pod("w0", group="gang")],
                              {("default", "gang"): pod_group("gang", 1)})
    [solo] = g.pending_groups([pod("solo")], {})
    assert g.record_owner(gang) == ("podgroups", "default", "gang")
    assert g.record_owner(solo) == ("pods", "default", "solo")


def test_a_pod_is_alive_while_cached_and_unfinished() -> None:
    done = pod("done")
    done["status"] = {"phase": "Succeeded"}
    pods = {("default", "run"): pod("run"), ("default", "done"): done}
    assert g.alive(pods, "default", "run")
    assert not g.alive(pods, "default", "done") and not g.alive(pods, "default", "gone")
