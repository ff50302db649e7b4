"""Built-in handler ``job-group``: a grouped Job's pods join Fluence's PodGroup from the start.

Under Kubernetes 1.36's ``WorkloadWithJob`` gate the job controller makes a
Workload and a PodGroup of N for an Indexed Job with parallelism = completions
> 1, unless the Job's pod template already names a scheduling group. A Job whose
template carries the group label ``fluence.flux-framework.org/group`` gets
``spec.template.spec.schedulingGroup.podGroupName: <group>`` here, so the
controller creates nothing, and the pod handlers (``gang``, ``quantum``) point
at Fluence's own PodGroups; a shared quantum group's scout is then re-pointed
at ``<group>-scout``. Without this handler (a Job admitted before the webhook
ran), the quantum split still deletes the controller's PodGroup, but the
controller makes it again.

The PodGroups the Job's pods will point at are made here too, after the answer
(the background writer, as for pods; never on a dry run), with the minCount the
pods would give them: the template's ``group-size``, else the Job's parallelism,
else its completions. A Job has one admission, its gang has N pods: made here,
the PodGroup costs the pods nothing (issue 20): a pod its Job controls that
points at its own group is not even sent to the webhook
(:attr:`~fluence_core.webhook.gang.GangHandler.match_condition`), and a PodGroup
lost afterwards is made again by the repair (:mod:`.repair`). A Job whose
template the pods' handlers would refuse (a bad group label or ``group-size``, a
Job over Fluence's group limit) gets no PodGroup here, nor its group named on
the template: its pods reach the webhook and are refused with the reason, as
before. A shared quantum Job that is not Indexed gets no PodGroup either (the
quantum split refuses its pods).

**Owned by the Job.** The PodGroup's owner reference names the Job and its uid,
so Kubernetes' garbage collector deletes it with the Job. The uid exists only
once the API server stored the Job, after every webhook answered, so the write
waits for it: a moment after the answer it takes the uid from the Job's first
pods if this webhook admitted one meanwhile (their owner reference carries it:
no call), else from the webhook's Job informer (:mod:`.informer`: the handler puts
the group label on the Job itself, which the informer selects by; for
:data:`WATCH_GRACE` seconds it waits for the watch rather than read), else reads
the Job (by name), again with a growing delay while it is not there, holding no
writer thread meanwhile (:class:`~.writer.NotYet`), for up to
:data:`JOB_PATIENCE` seconds; then it creates the PodGroup with its owner in one
call. A Job refused after this webhook answered (a later webhook, validation, a
quota) is never stored: no PodGroup is made for it. A Job named by
``generateName`` only (not found again by name), or admitted with no background
writer to wait (``fluence sim``, a full queue), gets its PodGroup unowned, made
at once as before: the cleanup (:mod:`.cleanup`) deletes it once its pods ended.

**One gang per group name.** A PodGroup of the group's name that exists already
is looked up on the Job's admission, in the webhook's PodGroup informer (no call;
one read while it is not synced, none per pod): one with another
minCount refuses the Job naming both sizes; one being deleted (its earlier gang
ending) refuses it too, until it is gone; one of the same size is the Job's.
"""

from __future__ import annotations

from typing import Any, Mapping

from fluence_core import hookimpl, names
from fluence_core.cluster_api import JOBS as JOB_RESOURCE
from fluence_core.cluster_api import PODGROUPS
from fluence_core.kube_errors import Conflict
from fluence_core.log import logger
from fluence_core.settings import Settings
from fluence_core.webhook import pods
from fluence_core.webhook._patch import JsonPatch, pointer
from fluence_core.webhook.base import AdmissionContext, AdmissionDenied, Handler
from fluence_core.webhook.writer import NotYet

JOBS = "batch/jobs"
WATCH_GRACE = 1.0
"""Seconds the PodGroup's write waits for the Job informer to deliver a labelled Job before
it reads the Job instead (the watch is normally milliseconds behind the API server)."""
JOB_PATIENCE = 30.0
"""Seconds the PodGroup's write waits for its Job to be stored: the API server gives the
whole admission of one object at most 30 s of webhook time."""


