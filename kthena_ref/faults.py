"""Deliberate faults in the reference controller, for the conformance suite's self-validation.

A conformance suite is only worth something if it notices when an implementation is wrong. To
prove that, self-validation runs the suite against deliberately broken variants of this
controller and requires the conformance test that covers the broken behaviour to come out
non-conformant. Each fault here is such a mutation: it breaks exactly one documented behaviour
(and nothing else on purpose), at the one place in the code that implements that behaviour, as a
one-to-three line ``if faults.active("..."):`` branch.

Faults are never on by default. They are switched on for a process with
``kthena-ref run --fault NAME`` (repeatable), or with the environment variable
``KTHENA_REF_FAULTS`` (comma-separated names) when no ``--fault`` is given; ``run`` logs a WARNING
naming every active fault when it starts. Unknown names are an error, never silently ignored.

Scoped faults. ``--fault NAME@PATTERN`` switches NAME on only for work on objects in namespaces
whose label ``conformance.kthena.io/behaviour`` (the suite labels each test namespace with the
behaviour it runs) matches the fnmatch PATTERN; repeating the name adds patterns. Self-validation
uses them to run several faults in one controller, each where only its own target behaviours run.
The controller's entry points (a reconcile, an admission request, an autoscaler pass over one
policy, a conversion) enter the namespace's scope with :func:`in_scope` (a context variable, so
concurrent tasks each see their own); a scoped fault consulted outside any scope (the CRD schema
``manifests`` prints, start-up) is inactive, never active everywhere. A fault may not be given
both process-wide and scoped.

Purity. The planner, the plugins and the admission rules are pure functions of their arguments,
with one deliberate exception: :func:`active` reads this module's switch (the names given to
:func:`configure`, else the environment variable, and for scoped faults the scope the caller's
task entered). The switch is set once when the process starts and never changes while it runs,
so every plan is still a function of its input (and its namespace) for the whole life of a
controller; unit tests switch faults with :func:`injected`, which restores the previous state
when it exits.
"""

from __future__ import annotations

import fnmatch
import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

ENV = "KTHENA_REF_FAULTS"
# The namespace label a scoped fault's patterns match (the suite labels every test namespace with it).
SCOPE_LABEL = "conformance.kthena.io/behaviour"

