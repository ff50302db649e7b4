"""The ``fluence`` plugin: contributes ``fluence qpu-driver`` and ``fluence qpu-kubelet-plugin``.

Registered through the ``fluence`` entry-point group like every other plugin.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any, Optional

import typer

from fluence_core.api import (
    FluenceError, PluginSettings, connect_cluster, hookimpl, load_settings, logger,
)
from fluence_dra_qpu.settings import QpuDriverSettings


def qpu_driver(
    resources: Optional[Path] = typer.Option(
        None, "--resources",
        help="resources.yaml whose backends to publish (default: $FLUENCE_RESOURCES).",
    ),
    once: bool = typer.Option(
        False, "--once", help="Publish once and exit, instead of following the file.",
    ),
) -> None:
    """Publish the resources file's backends as DRA devices of qpu.fluxion.flux-framework.org."""
    from fluence_dra_qpu.driver import QpuDriver
    from fluence_dra_qpu.publisher import SlicePublisher

    settings = load_settings()
    own = QpuDriverSettings.load()
    path = resources if resources is not None else settings.graph.resources
    if path is None:
        raise FluenceError("qpu driver: no resources file (--resources or FLUENCE_RESOURCES)")
    driver = QpuDriver(SlicePublisher(connect_cluster()), path, own.interval)
    driver.step()  # a bad file at start exits here, named
    if once:
        return
    stop = threading.Event()

    def _stop(signum: int, _frame: Any) -> None:
        logger.info("qpu driver: %s received; stopping (the slices stay)",
                    signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    stop.wait(own.interval)
    driver.run(stop)


def qpu_kubelet_plugin(
    resources: Optional[Path] = typer.Option(
        None, "--resources",
        help="resources.yaml the driver publishes (default: $FLUENCE_RESOURCES).",
    ),
) -> None:
    """Prepare QPU claims for this node's kubelet: a CDI spec with FLUXION_BACKEND per claim."""
    from fluence_dra_qpu.kubelet import KubeletPlugin, Preparer

    settings = load_settings()
    own = QpuDriverSettings.load()
    path = resources if resources is not None else settings.graph.resources
    if path is None:
        raise FluenceError("qpu kubelet plugin: no resources file (--resources or "
                           "FLUENCE_RESOURCES)")
    plugin = KubeletPlugin(Preparer(connect_cluster(), path, own.cdi_dir),
                           own.registry_dir, own.plugin_dir)
    stop = threading.Event()

    def _stop(signum: int, _frame: Any) -> None:
        logger.info("qpu kubelet plugin: %s received; removing sockets",
                    signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        plugin.start()
        plugin.run(stop, own.interval)
    except OSError as error:
        raise FluenceError(f"qpu kubelet plugin cannot serve: {error}") from None
    finally:
        plugin.close()


@hookimpl
def fluence_settings() -> list[type[PluginSettings]]:
    return [QpuDriverSettings]


@hookimpl
def fluence_cli(app: typer.Typer) -> None:
    app.command(name="qpu-driver")(qpu_driver)
    app.command(name="qpu-kubelet-plugin")(qpu_kubelet_plugin)