def _template(job: Mapping[str, Any]) -> Mapping[str, Any]:
    return (job.get("spec") or {}).get("template") or {}


def _group(job: Mapping[str, Any]) -> str | None:
    labels = (_template(job).get("metadata") or {}).get("labels") or {}
    value = labels.get(names.GROUP_LABEL)
    return str(value) if value else None


class JobGroupHandler(Handler):
    name = "job-group"
    order = 5
    resources = (JOBS,)

    def applies(self, job: Mapping[str, Any]) -> bool:
        spec = _template(job).get("spec") or {}
        group = _group(job)
        return (
            group is not None
            and spec.get("schedulerName") == names.SCHEDULER_NAME
            and (spec.get("schedulingGroup") or {}).get("podGroupName") in (None, "", group)
        )

    def mutate(self, job: Mapping[str, Any], ctx: AdmissionContext) -> JsonPatch:
        group = _group(job)
        assert group is not None
        size = _pods_size(job)
        if size is None:
            return []  # left unnamed: its pods reach the gang handler, which refuses them
        named = bool((_template(job).get("spec") or {}).get("schedulingGroup"))
        labelled = not named or names.GROUP_LABEL in ((job.get("metadata") or {}).get(
            "labels") or {})  # stored with the label the Job informer selects by
        _ensure_pod_groups(job, group, size, ctx, labelled)
        if named:
            return []  # named already: by the user, or by us on a re-invocation
        return [{"op": "add", "path": pointer("spec", "template", "spec", "schedulingGroup"),
                 "value": {"podGroupName": group}}, *_labelled(job, group)]


def _labelled(job: Mapping[str, Any], group: str) -> JsonPatch:
    """The group label on the Job itself, unless it has one: the webhook's Job informer
    watches Jobs by it, so the PodGroup's write finds the stored Job's uid without a read
    (:mod:`.informer`), and ``kubectl get jobs -l`` finds a group's Jobs."""
    labels = (job.get("metadata") or {}).get("labels")
    if isinstance(labels, Mapping) and names.GROUP_LABEL in labels:
        return []
    if not isinstance(labels, Mapping):
        return [{"op": "add", "path": pointer("metadata", "labels"),
                 "value": {names.GROUP_LABEL: group}}]
    return [{"op": "add", "path": pointer("metadata", "labels", names.GROUP_LABEL),
             "value": group}]


def _pod(job: Mapping[str, Any]) -> dict[str, Any]:
    template = _template(job)
    return {"metadata": template.get("metadata") or {}, "spec": template.get("spec") or {}}


def _pods_size(job: Mapping[str, Any]) -> int | None:
    """The gang size the Job's pods will give, None when their handlers would refuse them
    (a bad group label or ``group-size``, a Job over Fluence's group limit).

    Such a Job keeps its template as written: a pod pointing at its own group is
    not sent to the webhook (:attr:`GangHandler.match_condition`), so only an
    unnamed one reaches the handler that refuses it with the reason.
    """
    pod = _pod(job)
    if pods.shape_problem(pod) is not None:
        return None
    try:
        return (pods.positive_int_annotation(pod, names.GROUP_SIZE_ANNOTATION)
                or pods.job_size(job) or 1)
    except AdmissionDenied:
        return None


def _ensure_pod_groups(job: Mapping[str, Any], group: str, size: int,
                       ctx: AdmissionContext, labelled: bool) -> None:
    """Defer making the PodGroups the Job's pods will point at, as their handlers would
    (``labelled``: the Job will be stored with the group label, so the Job informer sees it).
    """
    if ctx.cluster is None:
        return  # nothing to make them with: the pods' handlers say so
    if not pods.is_shared_quantum(_pod(job)):
        wanted = [(group, pods.pod_group_min_count(group, group, size, None))]
    elif (job.get("spec") or {}).get("completionMode") != "Indexed":
        return  # the split needs completion indexes: the quantum handler refuses the pods
    else:
        wanted = [(target, pods.pod_group_min_count(target, group, size, role))
                  for target, role in ((group + names.SCOUT_GROUP_SUFFIX, names.ROLE_SCOUT),
                                       (group, names.ROLE_WORKER))]
    missing = [(target, count) for target, count in wanted if not _exists(ctx, target, count)]
    name = (job.get("metadata") or {}).get("name")
    for target, count in missing:
        if name:
            _make_owned(ctx, str(name), group, target, count, labelled)
        else:  # generateName: not found again by name; unowned, the cleanup's once it ends
            pods.ensure_pod_group(ctx, target, count)


