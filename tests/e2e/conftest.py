"""Fixtures for the end-to-end suite: a real kube-apiserver from ``KUBEBUILDER_ASSETS``.

The control plane starts once per session (about three seconds) and every test
works in a namespace of its own. Without the assets every test that needs the
server is skipped with the reason, so ``pytest`` stays green on a laptop.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from fluence_core.kube.client import KubeCluster
from fluence_core.testing_apiserver import ApiServer, ensure_namespace, find_assets, start_apiserver

_namespaces = itertools.count()


@pytest.fixture(scope="session")
def apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """etcd + kube-apiserver (+ kube-controller-manager when present) for the session."""
    assets, reason = find_assets()
    if assets is None:
        pytest.skip(reason)
    with start_apiserver(assets, tmp_path_factory.mktemp("apiserver")) as server:
        yield server


@pytest.fixture(scope="session")
def kube(apiserver: ApiServer) -> Iterator[KubeCluster]:
    """A KubeCluster logged in as admin, with a rate limit that never gets in the way."""
    cluster = apiserver.cluster(qps=1000, burst=1000)
    yield cluster
    cluster.close()


@pytest.fixture
def kube_namespace(kube: KubeCluster) -> str:
    """A fresh namespace with its ``default`` ServiceAccount (pods need one to be admitted)."""
    return ensure_namespace(kube, f"e2e-{next(_namespaces)}")
