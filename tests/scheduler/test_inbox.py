"""fluence_core.scheduler.inbox: whether new pods wait for the next cycle."""

from __future__ import annotations

from fluence_core.kube.api import RESYNC
from fluence_core.scheduler.inbox import Inbox
from tests.scheduler.conftest import node, pod


def test_an_added_pod_is_an_arrival_until_the_loop_takes_it() -> None:
    inbox = Inbox()
    assert not inbox.arrivals()
    inbox.put("pods", "ADDED", pod("a", uid="u1"))
    assert inbox.arrivals()
    inbox.take(timeout=0)
    assert not inbox.arrivals()


def test_a_pods_change_is_no_arrival() -> None:
    inbox = Inbox()
    inbox.put("pods", "MODIFIED", pod("a", uid="u1"))
    inbox.put("pods", "DELETED", pod("b", uid="u2"))
    assert not inbox.arrivals()


def test_a_relist_of_the_pods_is_an_arrival() -> None:
    inbox = Inbox()
    inbox.put("pods", RESYNC, {"kind": "List", "items": [], "metadata": {}})
    assert inbox.arrivals()


def test_an_added_node_is_no_pod_arrival() -> None:
    inbox = Inbox()
    inbox.put("nodes", "ADDED", node("n0"))
    assert not inbox.arrivals()


def test_another_schedulers_pod_is_no_arrival() -> None:
    inbox = Inbox()
    inbox.put("pods", "ADDED", pod("a", uid="u1", scheduler="default-scheduler"))
    assert not inbox.arrivals()


def test_a_pod_added_bound_is_no_arrival() -> None:
    inbox = Inbox()
    inbox.put("pods", "ADDED", pod("a", uid="u1", node_name="n0"))
    assert not inbox.arrivals()


def test_an_unreadable_pod_is_kept_but_is_no_arrival() -> None:
    inbox = Inbox()
    inbox.put("pods", "ADDED", {"metadata": {"name": "a"}, "spec": "garbled"})
    assert not inbox.arrivals() and len(inbox) == 1
