"""bench_webhook's floor with a patch answers what Fluence's webhook answers, without a PodGroup.

The benchmark prices "any mutation" with a do-nothing webhook returning Fluence's
patch; that figure means something only while the two patches stay the same.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from fluence_core.kube.fake import FakeCluster
from fluence_core.plugins import get_plugin_manager
from fluence_core.settings import load_settings
from fluence_core.webhook import build_service

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_webhook.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_webhook", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _review(bench: ModuleType, shape: str) -> bytes:
    pod = json.loads(bench.pod_body("p-0", 0, shape))
    pod["metadata"]["namespace"] = "ns"
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": {"uid": "u1", "operation": "CREATE", "namespace": "ns",
                                   "resource": {"group": "", "version": "v1",
                                                "resource": "pods"},
                                   "object": pod}}).encode()


def _patch(response: dict[str, Any]) -> Any:
    return json.loads(base64.b64decode(response["patch"])) if "patch" in response else None


def test_the_floor_with_a_patch_answers_as_fluence_does_and_makes_no_podgroup() -> None:
    bench = _bench()
    settings = load_settings()
    cluster = FakeCluster()
    cluster.create("namespaces", {"metadata": {"name": "ns"}})
    fluence = build_service(settings, get_plugin_manager(settings), cluster)
    for shape in ("gang", "single"):
        body = _review(bench, shape)
        theirs = fluence.review(body).response
        ours = bench.PatchingService().review(body).response
        assert theirs["allowed"] and ours["allowed"]
        assert _patch(ours) == _patch(theirs), shape
    assert _patch(ours) is None  # a lone pod: Fluence leaves it as it is
    assert cluster.list("podgroups", "ns").items == []  # the stored pod's, not the review's