FAULTS: dict[str, str] = {
    # Core
    "scale-down-lowest-ordinal": (
        "scale-down removes the lowest ordinals (ServingGroup <ms>-0 first) regardless of readiness and "
        "pod-deletion-cost, instead of not-ready first, then the lowest summed cost, then the highest ordinal"
    ),
    # Core (issue 13, H4): Role-level scale-down order; the Pod template's list-maps (a CRD fault: it reaches
    # the CRD through `kthena-ref manifests --fault`)
    "role-scale-down-highest-index": (
        "a Role scaled down loses its highest instance indices regardless of readiness and pod-deletion-cost, "
        "instead of not-ready first, then the lowest summed cost, then the highest index"
    ),
    "pod-template-list-maps-enforced": (
        "the CRD embeds the PodSpec's list-maps as kube-apiserver publishes them, so it refuses pod templates a Pod "
        "accepts: two hostAliases entries for one IP, two env entries of one name, two ports of one containerPort"
    ),
    "wrong-worker-index": "worker Pods get WORKER_INDEX=k+1 (off by one); the entry Pod keeps WORKER_INDEX=0",
    "wrong-group-size": "every Pod gets GROUP_SIZE=workerReplicas instead of workerReplicas+1",
    "no-recovery": (
        "recoveryPolicy is ignored and recovery behaves like None: a Pod deleted behind the controller's back "
        "(or a failed Pod) is recreated alone, the rest of its Role instance / ServingGroup keeps running"
    ),
    "stale-available-replicas": "status.availableReplicas is always 0 (conditions are still computed correctly)",
    "admission-allows-missing-worker-template": (
        "admission accepts a Role with workerReplicas > 0 and no workerTemplate (workers then run the entry template)"
    ),
    "no-entry-label": 'entry Pods lack the label modelserving.volcano.sh/entry: "true"',
    # Core (issue 13, H3): the SHOULD halves split from MUST behaviours
    "label-selector-selects-all": (
        "status.labelSelector selects every Pod of the ModelServing (the other fair reading) instead of one per "
        "ServingGroup"
    ),
    "admission-message-without-field": (
        "the webhook's refusals give only the reasons, not the field paths (the CRD schema's messages are unchanged)"
    ),
    # Core (issue 13, H6): the CRD schema (these reach the CRD through `kthena-ref manifests --fault`)
    "no-schema-defaults": "the CRD schema carries no default: omitted fields are stored omitted",
    "enums-not-validated": "neither the CRD schema nor the webhook checks enum values (any string is stored)",
    # Core (lead, issue 13 second wave): workerReplicas "Required" (a CRD fault)
    "worker-replicas-default-one": (
        "the CRD neither requires a Role's workerReplicas nor leaves it 0: an omitted workerReplicas defaults to 1, "
        "so a Role with a workerTemplate and no workerReplicas runs a worker Pod"
    ),
    # InPlaceUpdate (lead, issue 13 second wave): the plugin document's spelling of InPlace (a CRD fault too)
    "in-place-update-alias-recreates": (
        "updateMethod InPlaceUpdate (the plugin document's spelling) is accepted by the CRD and the webhook but "
        "acts as Recreate: an image change replaces the Pods instead of patching them in place"
    ),
    "entry-template-optional": "neither the CRD schema nor the webhook requires a Role's entryTemplate",
    # Core (issue 13, H6): Pods, status, revisions, recovery
    "container-resources-dropped": "Pods' containers lose the template's resources (requests and limits)",
    "template-scheduler-name-wins": (
        "a Pod template's own schedulerName is kept instead of being replaced by the ModelServing's"
    ),
    "available-counts-unready": "status.availableReplicas counts every ServingGroup, ready or not",
    "current-revision-is-update": (
        "status.currentRevision always reports the update revision (and currentReplicas counts its groups), "
        "also while groups at an older revision remain"
    ),
    "no-status-at-zero-replicas": "a ModelServing with spec.replicas 0 never gets a status written",
    "emptied-group-wedged": (
        "under ServingGroupRecreate, a ServingGroup whose Pods were all deleted at once is never created again"
    ),
    "replicas-in-revision": "a Role's replicas are part of the revision: scaling a Role makes a new revision",
    "revision-not-owned": "ControllerRevisions are created without an ownerReference to their ModelServing",
    "revision-history-unbounded": "revisionHistoryLimit is ignored: non-live ControllerRevisions are never pruned",
    # Core (issue 13, H8): recovery of restarted containers, restartGracePeriodSeconds
    "none-recreates-restarted-pod": (
        "recoveryPolicy None deletes (and so recreates) a Pod whose container restarted and is not ready, instead of "
        "leaving the restart to the kubelet as a Deployment does"
    ),
    "servinggroup-recreate-ignores-restarts": (
        "under ServingGroupRecreate a restarted container rebuilds only its Role instance, not its ServingGroup"
    ),
    "servinggroup-recreate-ignores-failures": (
        "under ServingGroupRecreate a failed Pod rebuilds only its Role instance, not its ServingGroup"
    ),
    "role-recreate-rebuilds-group": "recoveryPolicy RoleRecreate rebuilds the whole ServingGroup of a failed Pod",
    "restart-grace-ignored": "restartGracePeriodSeconds is ignored: an error Pod's scope is rebuilt at once",
    "live-revision-pruned": (
        "only the update revision counts as live: the current revision and revisions groups still run are pruned "
        "beyond revisionHistoryLimit"
    ),
    # Core and InPlaceUpdate (issue 13, H5): readiness as the kubelet reports it
    "ready-ignores-readiness-gates": (
        "a Pod with readiness gates counts as ready when all its containers are ready, ignoring its Ready "
        "condition (so a gate that is not True does not keep its ServingGroup from being available)"
    ),
    "in-place-ready-on-patch": (
        "a Pod updated in place counts as ready on the target image as soon as it is Running after the patch, "
        "without waiting for the new image to run and the Pod to be Ready"
    ),
    # Plugins
    "plugin-order-reversed": "the plugin chain runs in reverse list order (the first plugin's mutations win)",
    "chain-immutability-not-enforced": "admission accepts changes to spec.plugins on update",
    "unknown-plugin-accepted": (
        "admission accepts plugin names that are not registered; the controller then skips that plugin"
    ),
    "demo-env-replaces": (
        "demo-pod-tweaks with config.env replaces every container's env with its own entries instead of appending"
    ),
    # Plugins (issue 13, H7): chain absent, scope forms, failures, recreated Pods, more chain changes
    "omitted-plugins-implicit-headless": (
        "a ModelServing without spec.plugins gets headless-service anyway (Entry and Discovery Services, "
        "hostname, subdomain, ENTRY_ADDRESS), as controllers did before the opt-in model"
    ),
    "empty-plugins-implicit-headless": "a ModelServing with spec.plugins: [] gets headless-service anyway",
    "scope-target-worker-ignored": "a plugin with scope.target Worker runs on entry Pods too",
    "scope-roles-ignored-with-target": "a plugin whose scope sets a target other than All ignores scope.roles",
    "scope-roles-ignored": (
        "a plugin whose scope lists Roles with no target but All ignores scope.roles on Pods: it mutates every "
        "Role's Pods (its Role hooks still honour it)"
    ),
    "repeated-env-collapsed": "a container's env entries of one name are collapsed to the first in the Pods",
    "scope-empty-roles-match-none": "a plugin with an explicit empty scope.roles runs on no Pod (instead of all)",
    "scope-target-all-entry-only": "a plugin whose scope says target All skips worker Pods",
    "recreated-pods-skip-plugins": (
        "Pods created into a ServingGroup that still has Pods (a recreated Role instance, a replaced Pod) skip "
        "the plugin chain"
    ),
    "plugin-config-error-skips-plugin": (
        "a plugin config the plugin cannot decode is accepted at admission and the controller creates the Pods "
        "without that plugin"
    ),
    "unknown-plugin-logged-only": (
        "an unregistered plugin name is accepted at admission; the controller's reconcile then fails with a log "
        "line only (no Event, no condition, no Pods)"
    ),
    "chain-append-allowed": "admission accepts an update that only appends plugins to a non-empty chain",
    "chain-unlocked-after-rollout": (
        "admission accepts any plugin chain change once the ModelServing's last spec change (a rollout) was observed"
    ),
    "scope-roles-change-allowed": "admission ignores scope.roles when comparing plugin chains",
    "chain-unlocked-at-zero": "admission accepts adding the first plugin while spec.replicas is 0",
    # HeadlessServiceDNS (issue 13, H7): scope, layout, Service lifecycle
    "headless-scope-refused": "admission refuses headless-service with any scope (also scope.target All)",
    "headless-scope-roles-ignored": (
        "headless-service's Services are made for every Role with a workerTemplate, also Roles outside scope.roles"
    ),
    "discovery-selects-across-groups": (
        "the Discovery Service selects the same Role instance of every ServingGroup (no ServingGroup in its selector)"
    ),
    "third-service-per-instance": "every in-scope Role instance gets a third, all-member headless Service",
    "services-recreated-on-resync": (
        "a reconcile replaces plugin Services older than 5 s (deleted, then created again with a new UID)"
    ),
    "services-recreated-after-restart": (
        "a restarted controller replaces every plugin Service an earlier controller process made (deleted, then "
        "created again with a new UID); within one process they are kept"
    ),
    "services-kept-on-group-removal": "the Services of a removed ServingGroup's Role instances are never deleted",
    "services-kept-on-role-scale-down": (
        "the Services of a Role instance removed by a Role scale-down (its ServingGroup kept) are never deleted"
    ),
    "terminating-service-blocks-role": (
        "no Pod of the ModelServing is created while one of its plugin Services is terminating"
    ),
    "service-ownership-unchecked": (
        "cleanup deletes Services labelled like the plugin's that this ModelServing does not own"
    ),
    "legacy-dns-on-recreated-pods": (
        "a ModelServing without plugins gets headless-service's hostname, subdomain and ENTRY_ADDRESS on Pods "
        "recreated into an existing ServingGroup"
    ),
    "failed-service-delete-not-retried": "a plugin Service whose deletion request failed is never asked again",
    "role-deletion-waits-for-services": (
        "the Pods of a removed ServingGroup are deleted only once its Role instances' plugin Services are gone "
        "(a finalizer on a Service holds the Role's deletion)"
    ),
    # HeadlessServiceDNS
    "no-discovery-service": (
        "headless-service never creates the Discovery Service; Pods' spec.subdomain still names it"
    ),
    "entry-service-selects-all": (
        "the Entry Service selects the entry and all worker Pods (no entry label in its selector)"
    ),
    "wrong-entry-address": (
        "ENTRY_ADDRESS is <discovery-service>.<namespace> (the all-member Service) instead of "
        "<entry-service>.<namespace>"
    ),
    "services-not-published-before-ready": "headless-service Services have publishNotReadyAddresses: false",
    "hostname-as-fqdn": (
        "headless-service also sets setHostnameAsFQDN on Pods, so the engine's container sees its FQDN as hostname "
        "instead of the Pod's hostname (only observable in a running container: real nodes)"
    ),
    "services-not-recreated": (
        "a plugin Service deleted while its Role instance has Pods is not recreated (new instances still get theirs)"
    ),
    "deletion-identity-ignored": (
        "a Pod that reused an instance identity while its deletion is pending is treated like an original: "
        "adopted (or deleted with its group), no DeletionIdentityChanged Event or condition"
    ),
    "migration-layout-changed": (
        "an instance whose Pods use the entry-named all-member Service as subdomain gets the new layout: "
        "the Discovery Service is created, recreated Pods use it, no MigrationRequired Event or condition"
    ),
    # Rollout
    "unavailable-rounds-up": (
        "a percentage maxUnavailable (ServingGroupRollingUpdate) is rounded up instead of down (off by one)"
    ),
    "surge-ignored": "maxSurge is ignored (resolves to 0): no ServingGroup is created above spec.replicas",
    "partition-ignored": "rollingUpdateConfiguration.partition is ignored: protected ServingGroups are updated too",
    "role-unchanged-recreated": (
        "RoleRollingUpdate recreates every Role instance of a new revision, also those of Roles whose template "
        "did not change (instead of keeping their Pods)"
    ),
    "coordination-ignored": "roleCoordination is ignored: every Role rolls at its own pace",
    # Rollout (issue 13, H8): roleCoordination's rules
    "max-skew-any-form": "admission accepts a roleCoordination maxSkew that is not a percentage",
    "coordination-participants-miss-last-role": (
        "roleCoordination with an empty roles list leaves the last Role out of maxSkew (instead of every Role)"
    ),
    "role-max-unavailable-default-all": (
        "the CRD schema defaults a Role's maxUnavailable to 100% (every instance) instead of 1"
    ),
    "role-unavailable-rounds-up": (
        "under RoleRollingUpdate a percentage maxUnavailable is rounded up instead of down (off by one)"
    ),
    "role-surge-rounds-down": "under RoleRollingUpdate a percentage maxSurge is rounded down instead of up",
    "role-default-max-surge-one": "under RoleRollingUpdate an unset maxSurge resolves to 1 instead of the default 0",
    "role-rolling-ignores-servinggroup-recreate": (
        "under RoleRollingUpdate with recoveryPolicy ServingGroupRecreate, an outdated Role instance is recreated "
        "alone instead of its entire ServingGroup"
    ),
    "role-partition-absolute-ignored": (
        "under RoleRollingUpdate a Role's partition given as a number is ignored (percentages still protect)"
    ),
    "role-groups-one-at-a-time": (
        "RoleRollingUpdate updates one ServingGroup at a time: the next waits until every Pod of the previous one is "
        "at the update revision and Ready"
    ),
    "coordination-dependencies-mutable": (
        "the CRD's immutability rule for roleCoordination compares maxSkew and roles only: its dependencies can be "
        "changed after creation"
    ),
    "coordination-roles-list-ignored": "roleCoordination's roles list is ignored: every Role takes part in maxSkew",
    "skew-ratio-excludes-partition": (
        "roleCoordination's Ready ratios are taken over the Roles' replicas minus their partition-protected "
        "instances, instead of the entire formal replica count"
    ),
    "dependency-capacity-dropped": (
        "a Role that others depend on updates all its instances within its budget while its callers still run old "
        "instances (no old dependency capacity retained)"
    ),
    "dependency-closure-direct-only": (
        "a dependency graph root waits only for its direct dependencies' target-version Ready capacity, not for its "
        "whole dependency closure"
    ),
    "group-partition-refilled-at-update": (
        "a deleted partition-protected ServingGroup comes back at the update revision instead of at the revision "
        "it had (status.currentRevision)"
    ),
    "role-partition-refilled-at-update": (
        "under RoleRollingUpdate a deleted partition-protected Role instance comes back at the update revision "
        "instead of at the revision it had (status.currentRevision)"
    ),
    # Rollout (issue 13, H8): budget rules, defaults, settings that must not take effect
    "unready-not-counted": (
        "a rolling update counts as unavailable only the units it took down itself: a ServingGroup (or Role "
        "instance) already unready when the update starts does not use up maxUnavailable"
    ),
    "default-max-unavailable-all": (
        "an unset maxUnavailable (ServingGroup or Role) resolves to every replica instead of the default 1"
    ),
    "group-rollout-uses-role-settings": (
        "ServingGroupRollingUpdate takes maxUnavailable from the first Role's own setting when it has one, "
        "instead of ignoring Role-level rolling settings"
    ),
    "recreate-updates-in-place": (
        "updateMethod Recreate (ServingGroupRollingUpdate) patches the images of existing Pods for an image-only "
        "change, as InPlace does"
    ),
    "update-method-default-in-place": (
        "with no rolloutStrategy, an image-only change patches the existing Pods instead of recreating them"
    ),
    # InPlaceUpdate
    "in-place-recreates": (
        "updateMethod InPlace is ignored: an image-only change recreates the Pods (new UIDs) instead of patching them"
    ),
    "in-place-ineligible-patched": (
        "updateMethod InPlace patches images even when the change is not image-only (the other changes are lost)"
    ),
    "no-fallback-event": "the in-place fallback to recreate emits no InPlaceUpdateFallback Event",
    "no-progress-deadline": "progressDeadlineSeconds never passes: a stuck in-place update is never recovered",
    # InPlaceUpdate (issue 13, H8): the eligibility rules of PR 1882
    "eligibility-ignores-worker-replicas": (
        "updateMethod InPlace treats a change of a Role's workerReplicas as eligible"
    ),
    "eligibility-ignores-container-order": (
        "updateMethod InPlace treats a change of the order of a template's containers as eligible"
    ),
    "eligibility-ignores-restart-policy": (
        "updateMethod InPlace patches images also when the template's restartPolicy is not Always or a regular "
        "container sets restartPolicy"
    ),
    "eligibility-ignores-pull-policy": (
        "updateMethod InPlace treats an image change that changes the effective imagePullPolicy as eligible"
    ),
    "explicit-pull-policy-ignored": (
        "in-place eligibility resolves imagePullPolicy from the image alone, ignoring an explicit setting, so a tag "
        "change to latest falls back although the Pod's policy would not change"
    ),
    "eligibility-ignores-scheduler-name": (
        "updateMethod InPlace patches the images of Pods that run under another scheduler than the ModelServing's "
        "schedulerName (changed together with an image), instead of recreating them"
    ),
    "plugin-fallback-ignores-budget": (
        "a ModelServing whose plugins do not support in-place updates (headless-service) takes the recreate "
        "fallback for every ServingGroup at once, ignoring maxUnavailable"
    ),
    "role-eligibility-whole-group": (
        "under RoleRollingUpdate with updateMethod InPlace, every Role's changes are held against each Role: one "
        "Role's ineligible change makes the others fall back too"
    ),
    # EvictionBudget
    "eviction-budget-off-by-one": (
        "the eviction budget allows an Eviction that leaves minAvailable - 1 ready ServingGroups "
        "(or roleMinAvailable - 1 ready Role instances)"
    ),
    "eviction-percent-rounds-down": (
        "a percentage minAvailable / roleMinAvailable is rounded down instead of up (as PodDisruptionBudgets do)"
    ),
    "role-eviction-budget-ignored": "protectionLevel Role allows every Eviction (roleMinAvailable is not checked)",
    # EvictionBudget (issue 13, H8): the other protection level's setting, roleMinAvailable keys
    "min-available-applied-under-role": (
        "with protectionLevel Role and minAvailable set, the eviction budget judges minAvailable (ServingGroups) "
        "instead of roleMinAvailable"
    ),
    "role-min-available-applied-under-servinggroup": (
        "with protectionLevel ServingGroup, an Eviction within minAvailable is still refused when it would leave "
        "fewer ready instances of a Role than roleMinAvailable names"
    ),
    "role-min-available-keys-unchecked": "admission accepts roleMinAvailable keys that name no Role",
    "eviction-refused-forbidden": (
        "the eviction budget refuses with HTTP 403 Forbidden instead of 429 TooManyRequests (the PodDisruptionBudget "
        "convention kubectl drain retries)"
    ),
    # InPlaceUpdate (issue 13, helper pd): progressDeadlineSeconds per Role instance, per RecoveryPolicy,
    # only for in-place updates, and its default
    "role-progress-deadline-ignored": (
        "under RoleRollingUpdate a Role instance updated in place never passes its progressDeadlineSeconds"
    ),
    "deadline-servinggroup-recreate-narrowed": (
        "past progressDeadlineSeconds, recoveryPolicy ServingGroupRecreate rebuilds only the Role instance of the "
        "unready Pod instead of its whole ServingGroup"
    ),
    "deadline-role-recreate-pod-only": (
        "past progressDeadlineSeconds, recoveryPolicy RoleRecreate replaces only the unready Pod instead of its whole "
        "Role instance"
    ),
    "deadline-none-recreates-role": (
        "past progressDeadlineSeconds, recoveryPolicy None rebuilds the unready Pod's Role instance as RoleRecreate "
        "does"
    ),
    "progress-deadline-applies-to-recreate": (
        "progressDeadlineSeconds also applies to updateMethod Recreate: a new Pod not ready that long after it was "
        "created is reported ProgressDeadlineExceeded and rebuilt"
    ),
    "progress-deadline-default-minimum": (
        "an omitted progressDeadlineSeconds means 60 seconds (the minimum) instead of the 1800 seconds default"
    ),
    # Rollout (issue 13 second wave, helper roll): Role settings and roleCoordination's scope, both-zero percentages
    "role-partition-honoured-under-servinggroup": (
        "under ServingGroupRollingUpdate without a rollingUpdateConfiguration partition, the first Role's partition "
        "protects that many ServingGroups from the update"
    ),
    "coordination-only-first-group": (
        "roleCoordination holds back Role starts in ServingGroup 0 only; the other ServingGroups roll their Roles "
        "uncoordinated"
    ),
    "zero-percentages-deadlock": (
        "maxUnavailable and maxSurge percentages that both resolve to 0 are accepted and used as 0 and 0, so the "
        "rollout never takes a unit down nor adds one (it never progresses)"
    ),
    "coordination-applied-under-servinggroup-rolling": (
        "roleCoordination with ServingGroupRollingUpdate is accepted and switches the rollout to RoleRollingUpdate "
        "(each Role rolls with its own settings, coordinated) instead of being refused"
    ),
    # helper gang (issue 13, second wave): gangPolicy and networkTopology changes under InPlace; rolePolicy in the
    # PodGroup; different minRoleReplicas per Role
    "eligibility-ignores-gang-policy": (
        "updateMethod InPlace patches images when gangPolicy changed together with them (the change is not reported)"
    ),
    "eligibility-ignores-network-topology": (
        "updateMethod InPlace patches images when networkTopology changed together with them (the change is not "
        "reported)"
    ),
    "role-policy-not-in-podgroup": (
        "networkTopology.rolePolicy is not carried into the PodGroup: no subGroupPolicy gives a Role instance its "
        "network topology"
    ),
    "min-role-replicas-first-value": (
        "every Role named in gangPolicy.minRoleReplicas gets the first named Role's minimum instead of its own"
    ),
    # helper dns (issue 13, second wave): Service cleanup ownership and replacement UIDs, migration, ENTRY_ADDRESS
    "instance-cleanup-unowned": (
        "the Services of a Role instance whose Pods a reconcile deletes are deleted with them without checking "
        "ownership (a Service a user released from the ModelServing goes too); leftovers are still checked"
    ),
    "service-replacement-unprotected": (
        "a plugin Service is forgotten once gone, so one recreated (new UID) under its name while the Role "
        "deletion is pending is deleted as if it were the original"
    ),
    "headless-addable": (
        "admission accepts adding headless-service to a ModelServing created without plugins (as if it only restored "
        "what controllers did before the opt-in model)"
    ),
    "entry-only-service-replaced": (
        "an instance that has its Entry Service but no Discovery Service is rebuilt whole: the existing entry-only "
        "Service is deleted and created again (a new UID) along with the Discovery Service"
    ),
    "entry-pod-own-address": (
        "the entry Pod's ENTRY_ADDRESS is its own member address <pod>.<discovery-service>.<namespace> instead of "
        "<entry-service>.<namespace> (workers keep the right value)"
    ),
    # helper init (issue 13, second wave): a restarted init container (a sidecar) under each recreate policy
    "servinggroup-recreate-ignores-init-restarts": (
        "under ServingGroupRecreate a Pod whose only restarts are its init containers' (a sidecar restarted) is not "
        "taken for an error Pod: nothing is recreated"
    ),
    "role-recreate-ignores-init-restarts": (
        "under RoleRecreate a Pod whose only restarts are its init containers' (a sidecar restarted) is not taken for "
        "an error Pod: nothing is recreated"
    ),
    # helper pods (issue 13, second wave): the CRD's embedded PodSpec (it reaches the CRD through
    # `kthena-ref manifests --fault`); a plugin config error accepted at admission
    "pod-spec-schema-outdated": (
        "the CRD embeds an older PodSpec without the Pod-level resources and the containers' restartPolicyRules, so "
        "kube-apiserver prunes them from stored templates and the Pods lack them"
    ),
    "plugin-config-error-logged-only": (
        "a plugin config the plugin cannot decode is accepted at admission; the controller's reconcile then fails "
        "with a log line only (no Event, no condition, no Pods)"
    ),
    # slot admission (issue 13, third wave: every behaviour proven able to fail): admission rules
    # (the CRD faults reach the CRD through `kthena-ref manifests --fault`; a CRD bound also drops the webhook's
    # pydantic error for it, as enums-not-validated does, or the webhook would still refuse the value)
    "max-unavailable-zero-accepted": (
        "a literal rollingUpdateConfiguration.maxUnavailable of 0 is accepted with maxSurge unset or 0 (and acts as "
        "1) instead of being refused at admission"
    ),
    "negative-history-limit-accepted": (
        "neither the CRD schema nor the webhook checks that spec.revisionHistoryLimit is not negative"
    ),
    "role-name-length-unchecked": "neither the CRD schema nor the webhook bounds a Role name's length (12)",
    "role-name-pattern-unchecked": (
        "neither the CRD schema nor the webhook checks a Role name against ^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$"
    ),
    "role-names-not-unique": (
        "the CRD makes spec.template.roles an atomic list instead of a list-map keyed by name, so two Roles of one "
        "name are stored"
    ),
    "roles-count-unchecked": "neither the CRD schema nor the webhook bounds the number of Roles (1 to 4)",
    "plugin-names-not-unique": (
        "the CRD makes spec.plugins an atomic list instead of a list-map keyed by name, so a chain naming a plugin "
        "twice is stored (the controller's reconcile then fails)"
    ),
    "plugin-type-compared-as-written": (
        "the CRD does not default a plugin's omitted type to BuiltIn and admission compares plugin types as written, "
        "so writing an omitted type as BuiltIn (or omitting BuiltIn) counts as a change of the immutable chain"
    ),
    "headless-scope-target-accepted": (
        "headless-service with scope.target Entry or Worker is silently accepted (no refusal, no Warning Event) and "
        "applied to that target only"
    ),
    "coordination-addable-and-removable": (
        "the CRD's immutability rule for rolloutStrategy.roleCoordination compares it only when both the old and the "
        "new spec have one: it can be added or removed after creation"
    ),
    "role-rolling-group-config-accepted": (
        "admission accepts rolloutStrategy.rollingUpdateConfiguration under RoleRollingUpdate (it is then ignored)"
    ),
    "progress-deadline-minimum-unchecked": (
        "neither the CRD schema nor the webhook checks rolloutStrategy.progressDeadlineSeconds' minimum of 60"
    ),
    "gang-policy-removable": "the CRD does not forbid removing gangPolicy from a ServingGroup template once set",
    "min-role-replicas-mutable": "the CRD does not forbid changing gangPolicy.minRoleReplicas after creation",
    "min-role-replicas-keys-unchecked": "admission accepts gangPolicy.minRoleReplicas keys that name no Role",
    # end of slot admission
    # slot core (issue 13, third wave: every behaviour proven able to fail): core, plugins and dns behaviours
    "none-rebuilds-deleted-pod-instance": (
        "recoveryPolicy None rebuilds the whole Role instance of a Pod deleted behind the controller's back (as "
        "RoleRecreate) instead of replacing the deleted Pod alone"
    ),
    "role-scale-down-ignored": (
        "lowering a Role's replicas (outside a RoleRollingUpdate) leaves the surplus Role instances running in every "
        "ServingGroup"
    ),
    "scale-selector-unpublished": (
        "the CRD's scale subresource has no labelSelectorPath, so /scale reports no selector (an autoscaler cannot "
        "find the Pods it scales)"
    ),
    "worker-template-ignored": "worker Pods are built from the entryTemplate even when the Role has a workerTemplate",
    "scale-down-keeps-worker-pods": (
        "a ServingGroup removed by lowering spec.replicas loses only its entry Pods; its worker Pods keep running"
    ),
    "demo-annotations-replace": (
        "demo-pod-tweaks with config.annotations replaces the Pod's annotations with its own instead of merging "
        "them (the template's annotations are lost)"
    ),
    "demo-runtime-class-ignored": (
        "demo-pod-tweaks ignores config.runtimeClassName (its annotations and env still apply)"
    ),
    "scope-target-entry-ignored": "a plugin whose scope.target is Entry also runs on worker Pods",
    "headless-without-worker-template": (
        "headless-service also gives the Pods of a Role without a workerTemplate a hostname and subdomain, and the "
        "Role instance its Entry and Discovery Services"
    ),
    "terminating-service-rebuilds-instance": (
        "a Role instance one of whose plugin-managed Services is terminating is rebuilt (its Pods deleted and "
        "created again), as if its auxiliary Services decided whether its Pods exist"
    ),
    # end of slot core
    # slot rollout (issue 13, third wave: every behaviour proven able to fail): rollout and gang PodGroups
    "role-surge-ignored": (
        "under RoleRollingUpdate a Role's absolute maxSurge is ignored (it resolves to 0): no instance is created "
        "above the Role's replicas, so a Role with maxUnavailable 0 never updates"
    ),
    "role-unavailable-off-by-one": (
        "under RoleRollingUpdate an absolute maxUnavailable of 2 or more lets one more instance of the Role be "
        "unavailable than it says"
    ),
    "role-percent-of-servinggroups": (
        "under RoleRollingUpdate a percentage maxUnavailable is resolved against spec.replicas (the number of "
        "ServingGroups) instead of the Role's replicas"
    ),
    "role-partition-percent-rounds-down": (
        "under RoleRollingUpdate a percentage partition of a Role is rounded down instead of up, so it protects one "
        "instance fewer from the update"
    ),
    "max-unavailable-off-by-one": (
        "under ServingGroupRollingUpdate an absolute maxUnavailable of 2 or more lets one more ServingGroup be "
        "unavailable than it says"
    ),
    "retarget-ignored": (
        "a template change during an unfinished ServingGroupRollingUpdate does not retarget it: the ServingGroups the "
        "rollout already moved off status.currentRevision keep the intermediate template and are never updated again"
    ),
    "min-member-ignores-min-role-replicas": (
        "the PodGroup's minMember counts every Pod of the ServingGroup, ignoring gangPolicy.minRoleReplicas "
        "(minTaskMember still honours it)"
    ),
    "gang-policy-without-minimums-one-instance": (
        "with a gangPolicy that sets no minRoleReplicas each Role gang-requires one instance in the PodGroup instead "
        "of all its replicas"
    ),
    "min-task-member-omitted": (
        "the PodGroup carries no minTaskMember: nothing requires the Pods of a gang-required Role instance to be "
        "scheduled together"
    ),
    "group-policy-not-in-podgroup": (
        "networkTopology.groupPolicy is not carried into the ServingGroup's PodGroup as its networkTopology"
    ),
    "podgroup-not-owned": "a ServingGroup's PodGroup is created without an ownerReference to its ModelServing",
    "podgroup-queue-dropped": (
        "the PodGroup carries no queue: the ModelServing's scheduling.volcano.sh/queue-name annotation is ignored"
    ),
    "podgroups-kept-on-scale-down": "the PodGroups of the ServingGroups a scale-down removes are never deleted",
    # end of slot rollout
    # slot accelerators (issue 13, third wave: every behaviour proven able to fail): accelerator Pods
    "resource-claims-dropped": (
        "Pods lose their template's spec.resourceClaims (and the containers' resources.claims): they are scheduled "
        "and run without the devices their templates claim through ResourceClaimTemplates"
    ),
    # end of slot accelerators
    # Autoscaling (issue 15): the decision, the reconcile, the loop, the webhook and the AutoscalingPolicy CRD (the
    # autoscaling-crd-* faults reach the CRD through `kthena-ref manifests --fault`)
    "autoscaler-exceeds-max": (
        "scaling up, the decision does not clamp what the metrics ask for to maxReplicas (minReplicas still holds)"
    ),
    "autoscaler-never-scales-down": (
        "the decision never lowers replicas because of metrics (replicas outside [minReplicas, maxReplicas] are "
        "still brought to the nearest bound)"
    ),
    "autoscaler-ignores-min": (
        "scaling down by metrics ignores minReplicas: replicas go down to what the metrics ask for (at least 0)"
    ),
    "autoscaler-missing-metric-as-zero": (
        "a metric with no value this loop is decided as a value of 0 (replicas fall toward minReplicas) instead of "
        "changing nothing"
    ),
    "autoscaler-undersizes": (
        "the replicas a metric asks for are one fewer than value / targetValue rounded up (never below minReplicas), "
        "in stable and panic mode"
    ),
    "autoscaler-no-status": "the AutoscalingPolicy's status is never written",
    "autoscaler-ratio-ignored": (
        "a disaggregated target's ratioConstraint is not enforced: the metric-derived Role replicas are written and "
        "reported in ratioStatus, and ratioAdjusted is false"
    ),
    "autoscaler-ratio-adjusted-unreported": (
        "the ratioConstraint is enforced but the status' ratioAdjusted is always false"
    ),
    "autoscaler-fixed-role-ignored": (
        "a fixed Role (minReplicas == maxReplicas) of a disaggregated target is neither written nor reported in the "
        "status: it keeps whatever replicas it has"
    ),
    "autoscaler-roles-scale-whole": (
        "a disaggregated target's per-Role decisions are written as the ModelServing's spec.replicas (the largest "
        "Role's) instead of as the Roles' replicas"
    ),
    "autoscaler-role-metrics-ignored": (
        "a disaggregated Role's own metrics do not override spec.metrics: the Role is scaled on spec.metrics' "
        "targetValues"
    ),
    "autoscaling-ignores-target-kind": (
        "a targetRef's kind is ignored, by the webhook and by the autoscaler: a policy naming a Deployment (or any "
        "kind) scales the ModelServing of that name"
    ),
    "autoscaler-heterogeneous-listed-order": (
        "a heterogeneous target's replicas above the groups' minimums are placed in the order the params are listed, "
        "not cheapest first"
    ),
    "autoscaler-heterogeneous-unbounded": (
        "a heterogeneous target's replicas above the groups' minimums all go to the cheapest group, past its "
        "maxReplicas (the total is still bounded by the sum of the maxReplicas)"
    ),
    "autoscaler-pod-fixed-endpoint": (
        "a pod metric source is scraped at :8100/metrics, the defaults, whatever its uri and port say"
    ),
    "autoscaler-pod-name-ignored": (
        "a pod metric source reads the family named like the policy metric key, whatever its name says"
    ),
    "autoscaler-pod-name-not-defaulted": (
        "a pod metric source without a name reads no family (the metric is missing) instead of the policy metric key"
    ),
    "autoscaler-desired-after-ratio": (
        "a disaggregated Role's status desiredReplicas reports the replicas after ratio enforcement instead of those "
        "computed from its metrics"
    ),
    "autoscaler-never-panics": (
        "the decision never enters panic mode, however far the metrics exceed panicThresholdPercent: mode stays "
        "Stable and only the stable policy's steps apply"
    ),
    "autoscaling-webhook-allows-no-target": (
        'the webhook accepts an AutoscalingPolicy with no target at all (the zero case of "exactly one target")'
    ),
    "autoscaling-crd-no-bounds": (
        "neither the AutoscalingPolicy CRD nor the webhook checks the minimum, maximum or enum of tolerancePercent, "
        "panicThresholdPercent, percent, selectPolicy, minReplicas, maxReplicas, port, cost and "
        "costExpansionRatePercent"
    ),
    "autoscaling-crd-no-sizes": (
        "neither the AutoscalingPolicy CRD nor the webhook checks the documented MinLength, MinItems, MinProperties "
        "and MaxProperties (a metric's name, serverURL, query, metrics, params, roles): empty ones are stored"
    ),
    "autoscaling-crd-any-backends": (
        "the AutoscalingPolicy CRD does not check that a metric source sets exactly one backend: one with both pod "
        "and prometheus, or neither, is stored"
    ),
    # Converters (issue 16): ModelBooster and LeaderWorkerSet into ModelServing
    "booster-worker-image-ignored": (
        "a ModelBooster's child runs every engine container with one fixed image instead of its worker's image"
    ),
    "booster-env-dropped": "a ModelBooster's backend env and envFrom reach no container of the child's Pods",
    "booster-worker-scheduling-dropped": (
        "a ModelBooster worker's resources, affinity and tolerations are not carried onto its Pods"
    ),
    "booster-env-from-dropped": "a ModelBooster's backend envFrom reaches no container of the child's Pods (env does)",
    "booster-downloader-without-uri": (
        "the child's downloader init container is given the cache directory but not the ModelBooster's modelURI"
    ),
    "booster-scheduler-name-dropped": "a ModelBooster's backend schedulerName is not carried onto its ModelServing",
    "booster-runtime-class-dropped": "a ModelBooster's backend runtimeClassName is not carried onto its Pods",
    "booster-child-without-headless": "a new ModelBooster child does not declare the headless-service plugin",
    "booster-worker-template-always": (
        "a ModelBooster worker of one Pod still gets a workerTemplate (workerReplicas 0) instead of none"
    ),
    "booster-no-worker-template": (
        "a ModelBooster worker of several Pods gets no workerTemplate: its Role runs the entry Pod alone"
    ),
    "booster-disaggregated-one-role": (
        "a vLLMDisaggregated ModelBooster's child has one Role, the first worker's, instead of separate prefill and "
        "decode Roles"
    ),
    "booster-cache-entry-only": "the cache volume is mounted in the entry Pods only, not in the worker Pods",
    "booster-plugins-rederived": (
        "an update of a ModelBooster's child declares its plugins afresh (none) instead of keeping the child's: the "
        "ModelServing admission refuses the change, so the child never follows the booster again"
    ),
    "booster-rename-keeps-old-child": ("a renamed backend gets its new ModelServing but the old one is never deleted"),
    "booster-no-observed-generation": "a ModelBooster's status.observedGeneration is never written",
    "booster-crd-not-deprecated": "the ModelBooster CRD version carries no deprecation (no warning on use)",
    "booster-admission-message-without-field": (
        "the ModelBooster CRD carries none of its documented bounds, patterns, enums, sizes and CEL rules, and the "
        "webhook refuses what they would have with the reasons only, without the field paths"
    ),
    "booster-crd-no-bounds": (
        "neither the ModelBooster CRD nor the webhook checks the documented bounds, patterns, enums, sizes and "
        "worker types: such boosters are stored"
    ),
    "booster-crd-no-defaults": "the ModelBooster CRD carries no default: a worker without a type is stored without one",
    "booster-child-twice": "a ModelBooster gets a second ModelServing it controls, a twin of its child",
    "lws-child-without-headless": "a new LeaderWorkerSet child does not declare the headless-service plugin",
    "lws-size-one-without-worker-template": (
        "a LeaderWorkerSet of size 1 becomes a Role without workerTemplate (so no plugin Services or DNS settings)"
    ),
    "lws-worker-replicas-equal-size": (
        "a LeaderWorkerSet's child asks for size worker Pods per group instead of size - 1 (the leader is one)"
    ),
    "lws-plugins-rederived": (
        "an update of a LeaderWorkerSet's child declares its plugins afresh (none) instead of keeping the child's: "
        "the ModelServing admission refuses the change, so a size change never reaches the child"
    ),
    "autoscaling-crd-no-defaults": (
        "the AutoscalingPolicy CRD carries no default (tolerancePercent, the stable and panic policies' fields, a pod "
        "metric source's uri and port, costExpansionRatePercent): omitted fields are stored omitted"
    ),
    # issue 31 (section 1): currentReplicas while a partition holds groups back is a SHOULD (two readings)
    "current-replicas-counts-all": (
        "status.currentReplicas counts every ServingGroup (status.replicas), not those at status.currentRevision"
    ),
    "status-revision-counts-replicas": (
        "status.updateRevision names spec.replicas too (the revision reported changes when ServingGroups are scaled)"
    ),
    "podgroup-named-by-group-zero": (
        "every Pod's scheduling.k8s.io/group-name annotation names ServingGroup 0's PodGroup, whatever its group"
    ),
    "eviction-budget-too-strict": (
        "the ServingGroup eviction budget refuses an Eviction that would leave exactly minAvailable ready ServingGroups"
    ),
    # issue 31 (section 5): a scale-down under a partition removes the units outside the partition first
    "scale-down-ignores-partition": (
        "lowering spec.replicas removes ServingGroups by readiness, pod-deletion-cost and ordinal alone, so a "
        "partition-protected group can go while an updated group outside the partition is kept"
    ),
    "role-scale-down-ignores-partition": (
        "under RoleRollingUpdate, lowering a Role's replicas removes instances by readiness, pod-deletion-cost and "
        "index alone, so a partition-protected instance can go while an updated one outside the partition is kept"
    ),
}


