"""deploy/device-plugin.yaml runs this plugin where the kubelet looks, with little power."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from fluence_deviceplugin.settings import DevicePluginSettings

MANIFEST = Path(__file__).resolve().parents[3] / "deploy" / "device-plugin.yaml"


@pytest.fixture(scope="module")
def pod_spec() -> dict[str, Any]:
    [daemonset] = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d["kind"] == "DaemonSet"]
    spec: dict[str, Any] = daemonset["spec"]["template"]["spec"]
    return spec


def test_it_runs_the_deviceplugin_command_on_the_kubelets_directory(
    pod_spec: dict[str, Any],
) -> None:
    [container] = pod_spec["containers"]
    assert container["command"] == ["fluence", "deviceplugin"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    default_dir = str(DevicePluginSettings().dir)
    assert env["FLUENCE_DEVICE_PLUGIN_DIR"] == default_dir
    [host] = [v for v in pod_spec["volumes"] if "hostPath" in v]
    assert host["hostPath"]["path"] == default_dir
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts[host["name"]] == default_dir
    config_dir = str(Path(env["FLUENCE_RESOURCES"]).parent)
    assert config_dir in mounts.values(), (
        "the resources config must be mounted where FLUENCE_RESOURCES points"
    )
    assert not any("subPath" in m for m in container["volumeMounts"]), (
        "a subPath mount never sees ConfigMap edits"
    )


def test_it_asks_for_no_more_power_than_creating_sockets_needs(pod_spec: dict[str, Any]) -> None:
    assert pod_spec["automountServiceAccountToken"] is False
    assert not pod_spec.get("hostNetwork") and not pod_spec.get("hostPID")
    [container] = pod_spec["containers"]
    security = container["securityContext"]
    assert security["privileged"] is False
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"]["drop"] == ["ALL"]
    assert "add" not in security["capabilities"]

