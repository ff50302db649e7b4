"""Fluence provider for AWS Braket (see README.md)."""

from fluence_braket.provider import BraketProvider, BraketTask

__all__ = ["BraketProvider", "BraketTask"]