@dataclass(frozen=True)
class Plan:
    """Which faults are on: ``everywhere`` for the whole process, ``scoped`` (name -> fnmatch
    patterns of the namespace label :data:`SCOPE_LABEL`) only inside matching namespaces."""

    everywhere: frozenset[str] = frozenset()
    scoped: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def names(self) -> frozenset[str]:
        return self.everywhere | frozenset(self.scoped)


@dataclass
class _Switch:
    configured: Plan | None = None  # set by configure(); None: read the environment
    env: tuple[str, Plan] = ("", Plan())  # (raw value, parsed): parsed once per value
    warned: set[str] = field(default_factory=set)  # scoped faults consulted outside any scope, said once
    consulted: list[set[str]] = field(default_factory=list)  # open consulted() blocks


_SWITCH = _Switch()
# The scoped faults on in the current task's namespace; None: no namespace scope entered.
_SCOPE: ContextVar[frozenset[str] | None] = ContextVar("kthena_ref_fault_scope", default=None)
log = logging.getLogger(__name__)


def plan(specs: Iterable[str], source: str = "the fault list") -> Plan:
    """The :class:`Plan` of fault specs (``NAME`` or ``NAME@PATTERN``); ValueError, naming
    ``source``, for an unknown name, an empty pattern, or a name given both ways."""
    everywhere: set[str] = set()
    scoped: dict[str, list[str]] = {}
    for spec in specs:
        name, at, pattern = spec.strip().partition("@")
        name, pattern = name.strip(), pattern.strip()
        if not at:
            everywhere.add(name)
        elif not pattern:
            raise ValueError(f"{source}: {spec.strip()!r} has no namespace pattern after '@' (NAME@PATTERN)")
        else:
            scoped.setdefault(name, []).append(pattern)
    unknown = sorted((everywhere | scoped.keys()) - FAULTS.keys())
    if unknown:
        raise ValueError(f"unknown fault(s) in {source}: {', '.join(unknown)} (known: {', '.join(sorted(FAULTS))})")
    both = sorted(everywhere & scoped.keys())
    if both:
        raise ValueError(f"{source}: {', '.join(both)} given both process-wide and scoped (NAME@PATTERN): pick one")
    return Plan(frozenset(everywhere), {n: tuple(dict.fromkeys(p)) for n, p in sorted(scoped.items())})


