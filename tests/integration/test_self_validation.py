"""Self-validation: every switchable fault of the reference controller is caught by the behaviour
it targets, on every run, at a cost that grows much slower than the number of faults.

Each fault in :data:`CAUGHT_BY` must make every behaviour of its row come out non-conformant (or,
for a SHOULD or MAY target, ``warning``, which never fails a run; the record's ``caughtAs`` says
which). What makes a catch mean something:

- the waits are the same as the control run's (``test_conformance_suite.py`` runs the whole suite
  against the healthy reference with ``kept_runs.WAIT_OVERRIDES`` too), so a behaviour that passes for the
  healthy controller within these waits and fails for the broken one is failed by the fault, not
  by a short deadline;
- every run goes through the same :func:`conformance.runner.run` a user runs: cluster, deploy,
  preflight, the pytest passes, the report;
- the fault is the only one its targets meet: faults run in *rounds* (tests/integration/
  selfval_rounds.py), one controller start each, every fault scoped to the namespaces of its own
  targets (``kthena-ref run --fault NAME@LABEL``); no behaviour is the target of two faults of a
  round, sentinel behaviours with no fault must pass beside them and the controller must not crash,
  else the round is split and run again; a fault whose targets do not all fail in a trusted round
  runs again alone, process-wide. Faults the CRD schema consults (:data:`UNSCOPABLE`, derived from
  the code) always run alone.

Cost: a round reuses a kept embedded cluster (one per xdist worker; ``make test`` runs this module
on several workers) and restarts only the controller; its behaviours run on several inner workers.
Faults that break behaviour the spec does not document cannot be caught by a spec-only suite; they
are listed in :data:`UNDETECTABLE` with the reason. Each fault's outcome goes to
``reports/self-validation/<fault>.json``; ``tests/conftest.py`` sums them up in
``reports/self-validation.json`` and on the terminal.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.framework.catalog import collect
from kthena_ref.faults import FAULTS
from tests.integration.kept_runs import kept_cluster
from tests.integration.selfval_rounds import Round, alone, plan_rounds
from tests.integration.selfval_runs import failures, label, prove

pytestmark = [pytest.mark.serial, pytest.mark.own_controller, pytest.mark.slow, pytest.mark.self_validation]


# fault -> behaviour ids (patterns) expected to come out non-conformant
CAUGHT_BY: dict[str, list[str]] = {
    "no-recovery": ["core/recovery/role-recreate-deleted-pod", "core/recovery/servinggroup-recreate-deleted-pod"],
    "none-recreates-restarted-pod": ["core/recovery/none-restarted-container"],
    "servinggroup-recreate-ignores-restarts": ["core/recovery/servinggroup-recreate-restarted-container"],
    "servinggroup-recreate-ignores-failures": ["core/recovery/servinggroup-recreate-failed-pod"],
    "role-recreate-rebuilds-group": [
        "core/recovery/role-recreate-other-roles-untouched",
        "core/recovery/role-recreate-failed-pod",
        "core/recovery/role-recreate-restarted-container",
    ],
    "restart-grace-ignored": ["core/recovery/restart-grace-period"],
    "stale-available-replicas": ["core/status/settled"],
    "no-entry-label": ["core/status/label-selector"],
    # issue 13, H4: scale-down order (SHOULD: caught as warnings), Role partition, Pod-template list-maps
    "scale-down-lowest-ordinal": ["core/servinggroup/scale-down-order"],
    "role-scale-down-highest-index": ["core/role/scale-down-order", "rollout/role/scale-down-order"],
    "group-partition-refilled-at-update": ["rollout/sg/partition-deleted-group-keeps-template"],
    "role-partition-refilled-at-update": ["rollout/role/partition-deleted-instance-keeps-template"],
    "pod-template-list-maps-enforced": ["core/pods/host-aliases-one-ip"],
    # issue 13, H3: the SHOULD halves split from MUST behaviours
    "label-selector-selects-all": ["core/status/label-selector-count"],
    "admission-message-without-field": ["core/admission/message-names-field"],
    "eviction-refused-forbidden": ["eviction/servinggroup/refusal-too-many-requests"],
    # issue 13, H6: schema faults (they reach the CRD the harness installs), Pods, status, revisions
    "no-schema-defaults": [
        "core/spec/defaults",
        "core/defaults/revision-history-limit",
        "rollout/defaults/servinggroup-rolling-update",
        "rollout/defaults/role-max-unavailable",
        "inplace/defaults/update-method",
        "eviction/defaults/protection-level",
        "plugins/defaults/type-built-in",
    ],
    "enums-not-validated": [
        "rollout/admission/type-enum",
        "eviction/admission/protection-level-enum",
        "core/admission/recovery-policy-enum",
        "inplace/update-method-enum",
        "plugins/framework/type-enum",
        "plugins/framework/scope-target-enum",
    ],
    "entry-template-optional": ["core/admission/entry-template-required"],
    "in-place-update-alias-recreates": ["inplace/update-method-spelling"],
    "worker-replicas-default-one": ["core/role/worker-replicas-omitted"],
    "container-resources-dropped": ["core/pods/template-carried", "gang/podgroup/min-resources"],
    "template-scheduler-name-wins": ["core/pods/scheduler-name"],
    "available-counts-unready": ["core/status/counters-unready", "rollout/status/counters-partition"],
    "current-revision-is-update": ["core/revisions/current-revision", "rollout/status/current-replicas-partition"],
    "no-status-at-zero-replicas": ["core/status/zero-replicas"],
    "emptied-group-wedged": [
        "core/recovery/servinggroup-recreate-delete-all-repeated",
        "dns/recovery/servinggroup-recreate-delete-all-repeated",
    ],
    "replicas-in-revision": ["core/revisions/role-scaling-keeps-revision"],
    "revision-not-owned": ["core/revisions/update-revision"],
    "revision-history-unbounded": ["core/revisions/history-limit-prunes"],
    "live-revision-pruned": ["core/revisions/live-revisions-kept"],
    "plugin-order-reversed": ["plugins/chain/list-order"],
    "chain-immutability-not-enforced": [
        "plugins/immutability/change-config",
        "plugins/immutability/reorder",
        "plugins/immutability/add-first-plugin",
        "plugins/immutability/change-scope",
        "plugins/immutability/remove-plugin",
        "plugins/immutability/equivalent-type-accepted",
    ],
    "unknown-plugin-accepted": ["plugins/failures/unregistered-plugin-visible"],
    "demo-env-replaces": ["plugins/demo-pod-tweaks/env-appended"],
    # issue 13, H7: no chain, scope forms, failing plugins, later Pods, more chain changes
    "omitted-plugins-implicit-headless": ["plugins/chain/omitted-means-no-chain"],
    "empty-plugins-implicit-headless": ["plugins/chain/empty-means-no-chain"],
    "scope-target-worker-ignored": ["plugins/scope/target-worker"],
    "scope-roles-ignored-with-target": ["plugins/scope/roles-and-target"],
    "scope-empty-roles-match-none": ["plugins/scope/empty-roles-all"],
    "scope-target-all-entry-only": ["plugins/scope/explicit-target-all", "plugins/demo-pod-tweaks/scope-roles"],
    "recreated-pods-skip-plugins": ["plugins/chain/recreated-pods-mutated"],
    "plugin-config-error-skips-plugin": ["plugins/failures/undecodable-config"],
    "unknown-plugin-logged-only": ["plugins/failures/unregistered-plugin-visible"],
    "chain-append-allowed": ["plugins/immutability/append-to-chain"],
    "chain-unlocked-after-rollout": [
        "plugins/immutability/after-rollout",
        "plugins/immutability/scale-to-zero-keeps-lock",
    ],
    "scope-roles-change-allowed": ["plugins/immutability/change-scope-roles"],
    "chain-unlocked-at-zero": ["plugins/immutability/add-first-at-zero"],
    # issue 31: scope.roles with whichever built-in the implementation supports
    "scope-roles-ignored": ["plugins/scope/roles-listed"],
    # issue 31: repeated env, port and pull-secret keys are a MAY (refusing them is fair), caught as a warning
    "repeated-env-collapsed": ["core/pods/repeated-list-keys"],
    # issue 13, H7: headless-service scope, layout and Service lifecycle
    "headless-scope-refused": ["dns/scope/target-all-accepted"],
    "headless-scope-roles-ignored": ["dns/scope/roles"],
    "discovery-selects-across-groups": ["dns/scope/no-cross-group-leakage"],
    "third-service-per-instance": ["dns/scope/two-services-per-instance"],
    "services-recreated-on-resync": ["dns/services/kept-on-resync"],
    "services-kept-on-group-removal": ["dns/services/removed-with-servinggroup"],
    "services-kept-on-role-scale-down": ["dns/services/removed-with-role-instance"],
    "terminating-service-blocks-role": ["dns/services/terminating-does-not-block-role"],
    "service-ownership-unchecked": ["dns/services/foreign-service-kept"],
    "legacy-dns-on-recreated-pods": ["dns/migration/no-plugin-no-dns-on-recreated-pods"],
    "failed-service-delete-not-retried": ["dns/services/failed-delete-retried"],
    "role-deletion-waits-for-services": ["dns/services/held-services-do-not-hold-the-instance"],
    "no-discovery-service": [
        "dns/discovery-service/lists-members",
        "dns/resolution/member-and-entry-addresses",
        "dns/scope/zero-workers",
    ],
    "entry-service-selects-all": ["dns/entry-service/selects-entry-only"],
    "wrong-entry-address": ["dns/entry-service/selects-entry-only", "dns/services/per-instance"],
    "services-not-published-before-ready": ["dns/services/publish-not-ready"],
    "services-not-recreated": ["dns/services/recreated"],
    "deletion-identity-ignored": ["dns/deletion/identity-changed"],
    "migration-layout-changed": ["dns/migration/legacy-layout-preserved", "dns/migration/lost-pod-keeps-layout"],
    "unavailable-rounds-up": ["rollout/sg/max-unavailable-percent-rounds-down"],
    "surge-ignored": ["rollout/sg/max-surge-percent-rounds-up", "rollout/sg/max-surge"],
    "partition-ignored": ["rollout/sg/partition", "rollout/sg/partition-percent-rounds-up"],
    "role-unchanged-recreated": ["rollout/role/unchanged-role-keeps-pods"],
    "coordination-ignored": ["rollout/coordination/max-skew", "rollout/coordination/dependencies"],
    "max-skew-any-form": ["rollout/coordination/max-skew-percent-only"],
    "coordination-participants-miss-last-role": ["rollout/coordination/every-role-by-default"],
    "skew-ratio-excludes-partition": ["rollout/coordination/partition-in-ratio"],
    "coordination-roles-list-ignored": ["rollout/coordination/listed-roles-only"],
    "coordination-dependencies-mutable": ["rollout/coordination/dependencies-immutable"],
    "dependency-capacity-dropped": ["rollout/coordination/dependency-capacity-retained"],
    "dependency-closure-direct-only": ["rollout/coordination/transitive-dependencies"],
    "unready-not-counted": ["rollout/sg/unready-counts-against-budget", "inplace/budget"],
    "default-max-unavailable-all": ["rollout/sg/default-max-unavailable"],
    "role-max-unavailable-default-all": ["rollout/role/default-max-unavailable"],
    "role-unavailable-rounds-up": ["rollout/role/max-unavailable-percent-rounds-down"],
    "role-surge-rounds-down": ["rollout/role/max-surge-percent-rounds-up"],
    "role-default-max-surge-one": ["rollout/role/default-max-surge"],
    "role-groups-one-at-a-time": ["rollout/role/all-groups-concurrently"],
    "role-partition-absolute-ignored": ["rollout/role/partition-absolute"],
    "role-rolling-ignores-servinggroup-recreate": ["rollout/role/servinggroup-recreate-recreates-group"],
    "group-rollout-uses-role-settings": ["rollout/sg/role-settings-ignored"],
    # helper roll (issue 13, second wave): a Role's partition under ServingGroupRollingUpdate, roleCoordination's scope
    "role-partition-honoured-under-servinggroup": ["rollout/sg/role-settings-ignored"],
    "coordination-only-first-group": ["rollout/coordination/per-servinggroup"],
    "zero-percentages-deadlock": ["rollout/sg/max-unavailable-zero-percentages"],
    "coordination-applied-under-servinggroup-rolling": ["rollout/coordination/not-under-servinggroup-rolling"],
    "recreate-updates-in-place": ["rollout/update-method/recreate-replaces-pods"],
    "update-method-default-in-place": ["rollout/update-method/default-recreate"],
    "in-place-recreates": ["inplace/image-only-keeps-uids", "inplace/rollback"],
    "in-place-ineligible-patched": ["inplace/fallback/ineligible-change"],
    "no-fallback-event": [
        "inplace/fallback/ineligible-change",
        "inplace/fallback/headless-service",
        "inplace/fallback/init-container-image",
    ],
    "no-progress-deadline": ["inplace/progress-deadline"],
    "eligibility-ignores-worker-replicas": ["inplace/eligibility/role-layout"],
    "eligibility-ignores-container-order": ["inplace/eligibility/containers"],
    "eligibility-ignores-restart-policy": ["inplace/eligibility/restart-policy"],
    "eligibility-ignores-pull-policy": ["inplace/eligibility/pull-policy-change"],
    "explicit-pull-policy-ignored": ["inplace/eligibility/images-stay-in-place"],
    "role-eligibility-whole-group": ["inplace/eligibility/per-role"],
    "eligibility-ignores-scheduler-name": ["inplace/eligibility/scheduler-name"],
    # helper gang (issue 13, second wave): gangPolicy / networkTopology under InPlace, rolePolicy, per-Role minimums
    "eligibility-ignores-gang-policy": ["inplace/eligibility/gang-policy"],
    "eligibility-ignores-network-topology": ["inplace/eligibility/network-topology"],
    "role-policy-not-in-podgroup": ["gang/podgroup/network-topology-role-policy"],
    "min-role-replicas-first-value": ["gang/podgroup/min-role-replicas-per-role"],
    "plugin-fallback-ignores-budget": ["inplace/fallback/headless-service-within-budget"],
    # issue 13, H5: readiness as the kubelet reports it (readiness gates, an image that cannot be pulled)
    "ready-ignores-readiness-gates": ["core/status/readiness-gates"],
    "in-place-ready-on-patch": ["inplace/unpullable-image-holds-the-rollout"],
    "eviction-budget-off-by-one": [
        "eviction/servinggroup/min-available",
        "eviction/servinggroup/concurrent",
        "eviction/servinggroup/drain",
        "eviction/servinggroup/during-rollout",
        "eviction/servinggroup/min-available-percent",
        "eviction/servinggroup/worker-disrupts-group",
    ],
    "role-eviction-budget-ignored": ["eviction/role/role-min-available"],
    "min-available-applied-under-role": ["eviction/role/min-available-ignored"],
    "role-min-available-applied-under-servinggroup": ["eviction/servinggroup/role-min-available-ignored"],
    "role-min-available-keys-unchecked": ["eviction/admission/role-min-available-keys"],
    # helper pd (issue 13, second wave): progressDeadlineSeconds per Role instance, per RecoveryPolicy, in place only
    "role-progress-deadline-ignored": ["inplace/progress-deadline/role-instance"],
    "deadline-servinggroup-recreate-narrowed": ["inplace/progress-deadline/servinggroup-recreate"],
    "deadline-role-recreate-pod-only": ["inplace/progress-deadline/role-recreate"],
    "deadline-none-recreates-role": ["inplace/progress-deadline/recovery-none"],
    "progress-deadline-applies-to-recreate": ["inplace/progress-deadline/in-place-only"],
    "progress-deadline-default-minimum": ["inplace/progress-deadline/default-not-minimum"],
    # helper pods (issue 13, second wave): the CRD's embedded PodSpec, a plugin config error reported by an Event
    "pod-spec-schema-outdated": ["core/pods/wide-pod-spec"],
    "plugin-config-error-logged-only": ["plugins/failures/undecodable-config-reported"],
    # helper dns (issue 13, second wave): cleanup ownership, replacement UIDs, opt-in migration, ENTRY_ADDRESS
    "instance-cleanup-unowned": ["dns/services/released-service-kept"],
    "service-replacement-unprotected": ["dns/deletion/replacement-service-kept"],
    "headless-addable": ["dns/migration/add-plugin-refused"],
    "entry-only-service-replaced": ["dns/migration/entry-only-service-kept"],
    "entry-pod-own-address": ["dns/entry-service/entry-pod-address"],
    # issue 13: a restart of the controller (the harness restarts the reference on request)
    "services-recreated-after-restart": ["dns/services/kept-across-controller-restart"],
    # helper init (issue 13, second wave): a restarted init container (a sidecar) under each recreate policy
    "servinggroup-recreate-ignores-init-restarts": ["core/recovery/servinggroup-recreate-restarted-init-container"],
    "role-recreate-ignores-init-restarts": ["core/recovery/role-recreate-restarted-init-container"],
    # slot admission (issue 13, third wave)
    # message-names-field (a SHOULD, caught as a warning) refuses a 13-character Role name and a maxUnavailable 0
    "max-unavailable-zero-accepted": [
        "core/admission/max-unavailable-zero-needs-surge",
        "core/admission/message-names-field",
    ],
    "negative-history-limit-accepted": ["core/admission/revision-history-limit-minimum"],
    "role-name-length-unchecked": ["core/admission/role-name-max-length", "core/admission/message-names-field"],
    "role-name-pattern-unchecked": ["core/admission/role-name-pattern"],
    "role-names-not-unique": ["core/admission/role-name-unique"],
    "roles-count-unchecked": ["core/admission/roles-item-count"],
    "plugin-names-not-unique": ["plugins/framework/duplicate-name-rejected"],
    # the CRD no longer defaults an omitted type, so it also reads back omitted
    "plugin-type-compared-as-written": [
        "plugins/immutability/equivalent-type-accepted",
        "plugins/defaults/type-built-in",
    ],
    "headless-scope-target-accepted": ["dns/scope/target-all-only"],
    "coordination-addable-and-removable": ["rollout/coordination/immutable"],
    "role-rolling-group-config-accepted": ["rollout/role/admission"],
    "progress-deadline-minimum-unchecked": ["inplace/progress-deadline-minimum"],
    "gang-policy-removable": ["gang/admission/gang-policy-not-removable"],
    "min-role-replicas-mutable": ["gang/admission/min-role-replicas-immutable"],
    "min-role-replicas-keys-unchecked": ["gang/admission/min-role-replicas-keys-name-roles"],
    # end of slot admission
    # slot core (issue 13, third wave)
    "none-rebuilds-deleted-pod-instance": ["core/recovery/none-deleted-pod"],
    "role-scale-down-ignored": ["core/role/replicas-change"],
    "scale-selector-unpublished": ["core/scale/subresource-up"],
    "worker-template-ignored": ["core/servinggroup/pods-created"],
    "scale-down-keeps-worker-pods": ["core/servinggroup/scale-down-whole-groups"],
    "demo-annotations-replace": ["plugins/demo-pod-tweaks/annotations-merged"],
    "demo-runtime-class-ignored": ["plugins/demo-pod-tweaks/runtime-class-name"],
    "scope-target-entry-ignored": ["plugins/demo-pod-tweaks/scope-target-entry"],
    "headless-without-worker-template": ["dns/scope/no-worker-template"],
    "terminating-service-rebuilds-instance": ["dns/services/auxiliary"],
    # end of slot core
    # slot rollout (issue 13, third wave)
    "role-surge-ignored": ["rollout/role/max-surge"],
    "role-unavailable-off-by-one": ["rollout/role/max-unavailable"],
    "role-percent-of-servinggroups": ["rollout/role/max-unavailable-percent-of-role"],
    "role-partition-percent-rounds-down": ["rollout/role/partition"],
    "max-unavailable-off-by-one": ["rollout/sg/max-unavailable"],
    "retarget-ignored": ["rollout/sg/retarget-mid-rollout"],
    "min-member-ignores-min-role-replicas": [
        "gang/podgroup/min-member",
        "gang/podgroup/min-role-replicas-per-role",
        "gang/podgroup/scale",
    ],
    "gang-policy-without-minimums-one-instance": ["gang/podgroup/min-member-without-gang-policy"],
    "min-task-member-omitted": ["gang/podgroup/min-task-member", "gang/podgroup/min-role-replicas-per-role"],
    "group-policy-not-in-podgroup": ["gang/podgroup/network-topology"],
    "podgroup-queue-dropped": ["gang/podgroup/queue"],
    "podgroups-kept-on-scale-down": ["gang/podgroup/scale"],
    # end of slot rollout
    # slot accelerators (issue 13, third wave)
    # end of slot accelerators
    # Autoscaling (issue 15)
    "autoscaler-exceeds-max": ["autoscaling/homogeneous/max-replicas"],
    "autoscaler-never-scales-down": ["autoscaling/homogeneous/scale-down"],
    "autoscaler-ignores-min": ["autoscaling/homogeneous/scale-down"],
    "autoscaler-missing-metric-as-zero": [
        "autoscaling/metrics/unreadable-changes-nothing",
        "autoscaling/disaggregated/missing-source-changes-nothing",
    ],
    "autoscaler-undersizes": ["autoscaling/homogeneous/scale-up", "autoscaling/homogeneous/status"],
    "autoscaler-no-status": ["autoscaling/homogeneous/status", "autoscaling/disaggregated/ratio-adjusted"],
    "autoscaler-ratio-ignored": ["autoscaling/disaggregated/ratio-kept", "autoscaling/disaggregated/ratio-adjusted"],
    "autoscaler-ratio-adjusted-unreported": ["autoscaling/disaggregated/ratio-adjusted"],
    "autoscaler-fixed-role-ignored": ["autoscaling/disaggregated/fixed-role"],
    "autoscaler-roles-scale-whole": ["autoscaling/disaggregated/role-replicas"],
    "autoscaler-role-metrics-ignored": ["autoscaling/disaggregated/role-metrics"],
    "autoscaling-ignores-target-kind": ["autoscaling/target/other-kind-not-scaled"],
    "autoscaler-heterogeneous-listed-order": ["autoscaling/heterogeneous/cheaper-first"],
    "autoscaler-heterogeneous-unbounded": ["autoscaling/heterogeneous/params-bounded"],
    "autoscaler-desired-after-ratio": ["autoscaling/disaggregated/ratio-adjusted"],
    "autoscaler-never-panics": ["autoscaling/panic/mode-reported"],
    "autoscaling-webhook-allows-no-target": ["autoscaling/admission/exactly-one-target"],
    "autoscaling-crd-no-bounds": ["autoscaling/admission/documented-bounds"],
    "autoscaling-crd-no-sizes": ["autoscaling/admission/documented-sizes"],
    "autoscaling-crd-any-backends": ["autoscaling/admission/one-metric-backend"],
    # Converters (issue 16)
    "booster-worker-image-ignored": ["modelbooster/convert/worker-image"],
    "booster-env-dropped": ["modelbooster/convert/backend-env"],
    "booster-env-from-dropped": ["modelbooster/convert/backend-env-from"],
    "booster-worker-scheduling-dropped": ["modelbooster/convert/worker-scheduling"],
    "booster-downloader-without-uri": ["modelbooster/convert/downloader-model-uri"],
    "booster-cache-entry-only": ["modelbooster/convert/cache-*"],
    "booster-scheduler-name-dropped": ["modelbooster/convert/scheduler-name"],
    "booster-runtime-class-dropped": ["modelbooster/convert/runtime-class"],
    "booster-worker-template-always": ["modelbooster/convert/single-pod-no-worker-template"],
    "booster-no-worker-template": ["modelbooster/convert/multi-pod-worker-template"],
    "booster-child-without-headless": ["modelbooster/convert/headless-service-declared"],
    "booster-plugins-rederived": ["modelbooster/convert/plugins-stable-on-pods-change"],
    "booster-rename-keeps-old-child": ["modelbooster/convert/backend-rename-replaces-child"],
    "booster-disaggregated-one-role": ["modelbooster/convert/disaggregated-roles"],
    "booster-no-observed-generation": ["modelbooster/status/observed-generation"],
    "booster-crd-not-deprecated": ["modelbooster/admission/deprecation-warning"],
    "booster-child-twice": ["modelbooster/convert/one-child"],
    "booster-crd-no-bounds": ["modelbooster/admission/documented-bounds"],
    "booster-admission-message-without-field": ["modelbooster/admission/names-field"],
    "booster-crd-no-defaults": ["modelbooster/admission/worker-type-default"],
    "lws-child-without-headless": ["lws/convert/headless-service-declared"],
    "lws-size-one-without-worker-template": ["lws/convert/size-one-keeps-worker-template", "lws/convert/size-one-dns"],
    "lws-worker-replicas-equal-size": ["lws/convert/size-three-layout"],
    "lws-plugins-rederived": ["lws/convert/plugins-stable-on-size-change"],
    "autoscaling-crd-no-defaults": ["autoscaling/admission/documented-defaults"],
    # issue 31, section 1: currentReplicas at the current revision is SHOULD (caught as a warning)
    "current-replicas-counts-all": ["rollout/status/current-replicas-partition"],
    "status-revision-counts-replicas": ["core/revisions/scaling-keeps-revision"],
    "eviction-budget-too-strict": ["eviction/servinggroup/within-budget-allowed"],
    "podgroup-named-by-group-zero": ["gang/podgroup/one-per-servinggroup"],
    # issue 31, section 5: a scale-down under a partition keeps the protected replicas on their template
    "scale-down-ignores-partition": ["rollout/sg/partition-scale-down-keeps-protected"],
    "role-scale-down-ignores-partition": ["rollout/role/partition-scale-down-keeps-protected"],
}

# Faults only a running container shows (real nodes): their variants run in
# tests/integration/test_real_node_variants.py, on a cluster with real nodes, in the serial pass (the
# host runs one real-node cluster at a time, and the control run holds it in the own-controller pass).
REAL_NODE_CAUGHT_BY: dict[str, list[str]] = {
    "hostname-as-fqdn": ["dns/in-container/hostname-and-addresses"],
    # a Pod metric source needs Pods that serve metrics: running containers
    "autoscaler-pod-fixed-endpoint": ["autoscaling/pod-metric/scrape"],
    "autoscaler-pod-name-ignored": ["autoscaling/pod-metric/scrape"],
    "autoscaler-pod-name-not-defaulted": ["autoscaling/pod-metric/scrape"],
}

# fault -> why no spec-backed behaviour can notice it
UNDETECTABLE: dict[str, str] = {
    "podgroup-not-owned": (
        "the spec fixes no owner of a PodGroup (issue 31): the suite finds a ServingGroup's PodGroup through its "
        "Pods' annotation, whatever owns it"
    ),
    "wrong-worker-index": "WORKER_INDEX is upstream's convention, not in the spec",
    "wrong-group-size": "GROUP_SIZE is upstream's convention, not in the spec",
    "admission-allows-missing-worker-template": (
        "the spec never says workerTemplate is required (upstream's webhook rule); the harness's "
        "webhook-registration probe uses that rule, so this variant cannot even be deployed"
    ),
    "eviction-percent-rounds-down": "eviction percentages' rounding is not asserted (spec reading 28)",
}


def test_every_fault_is_classified() -> None:
    # Reference faults only an Accelerators run (device node pools) shows run in test_accelerators_profile.py.
    from tests.integration.test_accelerators_profile import REFERENCE_CAUGHT_BY as ACCELERATOR_CAUGHT_BY

    tables = [set(CAUGHT_BY), set(REAL_NODE_CAUGHT_BY), set(ACCELERATOR_CAUGHT_BY), set(UNDETECTABLE)]
    assert set().union(*tables) == set(FAULTS)
    assert sum(map(len, tables)) == len(FAULTS), "a fault is in two tables"


@pytest.fixture(scope="session")
def variant_cluster(worker_id: str) -> Iterator[str]:
    """One kept embedded cluster per xdist worker (dying with this process), reused by every
    round the worker runs: a round restarts only the controller."""
    yield from kept_cluster(f"selfval-{worker_id}-{os.getpid()}")


# `make test-all`: every variant runs the whole suite (faults x behaviours), alone, and records what
# else it breaks; the targets must still be among the non-conformant behaviours.
EXHAUSTIVE = os.environ.get("KTHENA_SELFVAL_EXHAUSTIVE") == "1"


def schema_faults() -> frozenset[str]:
    """The faults the rendered CRD schemas consult (``kthena-ref manifests --fault``): the harness
    installs those schemas for the whole cluster, so these faults cannot be scoped to a namespace."""
    from kthena_ref import faults
    from kthena_ref.api.autoscaling_crd import crd as autoscaling_crd
    from kthena_ref.api.crd import crd
    from kthena_ref.api.modelbooster_crd import crd as modelbooster_crd

    with faults.consulted() as names:
        crd(), autoscaling_crd(), modelbooster_crd()
    return frozenset(names)


UNSCOPABLE = schema_faults()
# Sentinels: quick behaviours, one of each group (the first no fault of the round targets), run with
# no fault in their namespace beside every scoped round: a reconcile, an admission request, a
# conversion, an autoscaler pass. If one does not pass, a fault reached beyond its namespaces.
SENTINELS = [
    ["core/servinggroup/pods-created", "core/status/settled", "core/role/replicas-change"],
    ["core/admission/role-name-unique", "core/admission/roles-item-count", "core/admission/role-name-pattern"],
    ["modelbooster/convert/worker-image", "modelbooster/convert/runtime-class", "lws/convert/size-three-layout"],
    [
        "autoscaling/homogeneous/scale-up",
        "autoscaling/homogeneous/max-replicas",
        "autoscaling/homogeneous/scale-down",
        "autoscaling/target/other-kind-not-scaled",
        "autoscaling/disaggregated/fixed-role",
        "autoscaling/homogeneous/status",
        "autoscaling/disaggregated/ratio-kept",
    ],
]
# Behaviours per scoped round: about a sixth of the targets each, so the pass's workers share them.
ROUND_TARGETS = 45


def plan(caught_by: dict[str, list[str]], unscopable: frozenset[str] = UNSCOPABLE) -> list[Round]:
    """The rounds of ``caught_by`` (tests/integration/selfval_rounds.py) against the catalog."""
    return plan_rounds(
        caught_by, [b.id for b in collect()], unscopable=unscopable, sentinels=SENTINELS, key=label,
        max_targets=ROUND_TARGETS,
    )  # fmt: skip


ROUNDS = plan(CAUGHT_BY)
RUNS = [alone(f, CAUGHT_BY[f]) for f in sorted(CAUGHT_BY)] if EXHAUSTIVE else ROUNDS


@pytest.mark.parametrize("made", RUNS, ids=[r.name for r in RUNS])
def test_the_suite_catches_the_broken_variants_of_a_round(made: Round, variant_cluster: str, tmp_path: Path) -> None:
    outcome = prove(made, variant_cluster, tmp_path, FAULTS, CAUGHT_BY, whole_suite=EXHAUSTIVE)
    print(f"{made.name}: {'; '.join(outcome.runs)}")
    missed = failures(outcome, list(made.faults))
    assert not missed, "\n".join([*missed, f"runs: {outcome.runs}"])
