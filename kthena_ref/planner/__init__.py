"""The reconcile planner: a ModelServing and what is observed in, the actions to take out (pure).

Why this package exists: everything the controller decides is decided here, from plain data and
without I/O, so it is unit tested in milliseconds; the runtime only observes and the executor
(:mod:`kthena_ref.executor`) only applies a :class:`.model.Plan`. The state of a ModelServing is
derived entirely from the objects it owns (Pods carry their group, role, instance and revision in
labels), so a restarted controller picks up exactly where it stopped.

One reconcile (:func:`.plan.plan`), step by step, and the module that does each:

1. observe: read our Pods (:mod:`.observe`), settle the deletions still pending and the
   replacement Pods that reused an identity, which are never adopted (:mod:`.deletions`), and
   group the rest into ServingGroups and Role instances (:mod:`.observe`);
2. revisions: the update revision and the Roles of every recorded one (:mod:`.revisions`), and
   the layout, which Role instances each group should have at which revision (:mod:`.layout`;
   under RoleRollingUpdate seeded from the Pods, :mod:`.role_rollout`);
3. retry the deletions decided earlier, with the UIDs they were decided for (:mod:`.deletions`);
4. recovery: error and lost Pods rebuild their ServingGroup, Role instance or themselves; Pods
   updated in place are followed to arrival or their progress deadline (:mod:`.recovery`);
5. scale and rollout: which groups stay, go or are created (:mod:`.scale`), by one
   ServingGroupRollingUpdate step when groups are outdated (:mod:`.group_rollout`, over the
   generic arithmetic of :mod:`.rollout`); under RoleRollingUpdate each kept group rolls its
   Roles (:mod:`.role_rollout`, with :mod:`.coordination`); outdated units are recreated, or
   patched in place when :mod:`.fallback` (asking :mod:`.eligibility`) finds nothing against it
   (the patch itself: :mod:`.inplace`);
6. create every missing Pod whose place is not still held, through the plugins' OnPodCreate
   (:mod:`.create`, :mod:`.hooks`; the Pod itself is built by :mod:`.pods`);
7. plugin-managed Services (:mod:`.services`), ControllerRevisions (:mod:`.revisions`) and
   Volcano PodGroups (:mod:`.podgroups`, with :mod:`.quantity`);
8. status and its conditions (:mod:`.status`), OnPodReady hooks (:mod:`.hooks`) and RoleRunning
   Events (:mod:`.status`).

The Plan and Observed types are in :mod:`.model`; names and labels in :mod:`.names`;
IntOrString arithmetic in :mod:`.intstr`. :mod:`.eviction` is not a reconcile step: it is the
eviction budget's decision, for the ``pods/eviction`` webhook, reading groups as the planner does.
"""
