"""Fluence admission control for hybrid quantum groups (see README.md)."""

from fluence_admission.control import AdmissionControl, Budget, MarkHandler

__all__ = ["AdmissionControl", "Budget", "MarkHandler"]
