"""Deployment manifests: they render, name what the controller needs, and match its command line."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from kthena_ref.cli import main, run_command


def render(*args: str) -> list[dict[str, object]]:
    result = CliRunner().invoke(main, ["manifests", *args])
    assert result.exit_code == 0, result.output
    return [d for d in yaml.safe_load_all(result.output) if d]


def test_default_manifests_are_the_crds_and_the_cluster_role() -> None:
    kinds = [(d["kind"], d["metadata"]["name"]) for d in render()]  # type: ignore[index]
    assert kinds == [
        ("CustomResourceDefinition", "modelservings.workload.serving.volcano.sh"),
        ("CustomResourceDefinition", "autoscalingpolicies.workload.serving.volcano.sh"),
        ("CustomResourceDefinition", "modelboosters.workload.serving.volcano.sh"),
        ("ClusterRole", "kthena-ref-controller"),
        ("CustomResourceDefinition", "podgroups.scheduling.volcano.sh"),
    ]


def test_the_crd_manifests_are_the_generated_crds() -> None:
    from kthena_ref.api.autoscaling_crd import crd as autoscaling_crd
    from kthena_ref.api.crd import crd
    from kthena_ref.api.modelbooster_crd import crd as modelbooster_crd

    assert render("crd") == [crd()]  # the ModelServing CRD alone, as before AutoscalingPolicy
    assert render("autoscaling-crd") == [autoscaling_crd()]
    assert render("modelbooster-crd") == [modelbooster_crd()]


def test_controller_manifest_fills_image_and_ca_bundle(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\n")
    docs = {
        d["kind"]: d for d in render("controller", "--image", "reg.example/kthena-ref:1", "--ca-bundle-file", str(ca))
    }
    container = docs["Deployment"]["spec"]["template"]["spec"]["containers"][0]  # type: ignore[index]
    assert container["image"] == "reg.example/kthena-ref:1"
    webhook = docs["ValidatingWebhookConfiguration"]["webhooks"][0]  # type: ignore[index]
    assert webhook["clientConfig"]["caBundle"] == "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="
    assert webhook["clientConfig"]["service"]["path"] == "/validate-modelserving"


def test_controller_manifest_args_are_flags_the_run_command_accepts(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    docs = {d["kind"]: d for d in render("controller", "--ca-bundle-file", str(ca))}
    args = docs["Deployment"]["spec"]["template"]["spec"]["containers"][0]["args"]  # type: ignore[index]
    known = {opt for p in run_command.params for opt in p.opts + p.secondary_opts}
    assert args[0] == "run"
    assert {a.split("=")[0] for a in args[1:]} <= known


def test_controller_manifest_without_a_ca_bundle_is_a_clear_error() -> None:
    result = CliRunner().invoke(main, ["manifests", "controller"])
    assert result.exit_code == 1 and "--ca-bundle-file" in result.output and "Traceback" not in result.output


def test_cluster_role_grants_what_the_controller_writes() -> None:
    role = next(d for d in render("rbac") if d["kind"] == "ClusterRole")
    grants = {
        (g, r): set(rule["verbs"]) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
    }  # type: ignore[index]
    assert {"create", "delete", "list", "watch"} <= grants[("", "pods")]
    assert {"patch"} <= grants[("workload.serving.volcano.sh", "modelservings/status")]
    assert {"create", "delete"} <= grants[("apps", "controllerrevisions")]
    assert {"create"} <= grants[("", "events")]
    assert {"get", "list", "watch", "patch"} <= grants[("workload.serving.volcano.sh", "modelservings")]
    assert {"get", "list", "watch"} <= grants[("workload.serving.volcano.sh", "autoscalingpolicies")]
    assert {"get", "update", "patch"} <= grants[("workload.serving.volcano.sh", "autoscalingpolicies/status")]
    # the converters: children made, updated and deleted; sources read; a booster's status written
    assert {"create", "update", "delete"} <= grants[("workload.serving.volcano.sh", "modelservings")]
    assert {"get", "list", "watch"} <= grants[("workload.serving.volcano.sh", "modelboosters")]
    assert {"patch"} <= grants[("workload.serving.volcano.sh", "modelboosters/status")]
    assert {"get", "list", "watch"} <= grants[("leaderworkerset.x-k8s.io", "leaderworkersets")]
    assert not any("*" in verbs for verbs in grants.values()), "least privilege: no wildcards"
