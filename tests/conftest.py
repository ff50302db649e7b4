"""Shared fixtures for the core tests.

The ``fluence_core.testing`` pytest plugin (entry point ``pytest11``) already
provides ``braket_config``, ``small_graph`` and ``pod_group``; these add the
file helpers the CLI and config tests need, and ``clean_python`` (a user's
container's interpreter) for the staging tests of ``runtime/`` and ``hybrid/``.
"""

from __future__ import annotations

import os
import subprocess
import sysconfig
import venv
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from fluence_core.testing import make_node_dict

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples" / "cluster"
CONFIG = REPO / "config"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No FLUENCE_* variable set, whatever the shell has (modules opt in with
    ``pytestmark = pytest.mark.usefixtures("clean_env")``; the matcher suite
    below needs FLUENCE_FLUXION_LIB, so this is not autouse)."""
    for variable in list(os.environ):
        if variable.upper().startswith("FLUENCE_"):
            monkeypatch.delenv(variable)


def node_list(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """What ``kubectl get nodes -o yaml`` prints."""
    return {"apiVersion": "v1", "kind": "List", "items": nodes}


@pytest.fixture
def write_yaml(tmp_path: Path) -> Callable[..., Path]:
    """Write objects (one document each) or raw text to a file under tmp_path."""

    def write(name: str, *documents: Any, text: str | None = None) -> Path:
        path = tmp_path / name
        if text is not None:
            path.write_text(text)
        else:
            path.write_text(yaml.safe_dump_all(list(documents), sort_keys=False))
        return path

    return write


@pytest.fixture
def make_node() -> Callable[..., dict[str, Any]]:
    """The shared Node builder, :func:`fluence_core.testing.make_node_dict`."""
    return make_node_dict


@pytest.fixture
def make_node_list() -> Callable[[list[dict[str, Any]]], dict[str, Any]]:
    return node_list


QRMI_PINNED_POD = """
apiVersion: v1
kind: Pod
metadata:
  name: bell
  annotations: {fluence.flux-framework.org/require-provider: qrmi}
spec:
  schedulerName: fluence
  containers:
    - name: app
      image: python:3.11
      resources:
        requests: {cpu: "1", fluxion.flux-framework.org/qpu: "1"}
        limits: {fluxion.flux-framework.org/qpu: "1"}
"""


@pytest.fixture
def qrmi_pinned_pod() -> str:
    """A one-qpu pod ``bell`` whose manifest pins ``require-provider: qrmi``: what the
    ``select`` tests (CLI, kubectl plugin, e2e) pin a backend onto, keeping that pin."""
    return QRMI_PINNED_POD


@pytest.fixture(scope="session")
def clean_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A brand-new venv's python that sees the vendor SDKs (a ``.pth`` line pointing at this
    venv's site-packages, which does not run their own ``.pth`` hooks, so Fluence itself is
    *not* importable): a user's container, with nothing of Fluence but what is staged."""
    root = tmp_path_factory.mktemp("clean-venv")
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root)
    site = Path(
        subprocess.check_output(
            [
                str(root / "bin" / "python"),
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ],
            text=True,
        ).strip()
    )
    (site / "vendor-sdk.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return root / "bin" / "python"
