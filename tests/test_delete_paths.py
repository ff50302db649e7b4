"""Every place the shipped code deletes or evicts something is listed, with the only conditions
under which it acts; the pod deleters are in the README (issue 27).

The scan reads the source of ``fluence_core`` and of every plugin package (not their tests)
and finds each call of a function or method whose name starts with ``delete`` or ``evict``
or names an eviction (``delete``, ``delete_collection``, the generated client's
``delete_namespaced_pod`` and ``create_namespaced_pod_eviction``, ``evict_pod``), each call
given the verb ``"DELETE"``, and each call given a string naming the ``eviction``
subresource (a POST to ``.../pods/<name>/eviction`` deletes a pod too). A new call site
fails the test until it is added to :data:`DELETE_SITES`, and, if it deletes pods, to the
README's "When Fluence deletes a pod".
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DELETER = re.compile(r"^(delete|evict)|eviction", re.IGNORECASE)
"""A callee's name that deletes or evicts (``_evict``, a private helper, is found where it
calls the wrapper, not at each call of it)."""


@dataclass(frozen=True)
class DeleteSite:
    """One call that deletes: where (file and enclosing function), what, and when."""

    where: str
    deletes: str
    when: str


DELETE_SITES = (
    DeleteSite("fluence_core/scheduler/preempt.py:Preemptor._evict", "pods",
               "preemption: a pending group fits only once lower-priority pods are taken "
               "out; each victim's placement or gang has a lower priority and no pod of "
               "it is protected; the pods are deleted only after the group's match "
               "succeeded"),
    DeleteSite("fluence_core/sim/jobs.py:JobController.retry", "pods (simulated)",
               "fluence sim only: the simulated Job controller retries an attempt whose "
               "launcher gave up waiting for its peers"),
    DeleteSite("fluence_core/sim/kubelet.py:Kubelet._finish", "pods (simulated)",
               "fluence sim only: a finished pod, when the scenario sets "
               "lifecycle.delete_finished"),
    DeleteSite("fluence_core/webhook/controller/cleanup.py:PodGroupCleanup.sweep", "PodGroups",
               "a bare gang's PodGroup the webhook made, once no live pod points at it and "
               "it is older than FLUENCE_WEBHOOK_PODGROUP_GRACE"),
    DeleteSite("fluence_core/webhook/controller/controller.py:Controller._drop_job_controller_group.drop",
               "PodGroups",
               "a shared-quantum split pod's Job: the PodGroups that Job controls but Fluence's "
               "own (<group>, <group>-scout), the job controller's gang the split left empty"),
    DeleteSite("plugins/fluence-dra-qpu/fluence_dra_qpu/publisher.py:SlicePublisher._delete",
               "ResourceSlices",
               "the QPU driver's own slices only (its managed-by label and driver name): a "
               "pool's slices of an older generation once the newer ones are written, and "
               "the slices of a pool the resources file no longer has"),
    DeleteSite("fluence_core/kube/client.py:KubeCluster.delete", "anything",
               "the Kubernetes wrapper's own DELETE: what its callers (this list) ask"),
    DeleteSite("fluence_core/testing_apiserver.py:webhook_beside",
               "webhook configurations", "the e2e test API server's teardown"),
)


def _sources() -> list[Path]:
    roots = [REPO / "fluence_core"]
    for plugin in sorted((REPO / "plugins").iterdir()):
        roots += [p for p in plugin.iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    return sorted(p for root in roots for p in root.rglob("*.py") if "tests" not in p.parts)


class _Finder(ast.NodeVisitor):
    def __init__(self, relative: str) -> None:
        self.relative = relative
        self.scope: list[str] = []
        self.found: list[str] = []

    def _enter(self, node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_ClassDef = visit_FunctionDef = visit_AsyncFunctionDef = _enter

    def visit_Call(self, node: ast.Call) -> None:
        callee = (node.func.attr if isinstance(node.func, ast.Attribute)
                  else node.func.id if isinstance(node.func, ast.Name) else "")
        given = [a for arg in [*node.args, *(k.value for k in node.keywords)]
                 for a in ast.walk(arg) if isinstance(a, ast.Constant)
                 and isinstance(a.value, str)]
        verb = any(a.value == "DELETE" for a in given)
        eviction = any("eviction" in a.value.lower() for a in given)
        if DELETER.search(callee) or verb or eviction:
            self.found.append(f"{self.relative}:{'.'.join(self.scope) or '<module>'}")
        self.generic_visit(node)


def delete_call_sites() -> set[str]:
    sites: set[str] = set()
    for path in _sources():
        relative = path.relative_to(REPO).as_posix()
        finder = _Finder(relative)
        finder.visit(ast.parse(path.read_text(), relative))
        sites.update(finder.found)
    return sites


def test_every_delete_or_evict_call_in_the_shipped_code_is_listed_with_its_conditions() -> None:
    found = delete_call_sites()
    listed = {site.where for site in DELETE_SITES}
    assert not found - listed, (
        f"new delete/evict call sites {sorted(found - listed)}: list each in DELETE_SITES "
        "with the only conditions under which it acts (and in the README if it deletes pods)")
    assert not listed - found, f"listed sites that no longer delete: {sorted(listed - found)}"


@pytest.mark.parametrize("call", [
    "cluster.delete(PODS, 'p')",
    "core_v1.delete_namespaced_pod('p', 'ns')",
    "core_v1.delete_collection_namespaced_pod('ns')",
    "core_v1.create_namespaced_pod_eviction('p', 'ns', body)",
    "evict_pod(cluster, 'p')",
    "cluster.request('POST', f'/api/v1/namespaces/{ns}/pods/{name}/eviction', body)",
    "cluster.request('DELETE', path)",
    "cluster.create(PODS, {'kind': 'Eviction'}, subresource='eviction')",
], ids=["wrapper", "client", "collection", "client-eviction", "function", "subresource",
        "verb", "keyword"])
def test_the_scan_finds_a_delete_it_was_not_told_about(call: str) -> None:
    source = f"class Restorer:\n    def start(self, cluster):\n        {call}\n"
    finder = _Finder("fluence_core/scheduler/new.py")
    finder.visit(ast.parse(source))
    assert finder.found == ["fluence_core/scheduler/new.py:Restorer.start"]


def test_the_scan_does_not_flag_a_call_that_only_reads() -> None:
    source = "def look(cluster):\n    cluster.get(PODS, 'p')\n    self._evict(victim)\n"
    finder = _Finder("fluence_core/scheduler/new.py")
    finder.visit(ast.parse(source))
    assert finder.found == []


def test_the_readme_names_every_place_that_deletes_a_pod_and_when() -> None:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## When Fluence deletes a pod", 1)
    assert len(section) == 2, "README.md has a section 'When Fluence deletes a pod'"
    body = section[1].split("\n## ", 1)[0]
    for site in DELETE_SITES:
        if site.deletes.startswith("pods"):
            assert f"`{site.where}`" in body, f"README does not list {site.where}"
    assert "never" in body and "restart" in body, "the section says a restart never deletes"
