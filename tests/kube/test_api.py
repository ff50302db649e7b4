"""The protocol's own objects: a cancellation ends the watches it is given."""

from __future__ import annotations

from fluence_core.kube.api import Cancellation


def test_cancel_runs_each_registered_callback_once() -> None:
    cancel, woken = Cancellation(), []
    cancel.on_cancel(lambda: woken.append("a"))
    cancel.on_cancel(lambda: woken.append("b"))
    cancel.cancel()
    cancel.cancel()
    assert (cancel.cancelled, woken) == (True, ["a", "b"])


def test_a_callback_registered_after_the_cancel_runs_at_once() -> None:
    cancel, woken = Cancellation(), []
    cancel.cancel()
    cancel.on_cancel(lambda: woken.append("late"))
    assert woken == ["late"]


def test_a_forgotten_callback_is_not_run() -> None:
    cancel, woken = Cancellation(), []
    forget = cancel.on_cancel(lambda: woken.append("ended watch"))
    forget()
    cancel.cancel()
    assert woken == []