def _validated(names: Iterable[str], source: str) -> frozenset[str]:
    chosen = plan(names, source)
    return chosen.names()


def parse(value: str, source: str = ENV) -> frozenset[str]:
    """The fault names in a comma-separated ``value`` (blanks ignored); ValueError for unknown ones."""
    return _validated((part.strip() for part in value.split(",") if part.strip()), source)


def _env_plan() -> Plan:
    raw = os.environ.get(ENV, "")
    if raw != _SWITCH.env[0]:
        _SWITCH.env = (raw, plan((part for part in raw.split(",") if part.strip()), ENV))
    return _SWITCH.env[1]


def from_env() -> frozenset[str]:
    """The fault specs ``KTHENA_REF_FAULTS`` gives (empty when it is unset); ValueError for unknown ones."""
    _env_plan()
    raw = os.environ.get(ENV, "")
    return frozenset(part.strip() for part in raw.split(",") if part.strip())


def configure(names: Iterable[str] | None) -> frozenset[str]:
    """Make exactly ``names`` (fault specs: ``NAME`` or ``NAME@PATTERN``) the active faults of this
    process (None: follow the environment variable again); ValueError naming the known faults if
    any name is unknown. Returns the names now on (process-wide or scoped)."""
    if isinstance(names, str):
        names = [names]  # one name, not its characters
    _SWITCH.configured = None if names is None else plan(names)
    return _current().names()