def _exists(ctx: AdmissionContext, target: str, count: int) -> bool:
    """Whether PodGroup ``target`` exists already with minCount ``count``; refuses the Job when
    it exists with another, or is being deleted. One read, unless this webhook made or read
    it seconds ago (then none)."""
    pods.check_known_size(ctx, target, count)
    key = (PODGROUPS.plural, ctx.namespace, target)
    if ctx.recent.lookup(key)[0] or ctx.writing(key):
        return True
    existing = ctx.watched.pod_group(ctx.require_cluster(), ctx.namespace, target)
    if existing is None:
        return False
    has = pods.min_count_of(existing)
    if (existing.get("metadata") or {}).get("deletionTimestamp"):
        raise AdmissionDenied(
            f"PodGroup {ctx.namespace}/{target} (minCount {has}) is being deleted: its earlier"
            f" gang is ending. Create this Job again once it is gone, or choose another group"
            f" name")
    if has is not None and has != count:
        raise AdmissionDenied(pods.size_conflict(ctx.namespace, target, has, count))
    if not ctx.dry_run:
        ctx.recent.remember(pods.size_key(ctx.namespace, target), count)
    return True


def _make_owned(ctx: AdmissionContext, job: str, group: str, target: str, count: int,
                labelled: bool) -> None:
    """Defer making PodGroup ``target`` owned by Job ``job``, once the Job is stored. A
    ``labelled`` Job is looked for in the Job informer only, for :data:`WATCH_GRACE`
    seconds from the first look, then read."""
    namespace = ctx.namespace
    key = (PODGROUPS.plural, namespace, target)
    if not ctx.dry_run:
        ctx.recent.remember(pods.size_key(namespace, target), count)
    first_look: list[float] = []

    def create() -> None:
        cluster = ctx.require_cluster()
        known, uid = ctx.recent.lookup(pods.job_uid_key(namespace, job))  # from its pods
        if not known:
            now = ctx.clock()
            first_look[:] = first_look or [now]
            stored = ctx.watched.job(cluster, namespace, job, read_if_unseen=not labelled
                                     or now - first_look[0] >= WATCH_GRACE)
            meta = (stored or {}).get("metadata") or {}
            if stored is None or not meta.get("uid") or meta.get("deletionTimestamp") \
                    or _group(stored) != group:
                raise NotYet(f"Job {namespace}/{job} is not stored yet")
            uid = meta["uid"]
        owner = {"apiVersion": JOB_RESOURCE.api_version, "kind": JOB_RESOURCE.kind,
                 "name": job, "uid": str(uid)}
        try:
            cluster.create(PODGROUPS, pods.pod_group_body(target, namespace, count, owner),
                           namespace)
            logger.info("webhook: created PodGroup %s/%s (minCount %d) owned by Job %s",
                        namespace, target, count, job)
        except Conflict:
            pass  # made meanwhile by the Job's pods (with the same owner) or an earlier gang
        ctx.recent.remember(key)

    def unowned() -> None:  # no background writer to wait for the Job: as for bare pods
        try:
            ctx.require_cluster().create(
                PODGROUPS, pods.pod_group_body(target, namespace, count), namespace)
        except Conflict:
            pass
        ctx.recent.remember(key)

    ctx.defer(f"PodGroup {namespace}/{target} of Job {job}", create, background=key,
              patience=JOB_PATIENCE, fallback=unowned)


@hookimpl
def fluence_webhook_handlers(settings: Settings) -> list[Any]:
    return [JobGroupHandler()]
