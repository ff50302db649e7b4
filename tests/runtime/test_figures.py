"""Backend figures: one schema for a file and Fluence's ConfigMap, refreshed from providers."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml

from fluence_core import names
from fluence_core.kube.api import CONFIGMAPS
from fluence_core.errors import FluenceError
from fluence_core.kube.fake import FakeCluster
from fluence_core.kube.errors import ApiError
from fluence_core.resource_config import parse_resource_config
from fluence_core.runtime import figures
from fluence_core.runtime.figures import ConfigMapRef
from fluence_core.runtime.provider import Backend, BackendInfo, Provider
from fluence_core.runtime.refresh import FiguresRefresh, refresh_once

CONFIG = parse_resource_config("""
resources:
  - type: qpu
    name: garnet
    attributes: {provider: scripted}
  - type: qpu
    name: torino
    attributes: {provider: scripted}
  - type: qpu
    name: nobody_speaks_for
    attributes: {provider: none}
""", "test")
REF = ConfigMapRef()


@dataclass
class ScriptedProvider(Provider):
    """Reports the figures it is given; raises for the backends in ``broken``."""

    figures: dict[str, BackendInfo] = field(default_factory=dict)
    broken: set[str] = field(default_factory=set)
    asked: list[str] = field(default_factory=list)
    name: str = "scripted"

    def matches(self, attributes: Mapping[str, str]) -> bool:
        return attributes.get("provider") == "scripted"

    def backend_info(self, backend: Backend) -> BackendInfo | None:
        self.asked.append(backend.name)
        if backend.name in self.broken:
            raise ConnectionError("vendor unreachable")
        return self.figures.get(backend.name)

    def find_my_task(self, pod_uid: str, backend: Backend, timeout: float) -> Any:
        return None

    def queue_position(self, task: Any) -> int | None:
        return None

    def is_ready(self, task: Any, position: int) -> bool:
        return False

    def task_failed(self, task: Any) -> bool:
        return False

    def job_id(self, task: Any) -> str:
        return ""


@pytest.fixture
def cluster() -> FakeCluster:
    fake = FakeCluster()
    fake.create("namespaces", {"metadata": {"name": names.FLUENCE_NAMESPACE}})
    return fake


def stored(cluster: FakeCluster) -> dict[str, Any]:
    found = cluster.get(CONFIGMAPS, names.BACKENDS_CONFIGMAP, names.FLUENCE_NAMESPACE)
    assert found is not None
    return found


def test_a_file_and_the_configmap_value_read_alike() -> None:
    text = "garnet: {price_per_shot: 0.00145, price_per_task: 0.3, queue: 3, status: online}\n"
    entries = figures.parse(text, "prices.yaml")
    assert entries == {"garnet": {"price_per_shot": 0.00145, "price_per_task": 0.3, "queue": 3,
                                  "status": "online"}}
    assert figures.parse(figures.render(entries), "again") == entries
    info = figures.as_infos(entries, "prices.yaml")["garnet"]
    assert (info.cost(1000), info.queue, info.source) == (pytest.approx(1.75), 3, "prices.yaml")


@pytest.mark.parametrize(("text", "message"), [
    ("garnet: {queue: many}", "garnet: queue: expected a whole number >= 0, got 'many'"),
    ("garnet: {queue: 2.5}", "garnet: queue: expected a whole number >= 0, got 2.5"),
    ("garnet: {price_per_shot: -1}", "garnet: price_per_shot: expected a number >= 0, got -1"),
    ("garnet: {status: true}", "garnet: status: expected text, got True"),
    ("garnet: {colour: red}", "garnet: unknown keys ['colour']"),
    ("garnet: 3", "garnet: expected a mapping of figures, got 3"),
    ("- garnet", "expected a mapping of backend name to its figures"),
])
def test_bad_figures_are_named_with_the_backend_and_key(text: str, message: str) -> None:
    with pytest.raises(FluenceError, match="^where: " + re.escape(message)):
        figures.parse(text, "where")


def test_configmap_refs_default_to_fluences_namespace() -> None:
    assert ConfigMapRef.parse("figures") == ConfigMapRef(names.FLUENCE_NAMESPACE, "figures")
    assert ConfigMapRef.parse("ops/figures") == ConfigMapRef("ops", "figures")
    with pytest.raises(FluenceError, match="expected NAME or NAMESPACE/NAME"):
        ConfigMapRef.parse("a/b/c")


def test_a_missing_configmap_says_who_writes_it(cluster: FakeCluster) -> None:
    with pytest.raises(FluenceError, match="fluence-system/fluence-backends does not exist: "
                                           "Fluence's scheduler writes it when "
                                           "FLUENCE_BACKEND_REFRESH"):
        figures.read_configmap(cluster, REF)


def test_a_round_asks_each_backends_provider_and_writes_the_configmap(
    cluster: FakeCluster,
) -> None:
    provider = ScriptedProvider({
        "garnet": BackendInfo("garnet", price_per_shot=0.00145, queue=3, status="online",
                              qubits=20, source="scripted-api"),
        "torino": BackendInfo("torino", queue=250, status="offline")})
    refresh_once(cluster, CONFIG, [provider], REF, now=lambda: "2026-11-30T13:00:00Z")
    assert provider.asked == ["garnet", "torino"]
    configmap = stored(cluster)
    assert configmap["metadata"]["annotations"][names.REFRESHED_AT_ANNOTATION] == \
        "2026-11-30T13:00:00Z"
    assert configmap["metadata"]["labels"] == {names.MANAGED_BY_LABEL: "fluence"}
    data = yaml.safe_load(configmap["data"][names.BACKENDS_CONFIGMAP_KEY])
    assert data == {
        "garnet": {"price_per_shot": 0.00145, "qubits": 20, "queue": 3, "source": "scripted-api",
                   "status": "online", "updated": "2026-11-30T13:00:00Z"},
        "torino": {"queue": 250, "source": "scripted", "status": "offline",
                   "updated": "2026-11-30T13:00:00Z"},
    }
    read = figures.read_configmap(cluster, REF)
    assert read["garnet"].queue == 3
    assert read["garnet"].source == \
        "configmap fluence-system/fluence-backends (scripted-api, 2026-11-30T13:00:00Z)"


def test_a_failing_provider_keeps_its_backends_last_figures_and_their_age(
    cluster: FakeCluster,
) -> None:
    provider = ScriptedProvider({"garnet": BackendInfo("garnet", queue=3, status="online"),
                                 "torino": BackendInfo("torino", queue=250)})
    refresh_once(cluster, CONFIG, [provider], REF, now=lambda: "T1")
    provider.figures["garnet"] = BackendInfo("garnet", queue=7, status="online")
    provider.broken = {"torino"}
    refresh_once(cluster, CONFIG, [provider], REF, now=lambda: "T2")
    entries = figures.entries_of(stored(cluster), REF)
    assert entries["garnet"]["queue"] == 7 and entries["garnet"]["updated"] == "T2"
    assert entries["torino"] == {"queue": 250, "source": "scripted", "updated": "T1"}
    assert "nobody_speaks_for" not in entries


def test_a_hand_broken_configmap_is_written_afresh(cluster: FakeCluster) -> None:
    cluster.create(CONFIGMAPS, {"metadata": {"name": REF.name, "namespace": REF.namespace},
                                "data": {names.BACKENDS_CONFIGMAP_KEY: "garnet: [oops"}})
    provider = ScriptedProvider({"garnet": BackendInfo("garnet", queue=1)})
    refresh_once(cluster, CONFIG, [provider], REF, now=lambda: "T")
    assert figures.entries_of(stored(cluster), REF)["garnet"]["queue"] == 1


class Flaky(FakeCluster):
    """Raises the scripted errors from its first reads, then reads as the fake does, and
    says when a round has written the ConfigMap."""

    def __init__(self, errors: list[Exception]) -> None:
        self.errors: list[Exception] = []
        self.written = threading.Event()
        super().__init__()
        self.create("namespaces", {"metadata": {"name": names.FLUENCE_NAMESPACE}})
        self.written.clear()
        self.errors = errors

    def get(self, *args: Any, **kwargs: Any) -> Any:
        if self.errors:
            raise self.errors.pop(0)
        return super().get(*args, **kwargs)

    def create(self, *args: Any, **kwargs: Any) -> Any:
        created = super().create(*args, **kwargs)
        self.written.set()
        return created


def test_the_refresh_writes_at_start_and_not_again_until_its_interval() -> None:
    cluster = Flaky([])
    provider = ScriptedProvider({"garnet": BackendInfo("garnet", queue=3)})
    refresh = FiguresRefresh(cluster, lambda: CONFIG, [provider], REF, interval=60)
    refresh.start()
    try:
        assert cluster.written.wait(5), "the first round runs as the refresh starts"
        assert refresh.running and provider.asked == ["garnet", "torino"]
    finally:
        refresh.stop()
    assert not refresh.running and provider.asked == ["garnet", "torino"]


def test_a_failed_round_is_logged_and_the_next_one_writes(caplog: pytest.LogCaptureFixture,
                                                          ) -> None:
    cluster = Flaky([ApiError(403, "configmaps is forbidden"), KeyError("data")])
    provider = ScriptedProvider({"garnet": BackendInfo("garnet", queue=3)})
    refresh = FiguresRefresh(cluster, lambda: CONFIG, [provider], REF, interval=0.01)
    refresh.start()
    try:
        assert cluster.written.wait(5), "a round after the failures writes"
    finally:
        refresh.stop()
    assert figures.entries_of(stored(cluster), REF)["garnet"]["queue"] == 3
    forbidden = [r for r in caplog.records if "forbidden" in r.getMessage()]
    assert forbidden[0].levelno == logging.WARNING and not forbidden[0].exc_info
    assert "trying again in 0.01s" in forbidden[0].getMessage()
    broken = [r for r in caplog.records if "'data'" in r.getMessage()]
    assert broken[0].levelno == logging.ERROR and broken[0].exc_info  # a bug: its stack
    assert broken[0].getMessage().startswith("backend figures: the round failed")