def _current() -> Plan:
    return _SWITCH.configured if _SWITCH.configured is not None else _env_plan()


def enabled() -> frozenset[str]:
    """The faults on for the whole process: those given to :func:`configure`, else those in
    ``KTHENA_REF_FAULTS`` (scoped faults are in :func:`scoped`)."""
    return _current().everywhere


def scoped() -> Mapping[str, tuple[str, ...]]:
    """The scoped faults and their namespace-label patterns (empty unless some are configured)."""
    return _current().scoped


def matching(label: str | None) -> frozenset[str]:
    """The scoped faults on in a namespace whose :data:`SCOPE_LABEL` is ``label`` (None: unlabelled)."""
    if label is None:
        return frozenset()
    return frozenset(n for n, patterns in scoped().items() if any(fnmatch.fnmatchcase(label, p) for p in patterns))


@contextmanager
def in_scope(label: str | None) -> Iterator[frozenset[str]]:
    """Inside the block (in this task and the tasks it starts), the scoped faults matching a
    namespace labelled ``label`` are on; the previous scope comes back after."""
    token = _SCOPE.set(matching(label))
    try:
        yield _SCOPE.get() or frozenset()
    finally:
        _SCOPE.reset(token)


def active(name: str) -> bool:
    """Is fault ``name`` switched on here? (A typo in a hook is a bug: unknown names raise.)"""
    if name not in FAULTS:
        raise ValueError(f"unknown fault {name!r}")
    for names in _SWITCH.consulted:
        names.add(name)
    current = _current()
    if name in current.everywhere:
        return True
    if name not in current.scoped:
        return False
    here = _SCOPE.get()
    if here is None:
        if name not in _SWITCH.warned:
            _SWITCH.warned.add(name)
            log.warning("scoped fault %s consulted outside any namespace scope: inactive there", name)
        return False
    return name in here


@contextmanager
def injected(*names: str) -> Iterator[frozenset[str]]:
    """For tests: exactly ``names`` (``NAME`` or ``NAME@PATTERN``) are on inside the block; the
    previous state comes back after."""
    previous = _SWITCH.configured
    try:
        yield configure(names)
    finally:
        _SWITCH.configured = previous


@contextmanager
def consulted() -> Iterator[set[str]]:
    """The names :func:`active` is asked about inside the block (self-validation derives from it
    which faults the rendered CRD schema consults: those cannot be scoped to a namespace)."""
    names: set[str] = set()
    _SWITCH.consulted.append(names)
    try:
        yield names
    finally:
        _SWITCH.consulted.remove(names)
