"""Admission: an AdmissionReview in, a JSON patch or a refusal out, with no side effects.

:mod:`.review` runs admission control and the handlers in order on a working copy;
:mod:`.base` says what a handler is and the context it runs in; each built-in handler
is one module of :mod:`.handlers`, named as the handler. What an admitted object needs
in the cluster is made afterwards by the controller, from the stored object.
"""
