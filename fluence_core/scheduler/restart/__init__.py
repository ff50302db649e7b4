"""A restarted scheduler: what it holds again, and what it binds, before placing anything.

The durable records (annotations on each group's owner, :mod:`~fluence_core.scheduler.records`)
are all a restart has of what the last scheduler decided. :meth:`Scheduler.start
<fluence_core.scheduler.core.Scheduler.start>` reads them in this order, and every step
lives here:

1. :mod:`.trust` (:func:`~.trust.distrust`): a record is restored only when the pods it
   names bear it out (its owner's own pods, bound where it says, no bigger than they ask);
2. :meth:`RecordBook.restore <fluence_core.scheduler.records.RecordBook.restore>` holds
   the trusted records again in a fresh matcher;
3. :mod:`.fallback` (:class:`~.fallback.Fallback`): a record not trusted or not restorable
   becomes what the cluster shows: bound members held, unbound members released;
4. :mod:`.promises` (:class:`~.promises.PromiseKeeper`): each restored record's unbound
   members are bound where it says, where the filters let them go, or handed to step 3;
5. :mod:`.conservative` (:func:`~.conservative.hold_running`): how a bound pod is held
   without a record, from what it requests; the view pins other schedulers' pods with it.

The rule throughout, as kube-scheduler's: a bound pod is never deleted, moved or evicted.
"""
