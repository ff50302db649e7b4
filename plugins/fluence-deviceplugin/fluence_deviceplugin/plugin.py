"""The ``fluence`` plugin: contributes the ``fluence deviceplugin`` command.

Registered through the ``fluence`` entry-point group like every other plugin.
grpc is imported only when the command runs, so every other ``fluence``
command starts without paying for it.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any, Optional

import typer

from fluence_core.api import FluenceError, PluginSettings, hookimpl, load_settings, logger
from fluence_deviceplugin.settings import DevicePluginSettings


def deviceplugin(
    resources: Optional[Path] = typer.Option(
        None,
        "--resources",
        help="resources.yaml whose types to advertise (default: $FLUENCE_RESOURCES).",
    ),
    plugin_dir: Optional[Path] = typer.Option(
        None,
        "--dir",
        help="The kubelet's device-plugins directory (default: $FLUENCE_DEVICE_PLUGIN_DIR).",
    ),
    capacity: Optional[int] = typer.Option(
        None,
        "--capacity",
        min=1,
        help="Devices per type (default: $FLUENCE_DEVICE_PLUGIN_CAPACITY).",
    ),
) -> None:
    """Advertise every virtual type to the kubelet as fluxion.flux-framework.org/<type>."""
    from fluence_deviceplugin.manager import DevicePluginManager

    settings = load_settings()  # the fluence app has checked it and set the log level
    own = DevicePluginSettings.load()  # a bad FLUENCE_DEVICE_PLUGIN_* exits 2, named
    manager = DevicePluginManager.from_settings(
        settings, own, resources=resources, plugin_dir=plugin_dir, capacity=capacity)
    stop = threading.Event()

    def _stop(signum: int, _frame: Any) -> None:
        logger.info("device plugin: %s received; removing sockets", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        manager.start()
    except (FluenceError, OSError, ValueError) as error:
        manager.close()
        raise FluenceError(f"device plugin cannot start: {error}") from None
    manager.run(stop)


@hookimpl
def fluence_settings() -> list[type[PluginSettings]]:
    return [DevicePluginSettings]


@hookimpl
def fluence_cli(app: typer.Typer) -> None:
    app.command(name="deviceplugin")(deviceplugin)
