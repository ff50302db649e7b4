"""The Acme provider passes Fluence's provider conformance suite against a fake Acme API."""

from __future__ import annotations

import os
from typing import Any, Mapping

from fluence_core.api import BEYOND_REPORTED, Backend
from fluence_core.testing import TaskState, provider_conformance
from fluence_provider_acme import interceptor
from fluence_provider_acme.provider import AcmeProvider

ENDPOINT = "https://acme.test/v1"


class FakeAcme:
    """Acme's API in memory: labelled tasks, and what the next read of a task says."""

    def __init__(self) -> None:
        self.tasks: list[dict[str, Any]] = []
        self.reads: list[dict[str, Any]] = []
        self.endpoints: set[str] = set()

    def list_tasks(self, label: str) -> list[dict[str, Any]]:
        return [task for task in self.tasks if label in task["labels"]]

    def get_task(self, task_id: str) -> dict[str, Any]:
        return {"id": task_id, **self.reads.pop(0)}


def shown(state: TaskState) -> dict[str, Any]:
    position = ">500" if state.position == BEYOND_REPORTED else state.position
    return {"status": state.status.upper(), "position": position}


class AcmeDouble:
    """What the suite drives: the provider over :class:`FakeAcme`."""

    reports_position = True
    backend = Backend("acme-falcon", {"provider": "acme", "backend": "acme-falcon",
                                      "endpoint": ENDPOINT})
    foreign: Mapping[str, str] = {"provider": "braket"}

    def __init__(self) -> None:
        self.acme = FakeAcme()

        def client_for(endpoint: str) -> FakeAcme:
            self.acme.endpoints.add(endpoint)
            return self.acme

        self.provider = AcmeProvider(client_for=client_for)

    def will_list(self, pod_uid: str, state: TaskState | None) -> None:
        uid = pod_uid if state is not None else "someone-else"
        self.acme.tasks = [{"id": f"t-{uid}", "created": "2026-11-30T10:00:00Z",
                            "labels": [f"fluence-pod-uid={uid}"],
                            **shown(state or TaskState("queued", 9))}]

    def will_report(self, state: TaskState) -> None:
        self.acme.reads.append(shown(state))

    def close(self) -> None:
        assert not self.acme.reads, f"reads never made: {self.acme.reads}"
        assert self.acme.endpoints <= {ENDPOINT}, "the backend's endpoint attribute was ignored"


test_provider_conformance = provider_conformance(AcmeDouble)


def test_the_interceptor_adds_the_pod_uid_and_keeps_the_users_labels(monkeypatch) -> None:
    monkeypatch.setenv(interceptor.LABELS, "team=qaoa,fluence-pod-uid=stale")
    assert interceptor.install_interceptor("uid-7") is True
    assert os.environ[interceptor.LABELS] == "team=qaoa,fluence-pod-uid=uid-7"
    assert interceptor.install_interceptor("a,b") is False


def test_fluence_finds_the_provider_through_its_entry_point() -> None:
    from fluence_core.api import Settings
    from fluence_core.testing import get_plugin_manager

    contributed = get_plugin_manager(Settings()).hook.fluence_providers()
    assert any(isinstance(p, AcmeProvider) for providers in contributed for p in providers)
