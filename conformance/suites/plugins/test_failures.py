"""Plugins: a plugin that cannot run is never silently skipped.

Two ways a chain can name a plugin that cannot act on a Pod, from the manifest alone:

- a registered built-in whose config the plugin cannot decode (demo-pod-tweaks' ``env`` given as
  a string where the spec documents ``[]EnvVar``): "If any plugin returns an error, Pod creation
  fails and the controller retries". The config is "an opaque JSON blob interpreted by the plugin",
  so an implementation may refuse it at admission or accept it and fail Pod creation; either way
  no Pod may be created without the plugin, and an accepted one is reported by a Warning Event
  naming the plugin ("Track plugin execution status via Kubernetes Events"). The retry cannot be
  watched here: the chain is immutable, so nothing can make that config decodable later.
- a name no plugin is registered under ("must match a registered plugin name"): refused at
  admission, or reported on the ModelServing as a failure, by a Warning Event or a status
  condition naming it; a line in the controller's log is not visible to the ModelServing's user
  (spec reading 3; plugin status is tracked "via Kubernetes Events and Status conditions").
"""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, expect_refused, expected_pod_count

PLUGINS = "plugin-framework-and-headless-service.txt"
UNKNOWN = "conformance-not-a-registered-plugin"
DEMO = "demo-pod-tweaks"


@behaviour(
    "plugins/failures/undecodable-config",
    "A demo-pod-tweaks config the plugin cannot decode (env that is not a list of EnvVar) MUST be rejected at "
    "admission or, if accepted, MUST keep every Pod of the ModelServing from being created.",
    f"{PLUGINS}#Plugin Execution Order",
    Feature.DEMO_POD_TWEAKS,
)
def test_undecodable_config_blocks_pod_creation(ms: ModelServings, manifest: Any) -> None:
    body = manifest("plugins-two-roles")
    bad = body["metadata"]["name"] = "undecodable"
    body["spec"]["plugins"] = [{"name": "demo-pod-tweaks", "type": "BuiltIn", "config": {"env": "CUSTOM_VAR=x"}}]
    rejection = ms.try_create(body)
    if rejection is not None:
        expect_refused(rejection, "a demo-pod-tweaks config whose env is a string")
        return
    # Accepted: a healthy ModelServing next to it shows the controller is creating Pods meanwhile.
    control = manifest("plugins-two-roles")
    control["metadata"]["name"] = "control"
    control["spec"]["plugins"] = [{"name": "demo-pod-tweaks", "type": "BuiltIn", "config": {"env": []}}]
    ms.create(control)
    ms.wait_pods("control", expected_pod_count(control), ready=False, wait="pods-created")
    ms.holds(
        f"no Pod of {ms.ns}/{bad}, whose demo-pod-tweaks config cannot be decoded, while {ms.ns}/control got its Pods",
        lambda: [p.metadata.name for p in ms.pods(bad)],
        lambda pods: not pods,
    )


@behaviour(
    "plugins/failures/unregistered-plugin-visible",
    "A plugin name that matches no registered plugin MUST be rejected at admission or, if accepted, reported on "
    "the ModelServing by a Warning Event or a status condition naming the plugin.",
    f"{PLUGINS}#API Configuration",
    Feature.PLUGIN_FRAMEWORK,
)
def test_unregistered_plugin_is_refused_or_visible(ms: ModelServings, manifest: Any) -> None:
    body = manifest("core-small")
    name = body["metadata"]["name"]
    body["spec"]["plugins"] = [{"name": UNKNOWN, "type": "BuiltIn"}]
    rejection = ms.try_create(body)
    if rejection is not None:
        expect_refused(rejection, f"the unregistered plugin {UNKNOWN!r}")
        return

    def reported() -> list[str]:
        seen = [f"Event {e.reason}: {e.message}" for e in ms.events(name)
                if e.type == "Warning" and UNKNOWN in (e.message or "")]  # fmt: skip
        for c in (ms.get(name).get("status") or {}).get("conditions") or []:
            if UNKNOWN in f"{c.get('reason', '')} {c.get('message', '')}":
                seen.append(f"condition {c.get('type')}={c.get('status')} {c.get('reason')}: {c.get('message')}")
        return seen

    ms.wait(
        "events",
        f"a Warning Event or a status condition on {ms.ns}/{name} naming the unregistered plugin {UNKNOWN!r} "
        "(it was accepted at admission)",
        reported,
    )


@behaviour(
    "plugins/failures/undecodable-config-reported",
    "A demo-pod-tweaks config the plugin cannot decode (env that is not a list of EnvVar) MUST be rejected at "
    "admission or, if accepted, reported by a Warning Event on the ModelServing naming the plugin.",
    f"{PLUGINS}#Overview",
    Feature.DEMO_POD_TWEAKS,
)
def test_undecodable_config_is_refused_or_reported(ms: ModelServings, manifest: Any) -> None:
    # The built-in plugins' Pod mutations cannot fail once their config is decoded (spec reading
    # "A failing plugin"), so a config the plugin cannot decode is the one failure a manifest can
    # cause; "Track plugin execution status via Kubernetes Events" makes it visible to the user.
    body = manifest("plugins-two-roles")
    bad = body["metadata"]["name"] = "undecodable"
    body["spec"]["plugins"] = [{"name": DEMO, "type": "BuiltIn", "config": {"env": "CUSTOM_VAR=x"}}]
    rejection = ms.try_create(body)
    if rejection is not None:
        expect_refused(rejection, "a demo-pod-tweaks config whose env is a string")
        return
    ms.wait(
        "events",
        f"a Warning Event on {ms.ns}/{bad} naming the plugin {DEMO!r}, whose config (env given as a string) it "
        "cannot decode (the config was accepted at admission)",
        lambda: [
            f"{e.reason}: {e.message}" for e in ms.events(bad) if e.type == "Warning" and DEMO in (e.message or "")
        ],
    )
