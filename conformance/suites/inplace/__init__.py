"""InPlaceUpdate: updateMethod InPlace, its recreate fallback and progressDeadlineSeconds.

An in-place update is observed as a Pod that keeps its UID while its spec image changes; a
fallback as the Pods being replaced (new UIDs) together with an ``InPlaceUpdateFallback`` Event
with a message. While an image patch waits for the kubelet (spec image != running image) a Pod
counts as unavailable (see :mod:`conformance.framework.rollout_watch`), which is what makes an
in-place update's budget observable even where a restarted container is Ready at once.
"""

from __future__ import annotations

API = "api-reference-workload-v1alpha1.txt"
STRATEGY = f"{API}#RolloutStrategy"
UPDATE_METHOD = f"{API}#UpdateMethod"
ELIGIBILITY = "pr-1882-inplace-update-eligibility.txt#Eligibility"
PLUGIN_INTERACTION = "plugin-framework-and-headless-service.txt#Interaction with in-place image updates"
