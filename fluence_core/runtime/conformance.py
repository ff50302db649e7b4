"""One conformance suite every quantum provider must pass: the contract the sidecar relies on.

A provider's author writes a small *vendor double* once (:class:`VendorDouble`):
it owns a provider whose vendor boundary (an SDK over a stub, a fake client)
answers with whatever state the suite asks for. The suite then drives the
provider through every state the sidecar meets (the task not visible yet,
queued at a position or beyond what the vendor counts, running, completed,
failed) and checks each answer, plus the two things ``fluence stage`` needs: a
short name and a self-contained interceptor module.

Run it from a test module in one line (``fluence_core.testing`` is a pytest
plugin every Fluence install carries)::

    test_provider_conformance = provider_conformance(MyVendorDouble)

or case by case with :func:`run_case` and :data:`CASES`.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
from dataclasses import dataclass
from typing import Callable, Mapping, Protocol

from fluence_core.runtime.provider import BEYOND_REPORTED, Backend, Provider

QUEUED, RUNNING, COMPLETED, FAILED = "queued", "running", "completed", "failed"
POD_UID = "6a1f0c2e-conformance-scout"
OTHER_UID = "0b9d4e71-conformance-other"
NAME = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class TaskState:
    """What the vendor says about a task at one poll."""

    status: str
    """:data:`QUEUED`, :data:`RUNNING`, :data:`COMPLETED` or :data:`FAILED`."""
    position: int | None = None
    """Queue position while queued (1 = next); :data:`BEYOND_REPORTED` means "past what the
    vendor counts" (Braket's ``">2000"``): the double shows it as its vendor would."""


class VendorDouble(Protocol):
    """A provider over a scripted vendor; the suite makes a fresh one per case."""

    provider: Provider
    backend: Backend
    """A backend the provider serves (its attributes as the scheduler writes them)."""
    foreign: Mapping[str, str]
    """Attributes of a backend the provider must not serve."""
    reports_position: bool
    """Whether the vendor reports queue positions (IBM Quantum does not)."""

    def will_list(self, pod_uid: str, state: TaskState | None) -> None:
        """The next lookup sees ``pod_uid``'s task in ``state``; ``None``: it sees only
        another pod's task."""

    def will_report(self, state: TaskState) -> None:
        """The next refresh of the task sees ``state``."""

    def close(self) -> None:
        """After each case: fail if something scripted was never asked for."""


@dataclass(frozen=True)
class Case:
    """One behaviour of the contract, checked against a fresh double."""

    name: str
    check: Callable[[VendorDouble], None]
    doc: str


def _found(double: VendorDouble, state: TaskState) -> object:
    """The pod's task as the sidecar holds it after one lookup and one refresh in ``state``."""
    provider = double.provider
    double.will_list(POD_UID, state)
    task = provider.find_my_task(POD_UID, double.backend, timeout=5.0)
    assert task is not None, "find_my_task found no task although the vendor lists the pod's task"
    double.will_report(state)
    return provider.refresh(task)


def _serves_its_backend(double: VendorDouble) -> None:
    provider = double.provider
    assert NAME.fullmatch(provider.name), (
        f"name {provider.name!r} must be a short lower-case identifier (it names the staged file)")
    attributes = double.backend.attributes
    assert provider.matches(attributes), f"does not serve {dict(attributes)}"
    assert not provider.matches(double.foreign), f"claims a foreign backend {dict(double.foreign)}"


def _another_pods_task_is_not_ours(double: VendorDouble) -> None:
    double.will_list(POD_UID, None)
    task = double.provider.find_my_task(POD_UID, double.backend, timeout=5.0)
    assert task is None, f"find_my_task returned {task!r} for a pod that submitted nothing"


def _finds_the_pods_task(double: VendorDouble) -> None:
    provider = double.provider
    task = _found(double, TaskState(QUEUED, 5))
    job_id = provider.job_id(task)
    assert isinstance(job_id, str) and job_id, f"job_id must be a non-empty string, got {job_id!r}"
    assert isinstance(provider.describe(task), str) and provider.describe(task)
    session = provider.session(task)
    assert session is None or isinstance(session, str), f"session must be str or None: {session!r}"


