"""fluence_core.api: plugins import the public API and nothing else of the core.

A plugin's package code may import :mod:`fluence_core.api` only; its tests may
also import :mod:`fluence_core.testing` (the harnesses and fixtures). The check
reads every Python file under ``plugins/`` and ``examples/`` with ``ast``, so a
plugin that reaches into an internal module fails here, naming file and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

import fluence_core.api as api

REPO = Path(__file__).resolve().parent.parent
PLUGIN_ROOTS = [REPO / "plugins", REPO / "examples"]
PACKAGE_ALLOWED = {"fluence_core.api"}
TEST_ALLOWED = {"fluence_core.api", "fluence_core.testing"}
GENERATED = ("_pb2.py", "_pb2_grpc.py")


def core_imports(source: str) -> list[tuple[int, str]]:
    """``(line, module)`` for every import of ``fluence_core`` or one of its modules."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "fluence_core":  # from fluence_core import api / names / ...
                found += [(node.lineno, f"fluence_core.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, node.module))
    return [(line, module) for line, module in found
            if module == "fluence_core" or module.startswith("fluence_core.")]


def is_test_file(path: Path) -> bool:
    return "tests" in path.parts or path.name == "conftest.py"


def plugin_files() -> list[Path]:
    return sorted(path for root in PLUGIN_ROOTS for path in root.rglob("*.py")
                  if ".venv" not in path.parts and not path.name.endswith(GENERATED))


def test_the_scan_sees_every_first_party_plugin() -> None:
    scanned = {path.relative_to(REPO).parts[1] for path in plugin_files()
               if path.relative_to(REPO).parts[0] == "plugins"}
    assert scanned >= {"fluence-admission", "fluence-braket", "fluence-deviceplugin",
                       "fluence-flux", "fluence-fluxion", "fluence-qrmi"}


def test_core_imports_sees_every_spelling_of_an_internal_import() -> None:
    source = (
        "import fluence_core.graph\nfrom fluence_core import names\n"
        "from fluence_core.kube.patch import pointer\nfrom fluence_core.api import hookimpl\n"
        "import json\n"
    )
    assert core_imports(source) == [(1, "fluence_core.graph"), (2, "fluence_core.names"),
                                    (3, "fluence_core.kube.patch"), (4, "fluence_core.api")]


def test_plugins_import_only_the_public_api() -> None:
    offences = []
    for path in plugin_files():
        allowed = TEST_ALLOWED if is_test_file(path) else PACKAGE_ALLOWED
        for line, module in core_imports(path.read_text()):
            if module not in allowed:
                offences.append(f"{path.relative_to(REPO)}:{line} imports {module}")
    assert not offences, "plugins must import fluence_core.api only:\n" + "\n".join(offences)


def test_every_exported_name_resolves() -> None:
    missing = [name for name in api.__all__ if not hasattr(api, name)]
    assert not missing


def test_the_patch_helpers_are_public() -> None:
    pod = {"metadata": {"annotations": {}}}
    ops: api.JsonPatch = [{"op": "add", "path": api.pointer("metadata", "annotations", "a/b"),
                           "value": "1"}]
    assert ops[0]["path"] == "/metadata/annotations/a~1b"
    assert api.apply_patch(pod, ops) == {"metadata": {"annotations": {"a/b": "1"}}}


def test_add_all_to_list_adds_only_the_missing_items_and_creates_an_absent_list_once() -> None:
    items = [{"name": "a"}, {"name": "b"}]
    assert api.add_all_to_list({}, "/spec", "volumes", items) == [
        {"op": "add", "path": "/spec/volumes", "value": items}]
    assert api.add_all_to_list({"volumes": [{"name": "a"}]}, "/spec", "volumes", items) == [
        {"op": "add", "path": "/spec/volumes/-", "value": {"name": "b"}}]
    assert api.add_all_to_list({"volumes": items}, "/spec", "volumes", items) == []


def test_no_object_is_exported_under_two_names() -> None:
    """One name per thing: an old name kept beside a new one (an alias) is two ways to
    spell the same import, and a plugin author cannot tell which is meant."""
    by_object: dict[int, list[str]] = {}
    for name in api.__all__:
        exported = getattr(api, name)
        if isinstance(exported, (str, int, float)):  # equal constants are not aliases
            continue
        by_object.setdefault(id(exported), []).append(name)
    assert [names for names in by_object.values() if len(names) > 1] == []


def test_the_pod_accessors_say_what_they_read() -> None:
    qpu = api.names.extended_resource("qpu")
    pod = {"spec": {"schedulerName": "fluence", "containers": [
        {"name": "app", "resources": {"limits": {qpu: "1"}}}]}}
    assert api.pod_spec(pod)["schedulerName"] == "fluence"
    assert api.pod_spec({}) == {}
    assert api.is_quantum_pod(pod) is True
    assert api.is_quantum_pod({"spec": {"containers": [{"name": "app"}]}}) is False
