"""In-place update eligibility (upstream PR #1882 as reviewed): every change an image patch cannot
apply is a finding with its field path; image-only changes, pacing fields and ModelServing fields
outside the Pods are none; plugins without in-place support always block (spec reading 29)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kthena_ref.api.types import ModelServing, PluginSpec
from kthena_ref.planner.eligibility import (
    Finding,
    ImageChange,
    check_eligibility,
    check_group_settings,
    check_role_eligibility,
    check_roles,
    default_pull_policy,
    image_changes,
    parse_image,
    plugin_blockers,
)
from kthena_ref.planner.fallback import InPlaceFindings
from kthena_ref.planner.names import LABEL_REVISION
from kthena_ref.planner.pods import controller_revision, group_settings, revision_of
from kthena_ref.planner.revisions import settings_by_revision
from kthena_ref.plugins.base import NoOpHooks, Registry
from kthena_ref.plugins.builtin import DemoPodTweaks, HeadlessService

from .builders import MS, container, deleted, edit_spec, set_image, world

Edit = Callable[[dict[str, Any]], None]
DIGEST = "sha256:" + "a" * 64

R0, R1, R2 = "spec.template.roles[0]", "spec.template.roles[1]", "spec.template.roles[2]"
E0 = f"{R0}.entryTemplate.spec"
W0 = f"{R0}.workerTemplate.spec"
E1 = f"{R1}.entryTemplate.spec"
C00 = f"{E0}.containers[0]"


def base() -> ModelServing:
    """Role a (entry + 1 worker, img:v1 / img:v1-worker) and Role b (entry only, img:v1)."""
    return MS("ms").replicas(2).role("a", 1, 1, image="img:v1").role("b", 2, 0, image="img:v1").build()


# -- edits on a spec (API dict) ------------------------------------------------------------------


def chain(*edits: Edit) -> Edit:
    def change(spec: dict[str, Any]) -> None:
        for edit in edits:
            edit(spec)

    return change


def at(path: str, value: Any) -> Edit:
    """Set ``value`` at a dotted path (integers index lists; ``~`` deletes the key)."""

    def change(spec: dict[str, Any]) -> None:
        parts: list[Any] = [int(p) if p.isdigit() else p for p in path.split(".")]
        node: Any = spec
        for part in parts[:-1]:
            node = node[part] if isinstance(part, int) or part in node else node.setdefault(part, {})
        if value == "~":
            del node[parts[-1]]
        else:
            node[parts[-1]] = value

    return change


def image(value: str, role: int = 0, k: int = 0) -> Edit:
    return at(f"template.roles.{role}.entryTemplate.spec.containers.{k}.image", value)


def container_field(key: str, value: Any, role: int = 0, k: int = 0) -> Edit:
    return at(f"template.roles.{role}.entryTemplate.spec.containers.{k}.{key}", value)


def pod_field(key: str, value: Any, role: int = 0, template: str = "entryTemplate") -> Edit:
    return at(f"template.roles.{role}.{template}.spec.{key}", value)


def containers(*items: dict[str, Any], role: int = 0) -> Edit:
    return at(f"template.roles.{role}.entryTemplate.spec.containers", [dict(c) for c in items])


def roles(*names: str) -> Edit:
    """Keep, reorder or rename the roles: each name is ``old`` or ``old=new``."""

    def change(spec: dict[str, Any]) -> None:
        by_name = {r["name"]: r for r in spec["template"]["roles"]}
        out = []
        for item in names:
            old, _, new = item.partition("=")
            role = dict(by_name[old])
            role["name"] = new or old
            out.append(role)
        spec["template"]["roles"] = out

    return change


def add_role(name: str, image: str = "img:v1") -> Edit:
    def change(spec: dict[str, Any]) -> None:
        spec["template"]["roles"].append(
            {"name": name, "entryTemplate": {"spec": {"containers": [container(image=image)]}}, "workerReplicas": 0}
        )

    return change


def plugins(*items: dict[str, Any]) -> Edit:
    return at("plugins", [dict(p) for p in items])


V2 = image("img:v2")  # an image-only change of role a's entry container
NOTHING: Edit = chain()

TWO_CONTAINERS = containers(container("main", "img:v1"), container("side", "side:v1"))

# (old: edit of base(), new: edit of old, expected [(field, fragment of the reason)])
CASES = [
    # image-only changes: none
    pytest.param(NOTHING, NOTHING, [], id="identical"),
    pytest.param(NOTHING, V2, [], id="image-only-entry"),
    pytest.param(NOTHING, at("template.roles.0.workerTemplate.spec.containers.0.image", "img:v2"), [], id="image-only-worker"),
    pytest.param(TWO_CONTAINERS, chain(image("img:v2"), image("side:v2", k=1)), [], id="image-only-two-containers"),
    pytest.param(NOTHING, chain(V2, image("img:v3", role=1)), [], id="image-only-several-roles"),
    pytest.param(NOTHING, chain(V2, image("reg.example.com:5000/team/img:v2", role=1)), [], id="image-only-registry-host"),
    # any other Pod template field
    pytest.param(container_field("command", ["serve"]), chain(V2, container_field("command", ["serve", "--fast"])),
                 [(f"{C00}.command", "only regular-container images can change in place; command changed from 1 to 2 items")], id="command"),
    pytest.param(container_field("command", ["serve"]), container_field("command", ["run"]),
                 [(f"{C00}.command[0]", "command[0] changed from serve to run")], id="command-item"),
    pytest.param(NOTHING, container_field("args", ["--x"]), [(f"{C00}.args", "args added")], id="args-added"),
    pytest.param(container_field("env", [{"name": "A", "value": "1"}]), container_field("env", [{"name": "A", "value": "2"}]),
                 [(f"{C00}.env[0].value", "env[0].value changed from 1 to 2")], id="env-value"),
    pytest.param(container_field("env", [{"name": "A", "value": "1"}]), container_field("env", "~"),
                 [(f"{C00}.env", "env removed")], id="env-removed"),
    pytest.param(container_field("resources", {"requests": {"cpu": "1"}}), container_field("resources", {"requests": {"cpu": "2"}}),
                 [(f"{C00}.resources.requests.cpu", "changed from 1 to 2")], id="resources"),
    pytest.param(NOTHING, at("template.roles.0.entryTemplate.metadata.labels", {"app": "x"}),
                 [(f"{R0}.entryTemplate.metadata.labels", "metadata.labels added")], id="label-added"),
    pytest.param(at("template.roles.0.entryTemplate.metadata.labels", {"app": "x"}), at("template.roles.0.entryTemplate.metadata.labels", {"app": "x", "tier": "y"}),
                 [(f"{R0}.entryTemplate.metadata.labels.tier", "metadata.labels.tier added")], id="label-key-added"),
    pytest.param(at("template.roles.0.entryTemplate.metadata.annotations", {"example.com/a": "1"}),
                 chain(V2, at("template.roles.0.entryTemplate.metadata.annotations", {"example.com/a": "2"})),
                 [(f'{R0}.entryTemplate.metadata.annotations["example.com/a"]', "changed from 1 to 2")], id="annotation"),
    pytest.param(at("template.roles.0.workerTemplate.metadata.labels", {"a": "1"}), at("template.roles.0.workerTemplate.metadata.labels", {"a": "2"}),
                 [(f"{R0}.workerTemplate.metadata.labels.a", "changed from 1 to 2")], id="worker-label"),
    pytest.param(NOTHING, pod_field("volumes", [{"name": "v", "emptyDir": {}}]), [(f"{E0}.volumes", "volumes added")], id="volumes"),
    pytest.param(NOTHING, pod_field("nodeSelector", {"gpu": "a100"}, template="workerTemplate"),
                 [(f"{W0}.nodeSelector", "nodeSelector added")], id="worker-pod-field"),
    pytest.param(pod_field("schedulerName", "a"), pod_field("schedulerName", "b"), [(f"{E0}.schedulerName", "changed from a to b")], id="template-scheduler"),
    pytest.param(pod_field("initContainers", [container("init", "init:v1")]), pod_field("initContainers", [container("init", "init:v2")]),
                 [(f"{E0}.initContainers[0].image", "initContainers[0].image changed from init:v1 to init:v2")], id="init-container-image"),
    pytest.param(NOTHING, pod_field("initContainers", [container("init", "init:v1")]), [(f"{E0}.initContainers", "added")], id="init-container-added"),
    # empty values make the same Pod
    pytest.param(NOTHING, chain(V2, at("template.roles.0.entryTemplate.metadata", {"labels": {}}), pod_field("volumes", [])), [], id="empty-equals-absent"),
    # containers: names, order, additions, removals
    pytest.param(NOTHING, containers(container("engine", "img:v2")),
                 [(f"{C00}.name", "container main renamed to engine")], id="container-renamed"),
    pytest.param(TWO_CONTAINERS, containers(container("side", "side:v1"), container("main", "img:v1")),
                 [(f"{E0}.containers", "containers reordered from main, side to side, main")], id="containers-reordered"),
    pytest.param(NOTHING, containers(container("main", "img:v2"), container("side", "side:v1")),
                 [(f"{E0}.containers[1]", "container side added")], id="container-added"),
    pytest.param(TWO_CONTAINERS, containers(container("main", "img:v2")),
                 [(f"{E0}.containers[1]", "container side removed")], id="container-removed"),
    # roles: names, order, additions, removals, workerReplicas, workerTemplate
    pytest.param(NOTHING, roles("a", "b=c"), [(f"{R1}.name", "role b renamed to c")], id="role-renamed"),
    pytest.param(NOTHING, add_role("c"), [(R2, "role c added")], id="role-added"),
    pytest.param(NOTHING, roles("a"), [(R1, "role b removed")], id="role-removed"),
    pytest.param(NOTHING, roles("b", "a"), [("spec.template.roles", "roles reordered from a, b to b, a")], id="roles-reordered"),
    pytest.param(NOTHING, chain(roles("b"), add_role("c")), [(R1, "role c added"), (R0, "role a removed")], id="role-replaced-elsewhere"),
    pytest.param(NOTHING, at("template.roles.0.workerReplicas", 2), [(f"{R0}.workerReplicas", "workerReplicas changed from 1 to 2")], id="worker-replicas"),
    pytest.param(NOTHING, at("template.roles.1.workerTemplate", {"spec": {"containers": [container()]}}),
                 [(f"{R1}.workerTemplate", "workerTemplate added")], id="worker-template-added"),
    pytest.param(NOTHING, at("template.roles.0.workerTemplate", "~"), [(f"{R0}.workerTemplate", "workerTemplate removed")], id="worker-template-removed"),
    # restartPolicy must resolve to Always where images change; regular containers may not set restart rules
    pytest.param(pod_field("restartPolicy", "OnFailure"), V2,
                 [(f"{E0}.restartPolicy", "restartPolicy is OnFailure, but in-place updates need Always")], id="restart-policy-on-failure"),
    pytest.param(pod_field("restartPolicy", "Never"), V2,
                 [(f"{E0}.restartPolicy", "restartPolicy is Never, but in-place updates need Always")], id="restart-policy-never"),
    pytest.param(pod_field("restartPolicy", "Never"), image("img:v2", role=1), [], id="restart-policy-never-where-no-image-changes"),
    pytest.param(NOTHING, chain(V2, pod_field("restartPolicy", "Never")),
                 [(f"{E0}.restartPolicy", "restartPolicy changed from Always to Never")], id="restart-policy-changed"),
    pytest.param(NOTHING, chain(V2, pod_field("restartPolicy", "Always")), [], id="restart-policy-always-explicit"),
    pytest.param(container_field("restartPolicy", "Always"), V2,
                 [(f"{C00}.restartPolicy", "regular containers may not set restartPolicy")], id="container-restart-policy"),
    pytest.param(container_field("restartPolicy", "Never"), container_field("restartPolicy", "~"),
                 [(f"{C00}.restartPolicy", "restartPolicy removed")], id="container-restart-policy-removed"),
    pytest.param(chain(container_field("restartPolicy", "Never"), container_field("restartPolicyRules", [{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}])), V2,
                 [(f"{C00}.restartPolicy", "may not set restartPolicy"), (f"{C00}.restartPolicyRules", "may not set restartPolicyRules")], id="container-restart-policy-rules"),
    # imagePullPolicy: omitted = as the API server defaults it
    pytest.param(NOTHING, image("img:latest"),
                 [(f"{C00}.imagePullPolicy", "imagePullPolicy is omitted and the image changes from img:v1 to img:latest, so the effective pull policy changes from IfNotPresent to Always")], id="pull-v1-to-latest-omitted"),
    pytest.param(NOTHING, image("img:v2"), [], id="pull-v1-to-v2-omitted"),
    pytest.param(image("img:latest"), image("img:v2"), [(f"{C00}.imagePullPolicy", "from Always to IfNotPresent")], id="pull-latest-to-v2-omitted"),
    pytest.param(image("img"), image("img:v2"), [(f"{C00}.imagePullPolicy", "from Always to IfNotPresent")], id="pull-untagged-to-v2-omitted"),
    pytest.param(image("img"), image("img:latest"), [], id="pull-untagged-to-latest-omitted"),
    pytest.param(container_field("imagePullPolicy", "Always"), image("img:latest"), [], id="pull-explicit-always-both"),
    pytest.param(NOTHING, chain(image("img:latest"), container_field("imagePullPolicy", "IfNotPresent")), [], id="pull-explicit-keeps-the-old-policy"),
    pytest.param(NOTHING, container_field("imagePullPolicy", "IfNotPresent"), [], id="pull-explicit-equal-to-default"),
    pytest.param(container_field("imagePullPolicy", "IfNotPresent"), chain(V2, container_field("imagePullPolicy", "Always")),
                 [(f"{C00}.imagePullPolicy", "imagePullPolicy changed from IfNotPresent to Always")], id="pull-explicit-changed"),
    pytest.param(NOTHING, image(f"img@{DIGEST}"), [], id="pull-tag-to-digest"),
    pytest.param(image("img"), image(f"img@{DIGEST}"), [(f"{C00}.imagePullPolicy", "from Always to IfNotPresent")], id="pull-untagged-to-digest"),
    pytest.param(NOTHING, image(f"img:latest@{DIGEST}"), [(f"{C00}.imagePullPolicy", "from IfNotPresent to Always")], id="pull-latest-with-digest"),
    pytest.param(image("reg:5000/img:v1"), image("reg:5000/img:v2"), [], id="pull-registry-port-tags"),
    pytest.param(image("reg:5000/img:v1"), image("reg:5000/img"), [(f"{C00}.imagePullPolicy", "from IfNotPresent to Always")], id="pull-registry-port-untagged"),
    # ModelServing fields outside the Roles
    pytest.param(NOTHING, chain(V2, at("schedulerName", "other")), [("spec.schedulerName", "schedulerName changed from volcano to other")], id="scheduler-name"),
    pytest.param(NOTHING, plugins({"name": "demo-pod-tweaks"}), [("spec.plugins[0]", "plugin demo-pod-tweaks added to the chain")], id="plugin-added"),
    pytest.param(plugins({"name": "demo-pod-tweaks"}), at("plugins", "~"), [("spec.plugins[0]", "plugin demo-pod-tweaks removed from the chain")], id="plugin-removed"),
    pytest.param(plugins({"name": "demo-pod-tweaks"}), plugins({"name": "demo-pod-tweaks", "config": {"runtimeClassName": "x"}}),
                 [("spec.plugins[0]", "plugin demo-pod-tweaks changed (config or scope)")], id="plugin-config"),
    pytest.param(plugins({"name": "demo-pod-tweaks"}), chain(V2, plugins({"name": "demo-pod-tweaks", "type": "BuiltIn", "config": {}, "scope": {"target": "All"}})),
                 [], id="plugin-equivalent-representation"),
    pytest.param(NOTHING, at("template.gangPolicy", {"minRoleReplicas": {"a": 1}}), [("spec.template.gangPolicy", "gangPolicy added")], id="gang-policy-added"),
    pytest.param(at("template.gangPolicy", {"minRoleReplicas": {"a": 1}}), at("template.gangPolicy", {"minRoleReplicas": {"a": 2}}),
                 [("spec.template.gangPolicy.minRoleReplicas.a", "changed from 1 to 2")], id="gang-policy-changed"),
    pytest.param(NOTHING, at("template.networkTopology", {"groupPolicy": {"mode": "hard", "highestTierAllowed": 1}}),
                 [("spec.template.networkTopology", "networkTopology added")], id="network-topology"),
    # plugins without in-place support block even image-only updates (spec reading 29)
    pytest.param(plugins({"name": "headless-service"}), V2,
                 [("spec.plugins[0]", "plugin headless-service does not support in-place updates")], id="headless-service-image-only"),
    pytest.param(plugins({"name": "demo-pod-tweaks", "config": {"env": [{"name": "X", "value": "1"}]}}), V2, [], id="demo-pod-tweaks-image-only"),
    pytest.param(plugins({"name": "demo-pod-tweaks"}, {"name": "headless-service"}), V2,
                 [("spec.plugins[1]", "plugin headless-service does not support in-place updates")], id="headless-service-second"),
    # pacing and ModelServing fields that do not shape Pods: never findings
    pytest.param(NOTHING, chain(V2, at("template.roles.0.replicas", 5), at("template.roles.0.maxUnavailable", "50%"),
                                at("template.roles.0.maxSurge", 2), at("template.roles.0.partition", 1)), [], id="role-pacing"),
    pytest.param(NOTHING, chain(V2, at("replicas", 7), at("rolloutStrategy", {"type": "RoleRollingUpdate", "updateMethod": "InPlace"}),
                                at("recoveryPolicy", "None"), at("template.restartGracePeriodSeconds", 30), at("revisionHistoryLimit", 2)),
                 [], id="modelserving-pacing"),
    # exhaustive: every finding, in spec order
    pytest.param(container_field("env", [{"name": "A", "value": "1"}]),
                 chain(at("schedulerName", "other"), image("img:latest"), container_field("env", [{"name": "A", "value": "2"}]),
                       at("template.roles.0.workerReplicas", 2), at("template.roles.1.entryTemplate.spec.hostNetwork", True)),
                 [("spec.schedulerName", "schedulerName"), (f"{R0}.workerReplicas", "workerReplicas"), (f"{C00}.env[0].value", "env"),
                  (f"{C00}.imagePullPolicy", "imagePullPolicy"), (f"{E1}.hostNetwork", "hostNetwork added")], id="exhaustive"),
]  # fmt: skip


@pytest.mark.parametrize(("old_edit", "new_edit", "want"), CASES)
def test_check_eligibility(old_edit: Edit, new_edit: Edit, want: list[tuple[str, str]]) -> None:
    old = edit_spec(base(), old_edit)
    new = edit_spec(old, new_edit)
    findings = check_eligibility(old, new)
    assert [f.field for f in findings] == [field for field, _ in want], findings
    for finding, (_, fragment) in zip(findings, want, strict=True):
        assert fragment in finding.reason
        assert "\n" not in finding.reason
    assert findings == check_eligibility(old, new)  # deterministic


@pytest.mark.parametrize(
    ("new_edit", "role", "want"),
    [
        pytest.param(V2, "a", [], id="image-only"),
        pytest.param(container_field("command", ["x"], role=1), "a", [], id="other-role-changed"),
        pytest.param(container_field("command", ["x"], role=1), "b", [(f"{E1}.containers[0].command", "command added")], id="own-role-changed"),
        pytest.param(chain(V2, roles("b", "a")), "a", [], id="roles-reordered-not-its-concern"),
        pytest.param(roles("b", "a"), "b", [], id="reordered-path-from-new"),
        pytest.param(chain(roles("b", "a"), container_field("command", ["x"], role=1)), "a", [(f"{E1}.containers[0].command", "command")], id="path-indexes-new"),
        pytest.param(roles("a"), "b", [(R1, "role b removed")], id="role-removed"),
        pytest.param(add_role("c"), "c", [(R2, "role c added")], id="role-added"),
        pytest.param(at("template.roles.0.workerReplicas", 3), "a", [(f"{R0}.workerReplicas", "workerReplicas")], id="worker-replicas"),
        pytest.param(chain(image("img:v2", role=1), at("schedulerName", "x")), "b", [("spec.schedulerName", "schedulerName")], id="modelserving-field"),
        pytest.param(chain(image("img:v2", role=1), plugins({"name": "headless-service"})), "b",
                     [("spec.plugins[0]", "added to the chain"), ("spec.plugins[0]", "does not support in-place")], id="plugin-blocker"),
    ],
)  # fmt: skip
def test_check_role_eligibility_sees_only_its_role(new_edit: Edit, role: str, want: list[tuple[str, str]]) -> None:
    old = base()
    new = edit_spec(old, new_edit)
    findings = check_role_eligibility(old, new, role)
    assert [f.field for f in findings] == [field for field, _ in want], findings
    for finding, (_, fragment) in zip(findings, want, strict=True):
        assert fragment in finding.reason


def test_a_role_in_neither_revision_is_an_error() -> None:
    ms = base()
    with pytest.raises(ValueError, match="'x' is in neither"):
        check_role_eligibility(ms, ms, "x")
    with pytest.raises(ValueError, match="'x' is in neither"):
        image_changes(ms.spec.template.roles, ms.spec.template.roles, role="x")


def test_check_roles_compares_the_roles_of_two_revisions() -> None:
    old = base()
    new = edit_spec(old, chain(V2, roles("b", "a"), at("template.roles.1.workerReplicas", 2)))
    assert check_roles(old.spec.template.roles, new.spec.template.roles) == [
        Finding(f"{R1}.workerReplicas", "only regular-container images can change in place; workerReplicas changed from 1 to 2"),
        Finding("spec.template.roles", "only regular-container images can change in place; roles reordered from a, b to b, a"),
    ]  # fmt: skip
    assert check_roles(old.spec.template.roles, new.spec.template.roles, role="b") == []


@pytest.mark.parametrize(
    ("old_edit", "new_edit", "role", "want"),
    [
        pytest.param(NOTHING, NOTHING, None, [], id="none"),
        pytest.param(NOTHING, V2, None, [ImageChange("a", "entry", "main", "img:v1", "img:v2")], id="entry"),
        pytest.param(NOTHING, chain(image("img:v3", role=1), V2, at("template.roles.0.workerTemplate.spec.containers.0.image", "w:v2")), None,
                     [ImageChange("a", "entry", "main", "img:v1", "img:v2"), ImageChange("a", "worker", "main", "img:v1-worker", "w:v2"),
                      ImageChange("b", "entry", "main", "img:v1", "img:v3")], id="order-of-new"),
        pytest.param(NOTHING, chain(image("img:v3", role=1), V2), "b", [ImageChange("b", "entry", "main", "img:v1", "img:v3")], id="one-role"),
        pytest.param(TWO_CONTAINERS, containers(container("side", "side:v2"), container("main", "img:v1")), None,
                     [ImageChange("a", "entry", "side", "side:v1", "side:v2")], id="by-container-name"),
        pytest.param(NOTHING, chain(roles("a=z", "b"), image("img:v2")), None, [ImageChange("z", "entry", "main", "img:v1", "img:v2")], id="renamed-role"),
        pytest.param(NOTHING, chain(roles("a"), image("img:v2")), "b", [], id="removed-role"),
    ],
)  # fmt: skip
def test_image_changes(old_edit: Edit, new_edit: Edit, role: str | None, want: list[ImageChange]) -> None:
    old = edit_spec(base(), old_edit)
    new = edit_spec(old, new_edit)
    assert image_changes(old.spec.template.roles, new.spec.template.roles, role=role) == want


class Custom(NoOpHooks):
    supports_in_place = True

    def __init__(self, spec: PluginSpec, field: str) -> None:
        self.name = spec.name


class NoInPlace(Custom):
    supports_in_place = False


@pytest.mark.parametrize(
    ("items", "want"),
    [
        pytest.param([], [], id="no-plugins"),
        pytest.param([{"name": "demo-pod-tweaks"}], [], id="demo-pod-tweaks"),
        pytest.param([{"name": "headless-service"}], [("spec.plugins[0]", "plugin headless-service does not support in-place updates")], id="headless-service"),
        pytest.param([{"name": "custom"}, {"name": "no-in-place"}], [("spec.plugins[1]", "plugin no-in-place does not support")], id="declared-by-the-class"),
        pytest.param([{"name": "unknown"}], [("spec.plugins[0]", "plugin unknown cannot be checked for in-place support: 'unknown' is not a registered plugin")], id="unregistered"),
        pytest.param([{"name": "demo-pod-tweaks", "config": {"bogus": 1}}], [("spec.plugins[0]", "plugin demo-pod-tweaks cannot be checked")], id="invalid-config"),
    ],
)  # fmt: skip
def test_plugin_blockers(items: list[dict[str, Any]], want: list[tuple[str, str]]) -> None:
    registry = Registry()
    for name, factory in (("demo-pod-tweaks", DemoPodTweaks), ("headless-service", HeadlessService),
                          ("custom", Custom), ("no-in-place", NoInPlace)):  # fmt: skip
        registry.register(name, factory)
    ms = edit_spec(base(), plugins(*items))
    findings = plugin_blockers(ms, registry=registry)
    assert [f.field for f in findings] == [field for field, _ in want]
    for finding, (_, fragment) in zip(findings, want, strict=True):
        assert fragment in finding.reason


def test_builtin_plugins_declare_in_place_support() -> None:
    assert DemoPodTweaks.supports_in_place is True
    assert HeadlessService.supports_in_place is False
    ms = edit_spec(base(), plugins({"name": "headless-service"}))
    assert [f.field for f in plugin_blockers(ms)] == ["spec.plugins[0]"]


@pytest.mark.parametrize(
    ("ref", "parsed", "policy"),
    [
        ("img", ("img", "", ""), "Always"),
        ("img:v1", ("img", "v1", ""), "IfNotPresent"),
        ("img:latest", ("img", "latest", ""), "Always"),
        ("library/img:v1", ("library/img", "v1", ""), "IfNotPresent"),
        ("reg:5000/img", ("reg:5000/img", "", ""), "Always"),
        ("reg:5000/img:v1", ("reg:5000/img", "v1", ""), "IfNotPresent"),
        ("reg.example.com:5000/a/b:latest", ("reg.example.com:5000/a/b", "latest", ""), "Always"),
        ("localhost:5000/img", ("localhost:5000/img", "", ""), "Always"),
        ("[::1]:5000/img:v1", ("[::1]:5000/img", "v1", ""), "IfNotPresent"),
        (f"img@{DIGEST}", ("img", "", DIGEST), "IfNotPresent"),
        (f"reg:5000/img@{DIGEST}", ("reg:5000/img", "", DIGEST), "IfNotPresent"),
        (f"img:v1@{DIGEST}", ("img", "v1", DIGEST), "IfNotPresent"),
        (f"img:latest@{DIGEST}", ("img", "latest", DIGEST), "Always"),
        ("Img:v1", None, "IfNotPresent"),  # invalid: the API server's defaulting ignores the error
        ("", None, "IfNotPresent"),
    ],
)
def test_image_references(ref: str, parsed: tuple[str, str, str] | None, policy: str) -> None:
    assert parse_image(ref) == parsed
    assert default_pull_policy(ref) == policy


# -- gangPolicy and networkTopology in the controller: recorded with each revision ----------------

GANG = {"minRoleReplicas": {"r": 1}}
TOPOLOGY = {"groupPolicy": {"mode": "hard", "highestTierAllowed": 2}, "rolePolicy": {"mode": "soft"}}


def in_place_ms(**template: Any) -> ModelServing:
    """One single-Pod Role, ServingGroupRollingUpdate with updateMethod InPlace (and ``template`` fields)."""
    ms = MS().role("r", 1, 0).rollout(type="ServingGroupRollingUpdate").build()
    return edit_spec(
        ms, chain(at("rolloutStrategy.updateMethod", "InPlace"), *(at(f"template.{k}", v) for k, v in template.items()))
    )


@pytest.mark.parametrize(
    ("recorded", "template", "want"),
    [
        pytest.param({}, {}, [], id="neither-set"),
        pytest.param({"gangPolicy": GANG}, {"gangPolicy": GANG}, [], id="same-gang-policy"),
        pytest.param({}, {"gangPolicy": {}}, [], id="empty-is-absent"),
        pytest.param({}, {"gangPolicy": GANG}, [("spec.template.gangPolicy", "gangPolicy added")], id="gang-added"),
        pytest.param({"gangPolicy": GANG}, {"gangPolicy": {"minRoleReplicas": {"r": 0}}},
                     [("spec.template.gangPolicy.minRoleReplicas.r", "changed from 1 to 0")], id="gang-changed"),
        pytest.param({}, {"networkTopology": TOPOLOGY}, [("spec.template.networkTopology", "networkTopology added")], id="topology-added"),
        pytest.param({"networkTopology": TOPOLOGY}, {"networkTopology": {"groupPolicy": TOPOLOGY["groupPolicy"]}},
                     [("spec.template.networkTopology.rolePolicy", "rolePolicy removed")], id="role-policy-removed"),
        pytest.param({"gangPolicy": GANG}, {"networkTopology": TOPOLOGY},
                     [("spec.template.gangPolicy", "gangPolicy removed"), ("spec.template.networkTopology", "added")], id="both"),
    ],
)  # fmt: skip
def test_check_group_settings(recorded: dict[str, Any], template: dict[str, Any], want: list[tuple[str, str]]) -> None:
    findings = check_group_settings(recorded, in_place_ms(**template))
    assert [f.field for f in findings] == [field for field, _ in want], findings
    for finding, (_, fragment) in zip(findings, want, strict=True):
        assert fragment in finding.reason


def test_each_controller_revision_records_the_settings_it_was_made_under() -> None:
    ms = in_place_ms(gangPolicy=GANG, networkTopology=TOPOLOGY)
    assert group_settings(ms) == {"gangPolicy": GANG, "networkTopology": TOPOLOGY}
    assert group_settings(in_place_ms()) == {}
    cr = controller_revision(ms, "rev1", ms.spec.template.roles, 1)
    assert cr["data"]["servingGroup"] == {"gangPolicy": GANG, "networkTopology": TOPOLOGY}
    legacy = {"metadata": {"labels": {LABEL_REVISION: "old"}}, "data": {"roles": []}}  # made before they were recorded
    recorded = {"metadata": {"labels": {LABEL_REVISION: "rev0"}}, "data": {"roles": [], "servingGroup": {}}}
    known = settings_by_revision(ms, [legacy, recorded])
    assert known == {"rev0": {}, revision_of(ms.spec.template.roles): group_settings(ms)}  # "old" is unknown


def test_in_place_findings_compare_the_revisions_recorded_settings() -> None:
    ms = in_place_ms(gangPolicy=GANG)
    roles = {"old": ms.spec.template.roles}
    assert not InPlaceFindings(ms, roles, {"old": {}}).in_place("old")  # gangPolicy added since
    assert InPlaceFindings(ms, roles, {"old": {"gangPolicy": GANG}}).in_place("old")
    assert InPlaceFindings(ms, roles, {}).in_place("old")  # nothing recorded: nothing to compare
    assert InPlaceFindings(ms, roles).in_place("old")


@pytest.mark.parametrize("field", ["gangPolicy", "networkTopology"])
def test_a_settings_change_with_an_image_change_recreates_and_reports(field: str) -> None:
    w = world(in_place_ms())
    w.ms = edit_spec(
        w.ms, chain(at(f"template.{field}", GANG if field == "gangPolicy" else TOPOLOGY), set_image("img:v2"))
    )
    p = w.plan()
    assert deleted(p) == ["ms-0-r-0-0"] and not p.patch_pods
    fallback = [e for e in p.events if e.reason == "InPlaceUpdateFallback"]
    assert fallback and f"spec.template.{field}" in fallback[0].message
    w.converge()
    assert {pod["spec"]["containers"][0]["image"] for pod in w.pods.values()} == {"img:v2"}


def test_a_settings_change_alone_rolls_nothing_and_an_image_change_after_it_falls_back() -> None:
    # The revision (and so a rollout) is the Roles only; the ControllerRevision keeps the settings
    # it was made under, so the next image change still finds the gangPolicy change (conservative).
    w = world(in_place_ms())
    w.ms = edit_spec(w.ms, at("template.gangPolicy", GANG))
    p = w.plan()
    assert not deleted(p) and not p.patch_pods and not p.create_revisions
    w.ms = edit_spec(w.ms, set_image("img:v2"))
    assert deleted(w.plan()) == ["ms-0-r-0-0"]


def test_an_image_change_under_unchanged_settings_stays_in_place() -> None:
    w = world(in_place_ms(gangPolicy=GANG, networkTopology=TOPOLOGY))
    w.ms = edit_spec(w.ms, set_image("img:v2"))
    p = w.plan()
    assert not deleted(p) and [patch.name for patch in p.patch_pods] == ["ms-0-r-0-0"]
