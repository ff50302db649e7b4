"""Exceptions Fluence raises on purpose, each carrying a message meant for a user."""

from __future__ import annotations


class FluenceError(Exception):
    """Base of every error Fluence raises deliberately."""


class SettingsError(FluenceError):
    """A ``FLUENCE_*`` variable holds a value Fluence cannot use."""


class ResourceConfigError(FluenceError):
    """The resources file is malformed; the message names the file and the entry."""


class TopologyError(FluenceError):
    """Topology levels or a group's topology constraint cannot be used; the message says
    which field or annotation, and why."""


class KubeConfigError(FluenceError):
    """No usable way to reach the API server: no kubeconfig, no in-cluster account, a bad file."""


class UnknownResourceTypeError(FluenceError):
    """A pod asks for a virtual type the resource graph does not have."""


class MatcherError(FluenceError):
    """A matcher refused a request for a reason other than 'does not fit now'."""


class AdmissionDenied(FluenceError):
    """A webhook handler refuses the pod on purpose; the message is shown to the user."""
