"""fluence_core.resource_config: the resources.yaml model and its loud errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from fluence_core.errors import ResourceConfigError
from fluence_core.resource_config import (
    CLUSTER,
    ResourceConfig,
    load_resource_config,
    parse_resource_config,
)

REPO = Path(__file__).resolve().parent.parent


def parse(text: str) -> ResourceConfig:
    return parse_resource_config(text, "res.yaml")


def error_of(text: str) -> str:
    with pytest.raises(ResourceConfigError) as caught:
        parse(text)
    return str(caught.value)


# -- classical only -------------------------------------------------------------


def test_no_file_means_classical_only() -> None:
    assert load_resource_config(None).resources == ()


def test_an_empty_file_means_classical_only(tmp_path: Path) -> None:
    path = tmp_path / "resources.yaml"
    path.write_text("")
    assert load_resource_config(path).resources == ()


def test_a_comment_only_file_means_classical_only() -> None:
    assert parse("# nothing virtual here\n\n# still nothing\n").resources == ()


def test_an_empty_resources_list_means_classical_only() -> None:
    assert parse("resources: []\n").resources == ()


# -- the schema -----------------------------------------------------------------


def test_name_defaults_to_the_type_parent_to_cluster_and_count_to_one() -> None:
    (qpu,) = parse("resources:\n  - type: qpu\n").resources
    assert (qpu.type, qpu.name, qpu.parent, qpu.count) == ("qpu", "qpu", CLUSTER, 1)


def test_an_entry_keeps_its_name_count_and_parent() -> None:
    (lic,) = parse(
        "resources:\n  - {type: licence, name: matlab, count: 5, parent: node3}\n"
    ).resources
    assert (lic.name, lic.count, lic.parent) == ("matlab", 5, "node3")


def test_children_nest_under_with() -> None:
    (device,) = parse(
        "resources:\n  - type: qdevice\n    with:\n      - type: qpu\n        with:\n"
        "          - {type: qubit, count: 80}\n"
    ).resources
    (qpu,) = device.children
    (qubit,) = qpu.children
    assert (qpu.type, qubit.type, qubit.count) == ("qpu", "qubit", 80)


def test_types_list_own_and_descendant_types_once_each() -> None:
    config = parse(
        "resources:\n  - type: qdevice\n"
        "    with: [{type: qpu, with: [{type: qubit}]}, {type: qubit}]\n"
        "  - type: licence\n"
    )
    assert config.resources[0].types() == ["qdevice", "qpu", "qubit"]
    assert config.types == ["qdevice", "qpu", "qubit", "licence"]


def test_entries_record_their_path() -> None:
    config = parse("resources:\n  - type: a\n  - type: b\n    with: [{type: c}, {type: d}]\n")
    assert config.resources[1].children[1].path == "resources[1].with[1]"


def test_the_source_is_the_file_path(tmp_path: Path) -> None:
    path = tmp_path / "resources.yaml"
    path.write_text("resources: [{type: qpu}]\n")
    assert load_resource_config(path).source == str(path)


# -- attributes -----------------------------------------------------------------


def test_inline_attributes_are_strings() -> None:
    (qpu,) = parse(
        "resources:\n  - type: qpu\n    attributes: {qubits: 80, simulator: false}\n"
    ).resources
    assert qpu.attributes == {"qubits": "80", "simulator": "false"}


def test_attributes_can_name_a_registry_entry() -> None:
    (qpu,) = parse(
        "attributes:\n  aws-east: {provider: braket, region: us-east-1}\n"
        "resources:\n  - {type: qpu, attributes: aws-east}\n"
    ).resources
    assert qpu.attributes == {"provider": "braket", "region": "us-east-1"}


def test_attributes_inherit_downward() -> None:
    (device,) = parse(
        "resources:\n  - type: qdevice\n    attributes: {provider: braket}\n"
        "    with: [{type: qpu, with: [{type: qubit}]}]\n"
    ).resources
    assert device.children[0].children[0].attributes == {"provider": "braket"}


def test_a_child_value_overrides_the_inherited_one() -> None:
    (device,) = parse(
        "resources:\n  - type: qdevice\n    attributes: {provider: braket, region: us-east-1}\n"
        "    with: [{type: qpu, attributes: {region: eu-west-2}}]\n"
    ).resources
    assert device.children[0].attributes == {"provider": "braket", "region": "eu-west-2"}


def test_an_empty_string_removes_an_inherited_key() -> None:
    (device,) = parse(
        "resources:\n  - type: qdevice\n    attributes: {provider: braket, region: us-east-1}\n"
        "    with: [{type: qpu, attributes: {region: ''}}]\n"
    ).resources
    assert device.children[0].attributes == {"provider": "braket"}


def test_a_null_value_also_removes_an_inherited_key() -> None:
    (device,) = parse(
        "resources:\n  - type: qdevice\n    attributes: {provider: braket, region: us-east-1}\n"
        "    with: [{type: qpu, attributes: {region: null}}]\n"
    ).resources
    assert device.children[0].attributes == {"provider": "braket"}


def test_removal_applies_to_the_subtree_only() -> None:
    (device,) = parse(
        "resources:\n  - type: qdevice\n    attributes: {region: us-east-1}\n"
        "    with: [{type: qpu, name: a, attributes: {region: ''}}, {type: qpu, name: b}]\n"
    ).resources
    assert [c.attributes for c in device.children] == [{}, {"region": "us-east-1"}]
    assert device.attributes == {"region": "us-east-1"}


def test_a_registry_entry_used_by_a_child_overrides_inherited_values() -> None:
    (device,) = parse(
        "attributes:\n  west: {region: us-west-1}\n"
        "resources:\n  - type: qdevice\n    attributes: {provider: braket, region: us-east-1}\n"
        "    with: [{type: qpu, attributes: west}]\n"
    ).resources
    assert device.children[0].attributes == {"provider": "braket", "region": "us-west-1"}


def test_attribute_keys_are_collected_across_the_file() -> None:
    config = parse(
        "resources:\n"
        "  - {type: a, attributes: {provider: x}, with: [{type: b, attributes: {region: r}}]}\n"
    )
    assert config.attribute_keys == ("provider", "region")


# -- errors, each naming the file and the entry ---------------------------------


def test_a_missing_type_is_an_error_naming_file_and_path() -> None:
    message = error_of(
        "resources:\n  - type: qdevice\n    with:\n      - type: qpu\n      - count: 2\n"
    )
    assert message.startswith("res.yaml: resources[0].with[1]: ")
    assert "missing 'type'" in message


def test_a_missing_type_at_the_top_level_names_the_entry() -> None:
    assert error_of("resources:\n  - type: a\n  - name: b\n").startswith(
        "res.yaml: resources[1]: missing"
    )


def test_an_unknown_registry_name_is_an_error_naming_file_path_and_name() -> None:
    message = error_of(
        "attributes:\n  aws-east: {provider: braket}\n"
        "resources:\n  - type: qdevice\n    with: [{type: qpu, attributes: aws-west}]\n"
    )
    assert message.startswith("res.yaml: resources[0].with[0]: ")
    assert "'aws-west'" in message and "aws-east" in message


def test_an_unknown_registry_name_without_a_registry_says_so() -> None:
    assert "nothing" in error_of("resources:\n  - {type: qpu, attributes: aws-east}\n")


def test_content_without_a_resources_key_is_an_error_naming_the_file() -> None:
    message = error_of("attributes:\n  aws-east: {provider: braket}\n")
    assert message.startswith("res.yaml: ")
    assert "no 'resources' key" in message


def test_an_unknown_parent_is_an_error_naming_file_path_and_parent(tmp_path: Path) -> None:
    config = parse("resources:\n  - type: a\n  - {type: licence, parent: node9}\n")
    with pytest.raises(ResourceConfigError) as caught:
        config.check_parents({"node0", "node1"})
    message = str(caught.value)
    assert message.startswith("res.yaml: resources[1]: ")
    assert "unknown parent 'node9'" in message


def test_a_known_node_parent_passes_the_parent_check() -> None:
    parse("resources:\n  - {type: licence, parent: node1}\n").check_parents({"node0", "node1"})


def test_parent_on_a_child_entry_is_an_error() -> None:
    message = error_of("resources:\n  - type: a\n    with: [{type: b, parent: node0}]\n")
    assert message.startswith("res.yaml: resources[0].with[0]: ")


@pytest.mark.parametrize("count", ["0", "-1", "two", "1.5", "true"])
def test_a_count_that_is_not_a_positive_integer_is_an_error(count: str) -> None:
    message = error_of(f"resources:\n  - {{type: a, count: {count}}}\n")
    assert message.startswith("res.yaml: resources[0]: count")


def test_an_unknown_entry_key_is_an_error_naming_it() -> None:
    message = error_of("resources:\n  - {type: a, cuont: 2}\n")
    assert message.startswith("res.yaml: resources[0]: ") and "cuont" in message


def test_an_unknown_top_level_key_is_an_error() -> None:
    assert "ressources" in error_of("resources: []\nressources: []\n")


def test_a_type_with_unsafe_characters_is_an_error() -> None:
    assert error_of("resources:\n  - {type: 'q pu'}\n").startswith("res.yaml: resources[0]: type")


def test_a_non_scalar_attribute_value_is_an_error_naming_the_key() -> None:
    message = error_of("resources:\n  - {type: a, attributes: {region: [a, b]}}\n")
    assert "resources[0].attributes.region" in message


def test_a_non_mapping_entry_is_an_error() -> None:
    assert error_of("resources:\n  - qpu\n").startswith(
        "res.yaml: resources[0]: expected a mapping"
    )


def test_resources_that_is_not_a_list_is_an_error() -> None:
    assert "expected a list" in error_of("resources: {type: qpu}\n")


def test_with_that_is_not_a_list_is_an_error() -> None:
    assert "resources[0].with" in error_of("resources:\n  - {type: a, with: {type: b}}\n")


def test_a_document_that_is_not_a_mapping_is_an_error() -> None:
    assert error_of("- type: qpu\n").startswith("res.yaml: ")


def test_invalid_yaml_is_an_error_naming_the_file() -> None:
    assert error_of("resources: [\n").startswith("res.yaml: not valid YAML")


def test_a_registry_that_is_not_a_mapping_is_an_error() -> None:
    assert "attributes" in error_of("attributes: [a]\nresources: []\n")


def test_an_unreadable_file_is_an_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    with pytest.raises(ResourceConfigError, match="missing.yaml: cannot read"):
        load_resource_config(missing)


# -- the shipped examples -------------------------------------------------------


def test_the_braket_example_is_rigetti_cepheus_qdevice_qpu_and_80_qubits() -> None:
    (device,) = load_resource_config(REPO / "config" / "resources.yaml").resources
    (qpu,) = device.children
    (qubits,) = qpu.children
    assert (device.type, device.name) == ("qdevice", "rigetti_cepheus")
    assert (qpu.type, qubits.type, qubits.count) == ("qpu", "qubit", 80)
    assert qubits.attributes["provider"] == "braket"
    assert qubits.attributes["region"] == "us-west-1"


def test_the_ibm_qrmi_example_loads_two_backends() -> None:
    config = load_resource_config(REPO / "config" / "resources-ibm.yaml")
    assert [r.name for r in config.resources] == ["ibm_torino", "ibm_fez"]
    assert {r.attributes["provider"] for r in config.resources} == {"qrmi"}


@pytest.mark.parametrize(
    "example", sorted((REPO / "config").glob("resources*.yaml")), ids=lambda p: p.name
)
def test_every_shipped_resources_file_is_valid(example: Path) -> None:
    assert load_resource_config(example).resources
