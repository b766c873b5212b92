"""The converters' pure reconcile (kthena_ref.convert.plan): create, update only on a real change,
delete children of another name, and nothing at all when the source cannot be converted."""

from __future__ import annotations

from typing import Any

import pytest

from kthena_ref.convert import HEADLESS_SERVICE, Conversion, Problem, owner_reference, plugins_for
from kthena_ref.convert.plan import Actions, contains, controlled_by, plan

SOURCE = {
    "apiVersion": "example.io/v1",
    "kind": "Source",
    "metadata": {"name": "src", "namespace": "ns", "uid": "u-1", "generation": 2},
    "spec": {"child": "c1", "replicas": 2},
}


def convert(source: dict[str, Any], existing: dict[str, Any] | None) -> Conversion:
    """A stand-in converter: the child is named by spec.child; spec.invalid makes it inexpressible."""
    spec = source["spec"]
    if spec.get("invalid"):
        return Conversion(None, problems=(Problem("spec.invalid", "cannot be expressed"),))
    child = {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "ModelServing",
        "metadata": {"name": spec["child"], "namespace": "ns", "labels": {"made-by": "src"},
                     "ownerReferences": [owner_reference(source)]},
        "spec": {"replicas": spec["replicas"], "plugins": plugins_for(existing)},
    }  # fmt: skip
    ignored = (Problem("spec.extra", "not honoured"),) if spec.get("extra") else ()
    return Conversion(child, ignored=ignored)


def stored(child: dict[str, Any], **spec_extra: Any) -> dict[str, Any]:
    """``child`` as the API server holds it: defaults filled in, a status, a resourceVersion."""
    meta = {**child["metadata"], "resourceVersion": "7", "uid": "child-uid"}
    return {**child, "metadata": meta, "spec": {**child["spec"], "template": {"roles": []}, **spec_extra},
            "status": {"replicas": 1}}  # fmt: skip


def source(**spec: Any) -> dict[str, Any]:
    return {**SOURCE, "spec": {**SOURCE["spec"], **spec}}


def test_a_new_source_creates_its_child_declaring_headless_service() -> None:
    actions = plan(source(), [], convert)
    assert actions.create is not None and actions.update is None and actions.delete == ()
    assert actions.create["spec"]["plugins"] == [{"name": HEADLESS_SERVICE}]
    assert controlled_by(actions.create, "u-1")


def test_an_unchanged_child_is_not_written_although_the_server_added_defaults() -> None:
    child = stored(convert(source(), None).child or {})
    assert plan(source(), [child], convert) == Actions()


def test_a_changed_source_updates_the_existing_child_and_keeps_its_plugins() -> None:
    child = stored(convert(source(), None).child or {})
    child["spec"]["plugins"] = [{"name": "something-else"}]  # whatever the child has stays
    actions = plan(source(replicas=5), [child], convert)
    assert actions.create is None and actions.update is not None
    assert actions.update["spec"] == {"replicas": 5, "plugins": [{"name": "something-else"}]}
    assert actions.update["metadata"]["resourceVersion"] == "7", "an update carries the read resourceVersion"
    assert "status" not in actions.update


def test_an_existing_child_without_plugins_is_never_migrated() -> None:
    child = stored(convert(source(), None).child or {})
    del child["spec"]["plugins"]
    actions = plan(source(replicas=3), [child], convert)
    assert actions.update is not None and actions.update["spec"].get("plugins") is None


def test_a_renamed_child_is_created_and_the_old_one_deleted() -> None:
    old = stored(convert(source(), None).child or {})
    actions = plan(source(child="c2"), [old], convert)
    assert actions.create is not None and actions.create["metadata"]["name"] == "c2"
    assert actions.delete == ("c1",)


def test_a_child_already_being_deleted_is_not_deleted_again() -> None:
    old = stored(convert(source(), None).child or {})
    old["metadata"]["deletionTimestamp"] = "2026-12-06T00:00:00Z"
    assert plan(source(child="c2"), [old], convert).delete == ()


@pytest.mark.parametrize("owned", [[], ["existing"]], ids=["no-child", "with-child"])
def test_a_source_that_cannot_be_converted_writes_nothing(owned: list[str]) -> None:
    children = [stored(convert(source(), None).child or {})] if owned else []
    actions = plan(source(invalid=True), children, convert)
    assert not actions.converted
    assert (actions.create, actions.update, actions.delete) == (None, None, ())
    assert actions.problems == (Problem("spec.invalid", "cannot be expressed"),)


def test_ignored_fields_are_reported_with_the_child() -> None:
    actions = plan(source(extra=True), [], convert)
    assert actions.create is not None and actions.ignored == (Problem("spec.extra", "not honoured"),)


def test_a_conversion_has_a_child_or_problems() -> None:
    with pytest.raises(ValueError, match="not both"):
        Conversion(None)
    with pytest.raises(ValueError, match="not both"):
        Conversion({}, problems=(Problem("f", "r"),))


@pytest.mark.parametrize(
    ("have", "want", "expected"),
    [
        ({"a": 1, "b": 2}, {"a": 1}, True),
        ({"a": 1}, {"a": 1, "b": 2}, False),
        ({"a": {"x": 1, "y": 2}}, {"a": {"x": 1}}, True),
        ({"a": [{"x": 1, "d": 0}]}, {"a": [{"x": 1}]}, True),
        ({"a": [{"x": 1}, {"x": 2}]}, {"a": [{"x": 1}]}, False),
        ({"a": [1]}, {"a": 1}, False),
        ({"a": None}, {"a": None}, True),
        ({"a": "1"}, {"a": 1}, False),
    ],
)
def test_contains(have: Any, want: Any, expected: bool) -> None:
    assert contains(have, want) is expected


@pytest.mark.parametrize(
    ("refs", "expected"),
    [
        ([{"uid": "u-1", "controller": True}], True),
        ([{"uid": "u-1"}], False),
        ([{"uid": "u-2", "controller": True}], False),
        ([], False),
    ],
)
def test_controlled_by(refs: list[dict[str, Any]], expected: bool) -> None:
    assert controlled_by({"metadata": {"ownerReferences": refs}}, "u-1") is expected
