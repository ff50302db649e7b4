"""The shipped resources files say true things: a Braket device's region is its ARN's."""

from __future__ import annotations

from pathlib import Path

import yaml

from fluence_core.resource_config import parse_resource_config

REPO = Path(__file__).resolve().parent.parent


def _shipped() -> list[tuple[str, str]]:
    found = [(str(p.relative_to(REPO)), p.read_text()) for p in sorted(
        (REPO / "config").glob("*.yaml"))]
    configmap = yaml.safe_load((REPO / "deploy" / "fluence-resources.yaml").read_text())
    found.append(("deploy/fluence-resources.yaml", configmap["data"]["resources.yaml"]))
    return found


def test_every_shipped_braket_device_names_the_region_its_arn_is_in() -> None:
    checked = 0
    for where, text in _shipped():
        config = parse_resource_config(text, where)
        for resource in config.resources:
            attributes = dict(resource.attributes)
            arn, region = attributes.get("arn"), attributes.get("region")
            if arn and region:
                assert str(arn).split(":")[3] == region, (where, resource.name, arn, region)
                checked += 1
    assert checked >= 1
