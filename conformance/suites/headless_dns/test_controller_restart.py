"""HeadlessServiceDNS: the plugin's Services survive a restart of the controller.

The spec: the plugin "maintains two Headless Services" per Role instance, and OnRoleSync "must be
idempotent"; :mod:`.test_service_lifecycle` shows that across a resync. A restart is the other
way a controller meets Services it did not create in this process: a controller that rebuilds
what it finds at start would pass every resync test and still replace the Services (new UIDs,
a DNS blip for every client) at each rollout of the controller itself.

How the restart is done is the implementation's: the harness restarts a controller it runs; an
implementation the harness does not run declares a command in its support file
(``controllerRestart``, :mod:`conformance.framework.restart`); with neither the test is
inconclusive. That the *new* controller reconciles is proved, not assumed: after the restart the
ModelServing is scaled up and the new ServingGroup must get its Pods and Services, and only then
are the first instance's Service UIDs compared. Serial: the restart takes the webhook down for a
moment, which tests running beside it would see as refused requests.
"""

from __future__ import annotations

import functools
from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, expected_pod_count
from conformance.framework.plugin import SuiteState
from conformance.framework.restart import restart_controller

from . import USING_PLUGINS
from .instances import instances, uids
from .test_service_lifecycle import _service_uids, _start


@behaviour(
    "dns/services/kept-across-controller-restart",
    "The Entry and Discovery Services of an existing Role instance MUST keep their UIDs across a restart of the "
    "implementation's controller, once the restarted controller has reconciled the ModelServing (a scale-up "
    "adding a ServingGroup with its own Services).",
    USING_PLUGINS,
    Feature.HEADLESS_SERVICE,
    serial=True,
)
def test_services_are_kept_across_a_controller_restart(ms: ModelServings, manifest: Any, suite: SuiteState) -> None:
    body = manifest("dns-pair")
    name = body["metadata"]["name"]
    before = _start(ms, body)
    original = _service_uids(ms, before)
    took = restart_controller(suite.controller_restart)
    ms.patch(name, {"spec": {"replicas": 2}})  # work only the restarted controller can do
    pods = ms.wait_pods(name, expected_pod_count(body, 2), wait="scale")
    ms.wait_settled(name, wait="scale")
    old_pods = {n for i in before for n in i.pods}
    added = [i for i in instances(ms, pods) if not set(i.pods) & old_pods]
    assert added, f"the scale-up after the restart added no Role instance; Pods {sorted(p.metadata.name for p in pods)}"
    for instance in added:  # the restarted controller runs the plugin: the new instance gets its Services
        ms.wait("services", f"Services {sorted(instance.services())} of the ServingGroup added after the restart",
                functools.partial(uids, ms, instance.services()), lambda seen: all(seen.values()))  # fmt: skip
    ms.holds(
        f"Services {sorted(original)} of the first Role instance keeping their UIDs {original} after a controller "
        f"restart ({took:.1f}s, {suite.controller_restart.source if suite.controller_restart else ''}) and a "
        "scale-up the restarted controller carried out",
        lambda: _service_uids(ms, before),
        lambda seen: seen == original,
    )
