"""The webhook's controller: what admitted objects need, made from the stored objects.

Informers keep watched copies of what admission looks up and hand stored objects to
:mod:`.controller`; writes go through the bounded background :mod:`.writer`; the loops
beside them repair lost PodGroups, clean up ended gangs' and publish the webhook's
match conditions.
"""
