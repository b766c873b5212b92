"""The suite asserts only what the spec says (issue 31, section 1): the patterns that judged an
implementation by a mechanism the spec leaves open are gone, and stay gone.

Source scans where a pattern can be seen in the text (a Pod's first container taken for the
template's; a ModelServing's Pods found by ownerReference alone), and table tests of the helpers
that replaced them (:func:`~conformance.framework.modelserving.label_templates`,
:func:`~conformance.framework.modelserving.belongs`, :func:`~conformance.framework.modelserving.container_of`).
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from conformance.framework.modelserving import MS_LABEL, belongs, container_of, env_of, label_templates
from conformance.framework.outcomes import Inconclusive
from conformance.framework.rollout_watch import PodState

ROOT = Path(__file__).resolve().parents[3] / "conformance"
SOURCES = sorted(p for p in ROOT.rglob("*.py") if "templates" not in p.parts)


def _hits(pattern: str) -> list[str]:
    rx = re.compile(pattern)
    return [
        f"{path.relative_to(ROOT.parent)}:{n}: {line.strip()}"
        for path in SOURCES
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if rx.search(line)
    ]


def test_no_pod_first_container_taken_for_the_template_one() -> None:
    """A Pod's ``spec.containers[0]`` is not the template's container when an implementation puts its
    own first (client objects: attribute access; a test's own body, ``["containers"][0]``, is fine)."""
    assert _hits(r"\.spec\.containers\[0\]") == []


def test_no_pods_found_by_owner_reference_alone() -> None:
    """Pods are found by :func:`belongs` (the suite's template label, or the controller
    ownerReference), never by a filter on ownerReferences in a Pod listing."""
    assert _hits(r"list_namespaced_pod\(.*owner") == []
    assert _hits(r"pod\.owner\s*[!=]=") == []


# -- the helpers -----------------------------------------------------------------------------------


def _spec() -> dict[str, Any]:
    return {
        "template": {
            "roles": [
                {"name": "a", "entryTemplate": {"spec": {}}, "workerTemplate": {"metadata": {"labels": {"x": "y"}}}},
                {"name": "b", "entryTemplate": {"metadata": {}}},
            ]
        }
    }


def test_label_templates_labels_every_template() -> None:
    spec = _spec()
    label_templates(spec, "ms")
    roles = spec["template"]["roles"]
    assert roles[0]["entryTemplate"]["metadata"]["labels"] == {MS_LABEL: "ms"}
    assert roles[0]["workerTemplate"]["metadata"]["labels"] == {"x": "y", MS_LABEL: "ms"}
    assert roles[1]["entryTemplate"]["metadata"]["labels"] == {MS_LABEL: "ms"}


@pytest.mark.parametrize(
    ("spec", "name"),
    [
        pytest.param({"template": {"roles": "not a list"}}, "ms", id="roles-not-a-list"),
        pytest.param({"template": {"roles": [{"entryTemplate": "x"}]}}, "ms", id="template-not-a-map"),
        pytest.param({"template": {"roles": [{"entryTemplate": {"metadata": {"labels": []}}}]}}, "ms", id="labels"),
        pytest.param({"replicas": 2}, "ms", id="no-template"),
        pytest.param(_spec(), "x" * 64, id="name-too-long-for-a-label"),
    ],
)
def test_label_templates_leaves_what_it_cannot_label(spec: dict[str, Any], name: str) -> None:
    before = repr(spec)
    label_templates(spec, name)
    assert repr(spec) == before


@pytest.mark.parametrize(
    ("meta", "mine"),
    [
        pytest.param({"labels": {MS_LABEL: "ms"}}, True, id="template-label"),
        pytest.param({"ownerReferences": [{"uid": "u1", "controller": True}]}, True, id="controller-owner"),
        pytest.param({"ownerReferences": [{"uid": "u1"}]}, False, id="owner-not-controller"),
        pytest.param({"labels": {MS_LABEL: "other"}}, False, id="another-modelserving"),
        pytest.param({"ownerReferences": [{"uid": "cm", "controller": True}], "labels": {MS_LABEL: "ms"}}, True,
                     id="intermediate-owner-with-the-label"),
        pytest.param({}, False, id="nothing"),
    ],
)  # fmt: skip
def test_belongs(meta: dict[str, Any], mine: bool) -> None:
    assert belongs(meta, "ms", "u1") is mine


def _pod(*names: str) -> Any:
    containers = [SimpleNamespace(name=n, image=f"{n}:v1", env=[SimpleNamespace(name="WHO", value=n)]) for n in names]
    return SimpleNamespace(metadata=SimpleNamespace(name="p"), spec=SimpleNamespace(containers=containers))


def test_container_of_finds_the_template_container_by_name() -> None:
    assert container_of(_pod("sidecar", "engine")).name == "engine"
    assert container_of(_pod("engine", "sidecar")).name == "engine"
    assert container_of(_pod("main")).name == "main", "a single container is the template's"
    assert env_of(_pod("sidecar", "engine")) == {"WHO": "engine"}
    assert env_of(_pod("sidecar", "engine"), 0) == {"WHO": "sidecar"}
    with pytest.raises(Inconclusive, match="no container named 'engine'"):
        container_of(_pod("sidecar", "main"))


def test_pod_state_image_is_the_template_container_image() -> None:
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "sidecar", "image": "s:1"},
                                                              {"name": "engine", "image": "e:1"}]}}  # fmt: skip
    assert PodState.from_json(pod).image == "e:1"


def test_no_podgroup_ownership_demanded() -> None:
    """A ServingGroup's PodGroup is found through its Pods' annotation, whatever object owns it."""
    assert [h for h in _hits(r"ownerReferences|owner_references") if "/suites/gang/" in h] == []


def test_no_exact_affinity_demanded() -> None:
    """A ModelBooster child's Pods may add scheduling rules to the worker's: containment, not equality."""
    assert _hits(r"affinity\"\)\s*!=") == []


def test_confined_keeps_only_one_instances_services() -> None:
    from conformance.suites.headless_dns.instances import confined

    reach = {"entry": {"a-0"}, "discovery": {"a-0", "a-1"}, "governing": {"a-0", "a-1", "b-0"}, "other": {"b-0"}}
    assert confined(reach, ["a-0", "a-1"]) == {"entry": {"a-0"}, "discovery": {"a-0", "a-1"}}


def test_contains_accepts_a_superset_only() -> None:
    from conformance.suites.modelbooster.test_conversion import contains

    want = {"nodeAffinity": {"preferred": [{"weight": 1, "key": "k"}]}}
    assert contains(want, want)
    assert contains(
        {"nodeAffinity": {"preferred": [{"weight": 5}, {"weight": 1, "key": "k"}]}, "podAffinity": {}}, want
    )
    assert not contains({"nodeAffinity": {"preferred": [{"weight": 2, "key": "k"}]}}, want)
    assert not contains(None, want)
