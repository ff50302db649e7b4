"""Fluence provider for QRMI / qiskit-ibm-runtime (see README.md)."""

from fluence_qrmi.provider import QrmiProvider, QrmiTask

__all__ = ["QrmiProvider", "QrmiTask"]
