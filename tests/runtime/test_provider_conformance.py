"""The provider conformance suite: the fake vendor queue passes it, broken providers do not."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Callable, Mapping

import pytest

from fluence_core.runtime.conformance import (
    BEYOND_REPORTED,
    CASES,
    COMPLETED,
    FAILED,
    OTHER_UID,
    QUEUED,
    RUNNING,
    TaskState,
    _stdlib_or_guarded,
    run_case,
)
from fluence_core.runtime.fake_provider import FakeQueueProvider, FakeTask
from fluence_core.runtime.provider import Backend
from fluence_core.hybrid.sidecar import VirtualClock
from fluence_core.testing import provider_conformance

FAKE_STATES = {QUEUED: "QUEUED", RUNNING: "RUNNING", COMPLETED: "COMPLETED", FAILED: "FAILED"}


@dataclass
class FakeQueueDouble:
    """The fake vendor queue as its own vendor double: the script is the vendor."""

    provider: FakeQueueProvider = field(default_factory=lambda: FakeQueueProvider(VirtualClock()))
    backend: Backend = Backend("sim", {"provider": "fake", "backend": "sim"})
    foreign: Mapping[str, str] = field(default_factory=lambda: {"provider": "braket"})
    reports_position: bool = True

    def will_list(self, pod_uid: str, state: TaskState | None) -> None:
        uid = pod_uid if state is not None else OTHER_UID
        shown = state or TaskState(QUEUED, 1)
        self.provider.tasks[uid] = FakeTask(f"job-{uid}", [(0.0, shown.position,
                                                            FAKE_STATES[shown.status])])

    def will_report(self, state: TaskState) -> None:
        for task in self.provider.tasks.values():
            task.script = [(0.0, state.position, FAKE_STATES[state.status])]

    def close(self) -> None:
        pass


test_provider_conformance = provider_conformance(FakeQueueDouble)


class ReadyTooSoon(FakeQueueProvider):
    """Ungates one place too early."""

    def is_ready(self, task: FakeTask, position: int) -> bool:
        return super().is_ready(task, position + 1)


class NeverFails(FakeQueueProvider):
    def task_failed(self, task: FakeTask) -> bool:
        return False


@pytest.mark.parametrize(("broken", "case", "message"), [
    (lambda: ReadyTooSoon(VirtualClock()), "queued-at-a-position",
     "ready at position 2 while third in the queue"),
    (lambda: NeverFails(VirtualClock()), "failed-is-failed",
     "a failed task is not reported failed"),
    (lambda: FakeQueueProvider(VirtualClock(), interceptor_module="fluence_core.runtime.provider"),
     "interceptor-is-self-contained", "has no install_interceptor"),
    (lambda: FakeQueueProvider(VirtualClock(), name="Fake Vendor"), "serves-its-backend",
     "must be a short lower-case identifier"),
])
def test_the_suite_catches_a_provider_that_breaks_the_contract(
    broken: Callable[[], FakeQueueProvider], case: str, message: str,
) -> None:
    [chosen] = [c for c in CASES if c.name == case]
    with pytest.raises(AssertionError, match=message):
        run_case(chosen, lambda: FakeQueueDouble(provider=broken()))


def test_an_interceptor_may_import_only_the_stdlib_at_load_time() -> None:
    source = ("from __future__ import annotations\nimport json, os.path\nimport boto3\n"
              "from braket.aws import AwsSession\n"
              "try:\n    from fluence_staged import names\nexcept ImportError:\n    pass\n"
              "def install_interceptor(uid):\n    import braket\n")
    assert _stdlib_or_guarded(ast.parse(source)) == ["boto3", "braket.aws"]


def test_beyond_reported_is_the_number_past_what_braket_counts() -> None:
    assert BEYOND_REPORTED == 2001


def test_the_fake_vendor_queue_fixture_moves_in_virtual_time(fake_vendor_queue, vendor_clock,
                                                             fake_cluster) -> None:
    fake_vendor_queue.tasks["uid"] = FakeTask("j", [(0.0, 4, "QUEUED"), (30.0, 1, "QUEUED")])
    task = fake_vendor_queue.find_my_task("uid", Backend("sim"), 1.0)
    assert fake_vendor_queue.queue_position(fake_vendor_queue.refresh(task)) == 4
    vendor_clock.sleep(30.0)
    assert fake_vendor_queue.queue_position(fake_vendor_queue.refresh(task)) == 1
    assert fake_cluster.list("pods").items == []
