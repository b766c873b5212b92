"""ClusterSpec / NodePool / Taint validation, error messages naming field paths, from_file and node_names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from conformance.cluster.errors import HarnessError
from conformance.cluster.spec import DEFAULT_CAPACITY, ClusterSpec, NodePool, Taint, load_crds


def _parse_error(data: object, source: str = "cluster spec") -> HarnessError:
    with pytest.raises(HarnessError) as info:
        ClusterSpec.parse(data, source=source)
    return info.value


# -- names -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("a", id="one-char"),
        pytest.param("kthena", id="word"),
        pytest.param("a-b", id="hyphen-inside"),
        pytest.param("0abc", id="leading-digit"),
        pytest.param("abc9", id="trailing-digit"),
        pytest.param("a--b", id="double-hyphen"),
        pytest.param("a" * 40, id="40-chars-max"),
    ],
)
def test_cluster_name_accepts_dns_labels(name: str) -> None:
    assert ClusterSpec.parse({"name": name}).name == name


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("", id="empty"),
        pytest.param("-a", id="leading-hyphen"),
        pytest.param("a-", id="trailing-hyphen"),
        pytest.param("Kthena", id="uppercase"),
        pytest.param("a_b", id="underscore"),
        pytest.param("a.b", id="dot"),
        pytest.param("a b", id="space"),
        pytest.param("ä", id="non-ascii"),
        pytest.param("a" * 41, id="41-chars"),
    ],
)
def test_cluster_name_rejects_non_dns_labels(name: str) -> None:
    err = _parse_error({"name": name})
    assert "\n  name: " in err.message
    assert "lowercase DNS label of at most 40 characters" in err.message


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        pytest.param("gpu", True, id="word"),
        pytest.param("pool-1", True, id="hyphen-digit"),
        pytest.param("p" * 50, True, id="50-chars-max"),
        pytest.param("p" * 51, False, id="51-chars"),
        pytest.param("GPU", False, id="uppercase"),
        pytest.param("-gpu", False, id="leading-hyphen"),
        pytest.param("gpu-", False, id="trailing-hyphen"),
        pytest.param("gpu.a", False, id="dot"),
        pytest.param("", False, id="empty"),
    ],
)
def test_pool_name_validation(name: str, ok: bool) -> None:
    data = {"node_pools": [{"name": name}]}
    if ok:
        assert ClusterSpec.parse(data).node_pools[0].name == name
    else:
        err = _parse_error(data)
        assert "node_pools[0].name:" in err.message
        assert "at most 50 characters" in err.message


# -- labels ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        pytest.param("a", id="one-char"),
        pytest.param("app", id="simple"),
        pytest.param("App_Name.v-1", id="mixed-case-name-part"),
        pytest.param("example.com/app", id="dns-prefix"),
        pytest.param("kubernetes.io/hostname", id="k8s-prefix"),
        pytest.param("conformance.kthena.io/accelerator", id="project-prefix"),
        pytest.param("a" * 63, id="63-char-name"),
        pytest.param("example.com/" + "n" * 63, id="prefix-and-63-char-name"),
    ],
)
def test_valid_label_keys(key: str) -> None:
    pool = NodePool(labels={key: "v"})
    assert pool.labels == {key: "v"}


@pytest.mark.parametrize(
    "key",
    [
        pytest.param("", id="empty"),
        pytest.param("a" * 64, id="64-char-name"),
        pytest.param("/app", id="empty-prefix"),
        pytest.param("example.com/", id="empty-name"),
        pytest.param("Example.com/app", id="uppercase-prefix"),
        pytest.param("-app", id="leading-hyphen"),
        pytest.param("app-", id="trailing-hyphen"),
        pytest.param("_app", id="leading-underscore"),
        pytest.param("a/b/c", id="two-slashes"),
        pytest.param("a b", id="space"),
        pytest.param("app=x", id="equals"),
    ],
)
def test_invalid_label_keys(key: str) -> None:
    err = _parse_error({"node_pools": [{"labels": {key: "v"}}]})
    assert "node_pools[0].labels:" in err.message
    assert f"label key {key!r} is not a valid Kubernetes label key" in err.message


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        pytest.param("", True, id="empty-is-valid"),
        pytest.param("x", True, id="one-char"),
        pytest.param("A-b_c.9", True, id="all-allowed-chars"),
        pytest.param("v" * 63, True, id="63-chars"),
        pytest.param("v" * 64, False, id="64-chars"),
        pytest.param("-v", False, id="leading-hyphen"),
        pytest.param("v.", False, id="trailing-dot"),
        pytest.param("a b", False, id="space"),
        pytest.param("a/b", False, id="slash"),
    ],
)
def test_label_values(value: str, ok: bool) -> None:
    data = {"node_pools": [{"labels": {"app": value}}]}
    if ok:
        assert ClusterSpec.parse(data).node_pools[0].labels == {"app": value}
    else:
        err = _parse_error(data)
        assert "node_pools[0].labels:" in err.message
        assert f"label value {value!r} for 'app' is not a valid Kubernetes label value" in err.message


def test_label_key_prefix_longer_than_253_characters_is_rejected() -> None:
    prefix = ".".join(["a" * 60] * 5)  # 304 characters, each DNS label valid
    assert len(prefix) > 253
    with pytest.raises(ValidationError):
        NodePool(labels={f"{prefix}/app": "v"})


# -- pools, counts, ports, extra fields -----------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "ok"),
    [
        pytest.param(0, True, id="zero"),
        pytest.param(1, True, id="one"),
        pytest.param(500, True, id="max-500"),
        pytest.param(-1, False, id="negative"),
        pytest.param(501, False, id="above-max"),
        pytest.param("many", False, id="not-a-number"),
    ],
)
def test_pool_count_bounds(count: Any, ok: bool) -> None:
    data = {"node_pools": [{"name": "a"}, {"name": "b", "count": count}]}
    if ok:
        assert ClusterSpec.parse(data).node_pools[1].count == count
    else:
        assert "node_pools[1].count:" in _parse_error(data).message


@pytest.mark.parametrize(
    ("port", "ok"),
    [
        pytest.param(None, True, id="none-picks-free"),
        pytest.param(1, True, id="min"),
        pytest.param(65535, True, id="max"),
        pytest.param(0, False, id="zero"),
        pytest.param(65536, False, id="above-max"),
    ],
)
def test_apiserver_port_bounds(port: int | None, ok: bool) -> None:
    if ok:
        assert ClusterSpec.parse({"apiserver_port": port}).apiserver_port == port
    else:
        assert "\n  apiserver_port:" in _parse_error({"apiserver_port": port}).message


@pytest.mark.parametrize(
    ("pools", "repeated"),
    [
        pytest.param([{"name": "gpu"}, {"name": "gpu"}], "gpu", id="two-same"),
        pytest.param([{}, {}], "worker", id="two-defaults"),
        pytest.param([{"name": "b"}, {"name": "a"}, {"name": "b"}, {"name": "a"}], "a, b", id="two-dupes-sorted"),
    ],
)
def test_duplicate_pool_names_are_rejected(pools: list[dict[str, Any]], repeated: str) -> None:
    err = _parse_error({"node_pools": pools})
    assert f"node_pools: Value error, node pool names must be unique, repeated: {repeated}" in err.message


def test_distinct_pool_names_are_accepted() -> None:
    spec = ClusterSpec.parse({"node_pools": [{"name": "a"}, {"name": "b"}]})
    assert [p.name for p in spec.node_pools] == ["a", "b"]


@pytest.mark.parametrize(
    ("data", "path"),
    [
        pytest.param({"bogus": 1}, "bogus", id="top-level"),
        pytest.param({"node_pools": [{"bogus": 1}]}, "node_pools[0].bogus", id="pool"),
        pytest.param(
            {"node_pools": [{"taints": [{"key": "k", "effect": "NoSchedule", "bogus": 1}]}]},
            "node_pools[0].taints[0].bogus",
            id="taint",
        ),
        pytest.param({"nodePools": []}, "nodePools", id="camel-case-typo"),
    ],
)
def test_extra_fields_are_forbidden(data: dict[str, Any], path: str) -> None:
    err = _parse_error(data)
    assert f"\n  {path}: Extra inputs are not permitted" in err.message


@pytest.mark.parametrize(
    ("taint", "path"),
    [
        pytest.param({"key": "k", "effect": "NoRun"}, "node_pools[0].taints[0].effect", id="bad-effect"),
        pytest.param({"key": "k"}, "node_pools[0].taints[0].effect", id="missing-effect"),
        pytest.param({"effect": "NoSchedule"}, "node_pools[0].taints[0].key", id="missing-key"),
    ],
)
def test_invalid_taints_name_the_field(taint: dict[str, str], path: str) -> None:
    assert f"\n  {path}:" in _parse_error({"node_pools": [{"taints": [taint]}]}).message


@pytest.mark.parametrize("effect", ["NoSchedule", "PreferNoSchedule", "NoExecute"])
def test_valid_taint_effects(effect: str) -> None:
    taint = Taint(key="gpu", value="true", effect=effect)  # type: ignore[arg-type]
    assert taint.model_dump() == {"key": "gpu", "value": "true", "effect": effect}


@pytest.mark.parametrize("key", [pytest.param("", id="empty"), pytest.param("bad key!", id="space-and-bang")])
def test_invalid_taint_key_is_rejected(key: str) -> None:
    with pytest.raises(ValidationError):
        Taint(key=key, effect="NoSchedule")


def test_several_problems_are_reported_one_per_line() -> None:
    err = _parse_error(
        {"name": "BAD", "node_pools": [{"count": -1, "taints": [{"key": "k", "effect": "x"}]}]},
        source="my.yaml",
    )
    lines = err.message.splitlines()
    assert lines[0] == "my.yaml is invalid:"
    assert [line.split(":")[0].strip() for line in lines[1:]] == [
        "name",
        "node_pools[0].count",
        "node_pools[0].taints[0].effect",
    ]
    assert err.hint == "fix the fields named above"
    assert str(err).endswith("\n  -> fix the fields named above")


@pytest.mark.parametrize(
    "data",
    [pytest.param([1, 2], id="list"), pytest.param("hello", id="string"), pytest.param(42, id="int")],
)
def test_non_mapping_is_a_top_level_error(data: object) -> None:
    assert "\n  (top level): " in _parse_error(data).message


# -- defaults and node_names ----------------------------------------------------------------------


def test_defaults() -> None:
    spec = ClusterSpec()
    assert spec.name == "kthena"
    assert spec.extra_scheduler_names == ["volcano"]
    assert spec.apiserver_port is None
    assert len(spec.node_pools) == 1
    pool = spec.node_pools[0]
    assert (pool.name, pool.count, pool.labels, pool.taints) == ("worker", 2, {}, [])
    assert pool.capacity == DEFAULT_CAPACITY


def test_default_capacity_is_not_shared_between_pools() -> None:
    first, second = NodePool(), NodePool()
    first.capacity["cpu"] = "1"
    assert second.capacity["cpu"] == DEFAULT_CAPACITY["cpu"] == "32"


@pytest.mark.parametrize(
    ("pools", "expected"),
    [
        pytest.param(None, ["worker-0", "worker-1"], id="default"),
        pytest.param([], [], id="no-pools"),
        pytest.param([{"name": "gpu", "count": 0}], [], id="empty-pool"),
        pytest.param([{"name": "gpu", "count": 1}], ["gpu-0"], id="one"),
        pytest.param(
            [{"name": "a", "count": 2}, {"name": "b", "count": 0}, {"name": "c", "count": 3}],
            ["a-0", "a-1", "c-0", "c-1", "c-2"],
            id="pools-in-order",
        ),
    ],
)
def test_node_names(pools: list[dict[str, Any]] | None, expected: list[str]) -> None:
    spec = ClusterSpec.parse({} if pools is None else {"node_pools": pools})
    assert spec.node_names() == expected


def test_pool_node_names_count_matches() -> None:
    assert NodePool(name="w", count=12).node_names()[-1] == "w-11"
    assert len(NodePool(name="w", count=12).node_names()) == 12


# -- from_file ------------------------------------------------------------------------------------


def test_from_file_reads_a_valid_spec(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(
        "name: demo\n"
        "node_pools:\n"
        "- name: gpu\n"
        "  count: 3\n"
        "  labels: {example.com/gpu: 'true'}\n"
        "  taints: [{key: gpu, value: 'true', effect: NoSchedule}]\n"
    )
    spec = ClusterSpec.from_file(path)
    assert spec.name == "demo"
    assert spec.node_names() == ["gpu-0", "gpu-1", "gpu-2"]
    assert spec.node_pools[0].labels == {"example.com/gpu": "true"}
    assert spec.node_pools[0].taints == [Taint(key="gpu", value="true", effect="NoSchedule")]


@pytest.mark.parametrize(
    "content",
    [pytest.param("", id="empty"), pytest.param("# only a comment\n", id="comment"), pytest.param("---\n", id="doc")],
)
def test_from_file_empty_document_gives_defaults(tmp_path: Path, content: str) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(content)
    assert ClusterSpec.from_file(path) == ClusterSpec()


@pytest.mark.parametrize(
    ("content", "field_path"),
    [
        pytest.param("node_pools:\n- count: -1\n", "node_pools[0].count", id="count"),
        pytest.param("node_pools:\n- {name: a}\n- {name: b, count: 900}\n", "node_pools[1].count", id="second-pool"),
        pytest.param("name: Bad_Name\n", "name", id="name"),
        pytest.param("node_pools:\n- taints: [{key: k, effect: Nope}]\n", "node_pools[0].taints[0].effect", id="taint"),
        pytest.param("surprise: true\n", "surprise", id="extra"),
        pytest.param("- a\n- b\n", "(top level)", id="list-document"),
    ],
)
def test_from_file_invalid_fields_name_the_path_and_the_file(tmp_path: Path, content: str, field_path: str) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(content)
    with pytest.raises(HarnessError) as info:
        ClusterSpec.from_file(path)
    assert info.value.message.startswith(f"{path} is invalid:\n")
    assert f"\n  {field_path}: " in info.value.message
    assert info.value.hint == "fix the fields named above"


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("name: [unclosed\n", id="unclosed-flow"),
        pytest.param("name: a\n  bad: indent\n", id="bad-indent"),
        pytest.param("a: 1\na: {\n", id="unterminated-mapping"),
        pytest.param("\tname: tab\n", id="tab-indent"),
    ],
)
def test_from_file_invalid_yaml(tmp_path: Path, content: str) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(content)
    with pytest.raises(HarnessError) as info:
        ClusterSpec.from_file(path)
    assert info.value.message.startswith(f"cluster config {path} is not valid YAML: ")
    assert info.value.hint == "fix the YAML syntax"
    assert info.value.__cause__ is not None


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        pytest.param(lambda d: d / "missing.yaml", "No such file or directory", id="missing"),
        pytest.param(lambda d: d, "Is a directory", id="directory"),
    ],
)
def test_from_file_unreadable_path(tmp_path: Path, make: Any, reason: str) -> None:
    path = make(tmp_path)
    with pytest.raises(HarnessError) as info:
        ClusterSpec.from_file(path)
    assert info.value.message == f"cannot read cluster config {path}: {reason}"
    assert info.value.hint == "check the path"


def test_from_file_non_utf8_is_a_harness_error(tmp_path: Path) -> None:
    path = tmp_path / "utf16.yaml"
    path.write_bytes("name: demo\n".encode("utf-16"))
    with pytest.raises(HarnessError):
        ClusterSpec.from_file(path)


CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "a.example.com"},
}


@pytest.mark.parametrize(
    ("crds", "message"),
    [
        ([{**CRD, "kind": "ConfigMap"}], "crds[0] is a apiextensions.k8s.io/v1/ConfigMap"),
        (
            [{**CRD, "apiVersion": "apiextensions.k8s.io/v1beta1"}],
            "not an apiextensions.k8s.io/v1 CustomResourceDefinition",
        ),
        ([CRD, {**CRD, "metadata": {}}], "crds[1] has no metadata.name"),
        ([CRD, CRD], "repeated: a.example.com"),
    ],
)
def test_crds_must_be_named_crds(crds: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(HarnessError) as exc:
        ClusterSpec.parse({"crds": crds})
    assert "crds" in exc.value.message and message in exc.value.message


def test_crds_default_to_none_and_round_trip_through_json() -> None:
    assert ClusterSpec().crds == []
    spec = ClusterSpec.parse({"crds": [CRD]})
    assert ClusterSpec.model_validate_json(spec.model_dump_json()).crds == [CRD]


def test_load_crds_reads_every_document(tmp_path: Path) -> None:
    path = tmp_path / "crds.yaml"
    other = {**CRD, "metadata": {"name": "b.example.com"}}
    path.write_text(yaml.safe_dump(CRD) + "---\n" + yaml.safe_dump(other) + "---\n")
    assert load_crds([path]) == [CRD, other]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("kind: ConfigMap\n", "document 1: a ConfigMap, not a CustomResourceDefinition"),
        ("- a\n", "document 1: a list, not a CustomResourceDefinition"),
        ("a: [\n", "is not valid YAML"),
    ],
)
def test_load_crds_refuses_what_is_not_a_crd(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "crds.yaml"
    path.write_text(content)
    with pytest.raises(HarnessError) as exc:
        load_crds([path])
    assert str(path) in exc.value.message and message in exc.value.message


def test_load_crds_names_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="cannot read CRD file"):
        load_crds([tmp_path / "absent.yaml"])


# -- real node pools -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pools", "problem"),
    [
        pytest.param([{"name": "real", "kind": "real", "count": 5}], "node_pools[0]", id="too-many-in-a-pool"),
        pytest.param(
            [{"name": "a", "kind": "real", "count": 3}, {"name": "b", "kind": "real", "count": 2}],
            "at most 4 real nodes per cluster, 5 asked for",
            id="too-many-in-all",
        ),
        pytest.param([{"name": "x", "kind": "metal"}], "node_pools[0].kind", id="unknown-kind"),
    ],
)
def test_real_pools_are_checked(pools: list[dict[str, Any]], problem: str) -> None:
    assert problem in _parse_error({"node_pools": pools}).message


def test_real_pools_are_told_apart_and_named_like_others() -> None:
    spec = ClusterSpec.parse(
        {"node_pools": [{"name": "worker", "count": 1}, {"name": "real", "kind": "real", "count": 2}]}
    )
    assert [p.name for p in spec.real_pools()] == ["real"]
    assert spec.node_names() == ["worker-0", "real-0", "real-1"]
    assert ClusterSpec().real_pools() == [] and NodePool().kind == "kwok"


def test_real_pools_may_carry_devices() -> None:
    spec = ClusterSpec.parse(
        {
            "node_pools": [
                {
                    "name": "gpu",
                    "kind": "real",
                    "count": 1,
                    "labels": {"gpu.fake.kthena-conformance.io/device-count": "2"},
                },
                {"name": "npu", "count": 1, "labels": {"npu.fake.kthena-conformance.io/device-count": "8"}},
            ]
        }
    )
    assert spec.device_nodes() == {"gpu": ["gpu-0"], "npu": ["npu-0"]}


def test_kwok_manifests_leave_real_nodes_to_their_kubelets() -> None:
    from conformance.cluster.local.components import node_manifests

    spec = ClusterSpec.parse(
        {"node_pools": [{"name": "worker", "count": 1}, {"name": "real", "kind": "real", "count": 1}]}
    )
    names = [yaml.safe_load(m)["metadata"]["name"] for m in node_manifests(spec)]
    assert names == ["worker-0"]
