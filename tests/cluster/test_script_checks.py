"""What the cluster scripts say a machine lacks, and what to do about it.

``local-cluster.sh cdi`` (containerd without CDI), ``local-cluster.sh missing``
(kubelet and kube-proxy, which envtest's assets lack; a ``CONTAINERD_BIN`` without
containerd) and ``images.sh check-flux`` (a Flux install that would make a broken
image), each against a stand-in: a fake ``containerd --version``, an assets folder,
a Flux prefix laid out in a temporary directory. No root, no cluster.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.cluster.harness import HERE

LOCAL_CLUSTER = HERE / "local-cluster.sh"
IMAGES = HERE / "images.sh"
KUBE = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")


def _run(script: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(script), *args], capture_output=True, text=True,
                          timeout=60, env={**os.environ, **env})


def _containerd(folder: Path, version_line: str) -> Path:
    """A folder whose containerd prints ``version_line``, beside a shim and a ctr."""
    folder.mkdir(parents=True)
    for name in ("containerd", "containerd-shim-runc-v2", "ctr"):
        (folder / name).write_text(f"#!/bin/sh\necho '{version_line}'\n")
        (folder / name).chmod(0o755)
    return folder


def test_a_containerd_before_1_7_is_named_as_having_no_cdi(tmp_path: Path) -> None:
    old = _containerd(tmp_path / "old",
                      "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+b1")
    said = _run(LOCAL_CLUSTER, "cdi", env={"CONTAINERD_BIN": str(old)}).stdout
    assert "containerd 1.6.20" in said and str(old / "containerd") in said
    assert "set CONTAINERD_BIN" in said


def test_containerd_1_7_and_2_x_have_cdi(tmp_path: Path) -> None:
    for name, line in {"v17": "containerd github.com/containerd/containerd v1.7.27 abc",
                       "v2": "containerd github.com/containerd/containerd/v2 2.4.0-beta "}.items():
        folder = _containerd(tmp_path / name, line)
        done = _run(LOCAL_CLUSTER, "cdi", env={"CONTAINERD_BIN": str(folder)})
        assert (done.returncode, done.stdout) == (0, ""), line


def test_kubelet_and_kube_proxy_missing_from_the_assets_come_with_how_to_build_them(
        tmp_path: Path) -> None:
    assets = tmp_path / "assets"
    assets.mkdir()
    for name in KUBE:
        (assets / name).write_text("#!/bin/sh\n")
        (assets / name).chmod(0o755)
    containerd = _containerd(tmp_path / "containerd", "containerd x v2.4.0 y")
    said = _run(LOCAL_CLUSTER, "missing", env={"KUBEBUILDER_ASSETS": str(assets),
                                               "CONTAINERD_BIN": str(containerd)}).stdout
    assert f"{assets}/kubelet" in said and f"{assets}/kube-proxy" in said
    assert 'make WHAT="cmd/kubelet cmd/kube-proxy"' in said
    for name in ("kubelet", "kube-proxy"):
        (assets / name).write_text("#!/bin/sh\n")
        (assets / name).chmod(0o755)
    said = _run(LOCAL_CLUSTER, "missing", env={"KUBEBUILDER_ASSETS": str(assets),
                                               "CONTAINERD_BIN": str(containerd)}).stdout
    assert str(assets) not in said and "make WHAT" not in said


def test_a_containerd_bin_without_containerd_is_named(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    said = _run(LOCAL_CLUSTER, "missing", env={"CONTAINERD_BIN": str(empty)}).stdout
    assert f"{empty}/containerd (CONTAINERD_BIN)" in said
    assert f"{empty}/containerd-shim-runc-v2 (CONTAINERD_BIN)" in said


def _flux(prefix: Path, compiled: str | None = None, sched: tuple[str, ...] = (
        "lib/flux/libreapi_cli.so", "lib/libfluxion-data.so.0.0.0")) -> Path:
    """A Flux install's layout under ``prefix``: flux-core (its pkg-config file naming
    ``compiled``, default ``prefix``) and the flux-sched files ``sched``."""
    for name in ("lib/libflux-core.so.2.0.0", *sched):
        (prefix / name).parent.mkdir(parents=True, exist_ok=True)
        (prefix / name).write_text("")
    pc = prefix / "lib" / "pkgconfig" / "flux-core.pc"
    pc.parent.mkdir(parents=True, exist_ok=True)
    pc.write_text(f"prefix={compiled or prefix}\nexec_prefix=${{prefix}}\n")
    return prefix


def _check_flux(prefix: Path) -> subprocess.CompletedProcess[str]:
    return _run(IMAGES, "check-flux", env={"FLUX_PREFIX": str(prefix)})


def test_a_complete_flux_install_passes_and_a_symlinked_prefix_is_read_through(
        tmp_path: Path) -> None:
    real = _flux(tmp_path / "flux-0.70")
    done = _check_flux(real)
    assert done.returncode == 0, done.stderr
    link = tmp_path / "flux"
    link.symlink_to(real)
    done = _check_flux(link)
    assert done.returncode == 0, done.stderr
    assert f"FLUX_PREFIX={link} is a link to {real}" in done.stderr


def test_flux_core_built_for_another_prefix_is_refused_naming_both(tmp_path: Path) -> None:
    prefix = _flux(tmp_path / "flux", compiled="/usr/local")
    done = _check_flux(prefix)
    assert done.returncode != 0
    assert "built with --prefix=/usr/local" in done.stderr
    assert f"Rebuild flux-core and flux-sched with --prefix={prefix}" in done.stderr


def test_a_flux_sched_without_its_least_libraries_is_refused_naming_them(
        tmp_path: Path) -> None:
    for present in (("lib/libfluxion-data.so.0.0.0",), ("lib/flux/libreapi_cli.so",)):
        prefix = _flux(tmp_path / present[0].replace("/", "_"), sched=present)
        done = _check_flux(prefix)
        assert done.returncode != 0
        assert "lib/flux/libreapi_cli.so and the libfluxion-data.so" in done.stderr


def test_a_prefix_without_flux_core_says_to_build_it_with_that_prefix(tmp_path: Path) -> None:
    prefix = tmp_path / "only-sched"
    (prefix / "lib" / "flux").mkdir(parents=True)
    (prefix / "lib" / "flux" / "libreapi_cli.so").write_text("")
    done = _check_flux(prefix)
    assert done.returncode != 0
    assert f"no flux-core under FLUX_PREFIX={prefix}" in done.stderr
    assert f"--prefix={prefix}" in done.stderr
