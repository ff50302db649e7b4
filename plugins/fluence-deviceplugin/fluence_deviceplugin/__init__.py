"""fluence-deviceplugin: advertise Fluence's virtual types to the kubelet.

A pod asking for ``fluxion.flux-framework.org/qpu`` must pass the kubelet's
admission and kube-scheduler's NodeResourcesFit, both of which only count
extended resources a device plugin advertised. This distribution runs one
kubelet device plugin (API ``v1beta1``) per virtual type of the resources
config; the counts are quotas, the real limit is the Fluence resource graph.

Public surface: :class:`DevicePluginManager` (run it) and
:class:`TypePluginServer` (one type's gRPC server).
"""

from __future__ import annotations

from fluence_deviceplugin.manager import DevicePluginManager
from fluence_deviceplugin.server import TypePluginServer

__version__ = "0.1.0"

__all__ = ["DevicePluginManager", "TypePluginServer", "__version__"]
