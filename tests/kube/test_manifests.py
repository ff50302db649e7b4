"""fluence_core.kube.manifests: ordinary Kubernetes YAML files."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

from fluence_core.errors import FluenceError
from fluence_core.kube.manifests import read_objects

REPO = Path(__file__).resolve().parents[2]


def test_a_single_object_is_read(write_yaml: Callable[..., Path]) -> None:
    path = write_yaml("pod.yaml", {"kind": "Pod", "metadata": {"name": "a"}})
    assert read_objects(path) == [{"kind": "Pod", "metadata": {"name": "a"}}]


def test_every_document_of_a_multi_document_file_is_read(write_yaml: Callable[..., Path]) -> None:
    path = write_yaml("pods.yaml", {"kind": "Pod", "metadata": {"name": "a"}},
                      {"kind": "Pod", "metadata": {"name": "b"}})
    assert [o["metadata"]["name"] for o in read_objects(path)] == ["a", "b"]


def test_a_kubectl_list_dump_is_flattened(
    write_yaml: Callable[..., Path], make_node: Callable[..., dict[str, Any]],
    make_node_list: Callable[..., dict[str, Any]],
) -> None:
    path = write_yaml("nodes.yaml", make_node_list([make_node("n0"), make_node("n1")]))
    assert [o["metadata"]["name"] for o in read_objects(path, "Node")] == ["n0", "n1"]


def test_a_typed_list_kind_is_flattened(write_yaml: Callable[..., Path]) -> None:
    path = write_yaml(
        "nodes.yaml", {"kind": "NodeList", "items": [{"kind": "Node", "metadata": {"name": "n"}}]}
    )
    assert len(read_objects(path, "Node")) == 1


def test_objects_of_other_kinds_are_filtered_out(write_yaml: Callable[..., Path]) -> None:
    path = write_yaml("mixed.yaml", {"kind": "Pod", "metadata": {"name": "a"}},
                      {"kind": "Service", "metadata": {"name": "s"}})
    assert [o["kind"] for o in read_objects(path, "Pod")] == ["Pod"]


def test_objects_without_a_kind_are_taken_as_the_kind_asked_for(
    write_yaml: Callable[..., Path],
) -> None:
    path = write_yaml("bare.yaml", {"metadata": {"name": "a"}})
    assert len(read_objects(path, "Pod")) == 1


def test_empty_documents_and_scalars_are_skipped(write_yaml: Callable[..., Path]) -> None:
    path = write_yaml("sparse.yaml", text="---\n---\nhello\n---\nkind: Pod\nmetadata: {name: a}\n")
    assert len(read_objects(path)) == 1


def test_an_empty_file_has_no_objects(write_yaml: Callable[..., Path]) -> None:
    assert read_objects(write_yaml("empty.yaml", text="")) == []


def test_a_missing_file_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(FluenceError, match="nowhere.yaml: cannot read"):
        read_objects(tmp_path / "nowhere.yaml")


def test_invalid_yaml_is_an_error_naming_the_file(write_yaml: Callable[..., Path]) -> None:
    with pytest.raises(FluenceError, match="bad.yaml: not valid YAML"):
        read_objects(write_yaml("bad.yaml", text="kind: [Pod\n"))


def test_the_example_cluster_has_four_nodes() -> None:
    assert len(read_objects(REPO / "examples" / "cluster" / "nodes.yaml", "Node")) == 4
