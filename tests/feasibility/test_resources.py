"""fluence_core.feasibility.resources: requests counted as kube-scheduler counts them."""

from __future__ import annotations

from typing import Any

import pytest

from fluence_core.feasibility.resources import pod_requests


def _container(name: str, restart: str | None = None, **requests: str) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "resources": {"requests": dict(requests)}}
    if restart:
        body["restartPolicy"] = restart
    return body


@pytest.mark.parametrize(("spec", "expected"), [
    ({"containers": [_container("a", cpu="100m")]}, {"cpu": 100}),
    ({"containers": [_container("a", cpu="0.25")]}, {"cpu": 250}),
    ({"containers": [_container("a", cpu="1")]}, {"cpu": 1000}),
    ({"containers": [_container("a", cpu="100m"), _container("b", cpu="150m", memory="1Ki")]},
     {"cpu": 250, "memory": 1024}),
    ({"containers": [_container("a", cpu="1500u")]}, {"cpu": 2}),      # rounded up to a millicore
    # init containers run one at a time: the larger of their peak and the app sum
    ({"containers": [_container("a", cpu="100m")],
      "initContainers": [_container("i", cpu="2"), _container("j", cpu="500m")]}, {"cpu": 2000}),
    ({"containers": [_container("a", cpu="3")],
      "initContainers": [_container("i", cpu="2")]}, {"cpu": 3000}),
    # a restartable init container (sidecar) runs beside everything after it
    ({"containers": [_container("a", cpu="1")],
      "initContainers": [_container("s", "Always", cpu="500m"), _container("i", cpu="2")]},
     {"cpu": 2500}),
    ({"containers": [_container("a", cpu="1")],
      "initContainers": [_container("s", "Always", cpu="500m")]}, {"cpu": 1500}),
    ({"containers": [_container("a", cpu="1")], "overhead": {"cpu": "250m", "memory": "10"}},
     {"cpu": 1250, "memory": 10}),
    ({"containers": [_container("a", cpu="1", memory="1Gi")],
      "resources": {"requests": {"cpu": "3"}}}, {"cpu": 3000, "memory": 2**30}),  # pod-level
    ({"containers": [_container("a", **{"example.com/fpga": "2", "hugepages-2Mi": "4Mi",
                                       "ephemeral-storage": "1G"})]},
     {"example.com/fpga": 2, "hugepages-2Mi": 4 * 2**20, "ephemeral-storage": 10**9}),
])
def test_pod_requests(spec: dict[str, Any], expected: dict[str, int]) -> None:
    assert pod_requests({"spec": spec}, "pod p") == expected


def test_limits_stand_in_for_absent_requests() -> None:
    spec = {"containers": [{"name": "a", "resources": {"limits": {"cpu": "2", "memory": "1"},
                                                       "requests": {"memory": "1"}}}]}
    assert pod_requests({"spec": spec}, "pod p") == {"cpu": 2000, "memory": 1}


def test_a_bad_quantity_names_the_pod_container_and_resource() -> None:
    spec = {"containers": [{"name": "a", "resources": {"requests": {"cpu": "lots"}}}]}
    with pytest.raises(ValueError, match=r"pod p\.containers\[0\]\.requests: cpu"):
        pod_requests({"spec": spec}, "pod p")
