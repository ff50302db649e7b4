"""The two-queue feature: a quantum group's workers wait, gated, until the vendor runs its task.

A shared quantum group is split at admission (:mod:`~fluence_core.hybrid.split`,
the ``webhook-quantum`` plugin) into one scout that goes to the vendor's queue
and workers held behind a scheduling gate, the scout given the credentials it
needs (:mod:`~fluence_core.hybrid.credentials`). In the scout's pod, staging
(:mod:`~fluence_core.hybrid.stage`, :mod:`~fluence_core.hybrid.boot`) installs
the vendor's interceptor and the sidecar (:mod:`~fluence_core.hybrid.sidecar`)
follows the task's queue position; it reports
(:mod:`~fluence_core.hybrid.reporter`) to the webhook's report endpoint
(:mod:`~fluence_core.hybrid.endpoint`), and :mod:`~fluence_core.hybrid.release`
stamps the scout's backend on the workers and lifts their gate. The orphan
sweep (:mod:`~fluence_core.hybrid.orphans`) releases workers whose scout went
away without reporting. Disabling the ``webhook-quantum`` plugin stops the split,
the report route and the sweep together.
"""
