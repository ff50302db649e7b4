"""fluence_core.kube.meta: an object's metadata, read one way."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from fluence_core.kube.meta import (
    annotations_of,
    controller_reference,
    job_controller_reference,
    labels_of,
    metadata_of,
    metadata_or_none,
    owner_references_of,
    writable_metadata,
)

JOB = {"apiVersion": "batch/v1", "kind": "Job", "name": "vqe", "uid": "u-1",
       "controller": True}


def pod(**metadata: Any) -> dict[str, Any]:
    return {"metadata": metadata}


def test_an_object_without_metadata_reads_as_empty_everywhere() -> None:
    for obj in ({}, {"metadata": None}):
        assert metadata_of(obj) == {}
        assert labels_of(obj) == {}
        assert annotations_of(obj) == {}
        assert owner_references_of(obj) == []
        assert controller_reference(obj) is None


def test_labels_annotations_and_owners_are_the_objects_own() -> None:
    obj = pod(labels={"a": "1"}, annotations={"b": "2"}, ownerReferences=[JOB])
    assert labels_of(obj) == {"a": "1"}
    assert annotations_of(obj) == {"b": "2"}
    assert owner_references_of(obj) == [JOB]


def test_the_controller_is_the_reference_marked_controller_with_a_uid_and_a_name() -> None:
    owner = {**JOB, "controller": False}
    assert controller_reference(pod(ownerReferences=[owner, JOB])) == JOB
    assert controller_reference(pod(ownerReferences=[owner])) is None
    assert controller_reference(pod(ownerReferences=[{**JOB, "uid": ""}])) is None
    assert controller_reference(pod(ownerReferences=[{**JOB, "name": None}])) is None


def test_malformed_owner_references_name_no_controller() -> None:
    assert controller_reference(pod(ownerReferences={"controller": True})) is None
    assert controller_reference(pod(ownerReferences=["controller"])) is None


def test_only_a_batch_job_is_a_controlling_job() -> None:
    assert job_controller_reference(pod(ownerReferences=[JOB])) == JOB
    other_group = {**JOB, "apiVersion": "example.com/v1"}
    assert job_controller_reference(pod(ownerReferences=[other_group])) is None
    replica_set = {**JOB, "apiVersion": "apps/v1", "kind": "ReplicaSet"}
    assert job_controller_reference(pod(ownerReferences=[replica_set])) is None


def test_metadata_written_through_writable_metadata_stays_on_the_object() -> None:
    for obj in ({}, {"metadata": None}, pod(name="p")):
        writable_metadata(obj)["namespace"] = "ns"
        assert metadata_of(obj)["namespace"] == "ns"
    kept = pod(name="p")
    assert writable_metadata(kept) is kept["metadata"]


def test_metadata_of_an_object_of_any_shape_is_none_unless_both_are_mappings() -> None:
    for unreadable in ("pod", 7, None, ["pod"], {}, {"metadata": None},
                       {"metadata": "garbled"}, {"metadata": ["p"]}):
        assert metadata_or_none(unreadable) is None, unreadable
    assert metadata_or_none(pod(name="p")) == {"name": "p"}
    assert metadata_or_none({"metadata": {}}) == {}  # present and empty: readable


ROOT = Path(__file__).resolve().parents[2]
_INLINE = re.compile(
    r"""\.get\(\s*["'](metadata|labels|annotations|ownerReferences)["']\s*\)\s*or\s*(\{\}|\[\])""")
"""``obj.get("metadata") or {}`` (or its labels', annotations', owner references') spelled
out: what :func:`metadata_of`, :func:`labels_of`, :func:`annotations_of` and
:func:`owner_references_of` are for."""


def _shipped() -> list[Path]:
    found = list((ROOT / "fluence_core").rglob("*.py"))
    for package in (ROOT / "plugins").glob("*/*/"):
        if package.name != "tests" and (package / "__init__.py").exists():
            found += package.rglob("*.py")
    return [p for p in found if p != ROOT / "fluence_core" / "kube" / "meta.py"]


def test_no_shipped_module_spells_out_the_metadata_guard() -> None:
    inline = [f"{p.relative_to(ROOT)}:{n}" for p in _shipped()
              for n, line in enumerate(p.read_text().splitlines(), 1)
              if _INLINE.search(line) and "``" not in line]  # docs that name it may
    assert not inline, f"read metadata with fluence_core.kube.meta's accessors: {inline}"


def test_the_inline_guard_is_seen_however_it_is_spaced_or_quoted() -> None:
    for spelled in ('(pod.get("metadata") or {}).get("name")', "c.get('metadata')  or  {}",
                    'meta.get("labels") or {}', 'meta.get("ownerReferences") or []'):
        assert _INLINE.search(spelled)
    assert not _INLINE.search('pod.get("metadata")')
