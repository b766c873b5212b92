"""``kthena-conformance run``, split by responsibility.

:mod:`.options` what a run is asked to do; :mod:`.orchestration` the run end to end (validate,
provision, deploy, preflight, passes, report) as a sequence of :mod:`.planning` (declaration,
launch, dry run), :mod:`.passes` (the pytest subprocesses) and :mod:`.finish` (report, verdicts,
exit code); :mod:`.preflight` what the cluster must provide before any test; :mod:`.accelerators`
capability files, device node pools and fake-device faults; :mod:`.deploy` starting the reference
controller. :mod:`conformance.runner` re-exports the public names for older importers.
"""