def _queued_at_a_position(double: VendorDouble) -> None:
    provider = double.provider
    task = _found(double, TaskState(QUEUED, 3))
    assert not provider.task_failed(task)
    if double.reports_position:
        position = provider.queue_position(task)
        assert position == 3, f"queue_position is {position!r} while third in the queue"
        assert not provider.is_ready(task, 2), "ready at position 2 while third in the queue"
        assert provider.is_ready(task, 3) and provider.is_ready(task, 4), "not ready at or under 3"
    else:
        assert provider.queue_position(task) is None, "a vendor without positions reports one"
        assert not provider.is_ready(task, 1000), "a queued task is ready without a position"


def _queued_beyond_what_the_vendor_counts(double: VendorDouble) -> None:
    if not double.reports_position:
        return  # nothing to count
    provider = double.provider
    task = _found(double, TaskState(QUEUED, BEYOND_REPORTED))
    position = provider.queue_position(task)
    assert isinstance(position, int) and position > 1, (
        f"a task past what the vendor counts has position {position!r}, not a number past it")
    assert not provider.is_ready(task, 1)


def _running_is_ready(double: VendorDouble) -> None:
    provider = double.provider
    task = _found(double, TaskState(RUNNING))
    assert provider.is_ready(task, 1), "a running task is not ready"
    assert provider.queue_position(task) is None, "a running task still has a queue position"
    assert not provider.task_failed(task)


def _completed_is_ready(double: VendorDouble) -> None:
    provider = double.provider
    task = _found(double, TaskState(COMPLETED))
    assert provider.is_ready(task, 1) and not provider.task_failed(task)


def _failed_is_failed(double: VendorDouble) -> None:
    provider = double.provider
    task = _found(double, TaskState(FAILED))
    assert provider.task_failed(task), "a failed task is not reported failed"
    assert not provider.is_ready(task, 1), "a failed task is reported ready"


def _stdlib_or_guarded(tree: ast.Module) -> list[str]:
    """Top-level imports that are neither the standard library nor inside a ``try``."""
    loose = []
    for node in tree.body:
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        loose += [m for m in modules
                  if m.split(".")[0] not in sys.stdlib_module_names and m != "__future__"]
    return loose


def _interceptor_is_self_contained(double: VendorDouble) -> None:
    provider = double.provider
    module = importlib.import_module(provider.interceptor_module)
    install = getattr(module, "install_interceptor", None)
    assert callable(install), f"{provider.interceptor_module} has no install_interceptor(pod_uid)"
    loose = _stdlib_or_guarded(ast.parse(inspect.getsource(module)))
    assert not loose, (f"{provider.interceptor_module} imports {loose} at load time: fluence stage "
                       f"copies it alone into user containers (import the SDK lazily)")


CASES = [
    Case("serves-its-backend", _serves_its_backend,
         "matches its own backend's attributes and no other's; a short name"),
    Case("another-pods-task-is-not-ours", _another_pods_task_is_not_ours,
         "find_my_task is None while only another pod's task exists"),
    Case("finds-the-pods-task", _finds_the_pods_task,
         "the task tagged with the pod's uid is found; job id, description, session"),
    Case("queued-at-a-position", _queued_at_a_position,
         "ready exactly at or under the ungate position (or never, without positions)"),
    Case("queued-beyond-what-the-vendor-counts", _queued_beyond_what_the_vendor_counts,
         "past the vendor's count ('>2000') is a number past it, and not ready"),
    Case("running-is-ready", _running_is_ready, "running: ready, no position, not failed"),
    Case("completed-is-ready", _completed_is_ready, "completed: ready, not failed"),
    Case("failed-is-failed", _failed_is_failed, "failed: failed and never ready"),
    Case("interceptor-is-self-contained", _interceptor_is_self_contained,
         "the interceptor module defines install_interceptor and imports only the stdlib at load"),
]


def run_case(case: Case, make_double: Callable[[], VendorDouble]) -> None:
    """Check one case against a fresh double; an :class:`AssertionError` says what broke."""
    double = make_double()
    try:
        case.check(double)
    finally:
        double.close()
