"""An API server with kube-scheduler beside it, for the tests that compare Fluence with it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fluence_core.testing_apiserver import (
    ApiServer, find_assets, find_kube_scheduler, start_apiserver, start_kube_scheduler,
)


def with_kube_scheduler(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[ApiServer]:
    """A module's own API server (nodes are cluster-wide) with kube-scheduler running on it;
    the test skips, saying which, when either binary is missing."""
    assets, reason = find_assets()
    if assets is None:
        pytest.skip(reason)
    binary = find_kube_scheduler(assets)
    if binary is None:
        pytest.skip("kube-scheduler not found beside the API server nor in KUBE_SCHEDULER")
    with start_apiserver(assets, tmp_path_factory.mktemp(name), controller_manager=False) as server:
        start_kube_scheduler(server, binary)
        yield server
