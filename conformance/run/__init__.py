"""``kthena-conformance run``, split by responsibility.

:mod:`.options` what a run is asked to do; :mod:`.orchestration` the run end to end (validate,
provision, deploy, preflight, passes, report); :mod:`.preflight` what the cluster must provide
before any test; :mod:`.accelerators` capability files, device node pools and fake-device faults;
:mod:`.deploy` starting the reference controller. :mod:`conformance.runner` re-exports the public
names for older importers.
"""
