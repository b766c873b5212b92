"""`kthena-ref check-update OLD NEW`: the in-place eligibility of an update, as text or JSON (exit 0
either way); an invalid input is one message on stderr naming the file and the field (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from kthena_ref.cli import main

from .builders import MS, edit_spec, set_image


def manifest(image: str = "img:v1", **spec: Any) -> dict[str, Any]:
    ms = MS("ms").replicas(2).role("a", 1, 1, image=image).role("b", 1, 0, image=image).build()
    data = edit_spec(ms, lambda s: s.update(spec)).to_api()
    data["metadata"] = {"name": "ms"}
    return data


def write(path: Path, data: Any) -> Path:
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


def invoke(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(main, ["check-update", *args], input=stdin)


@pytest.fixture
def old(tmp_path: Path) -> Path:
    return write(tmp_path / "old.yaml", manifest())


def test_image_only_update_is_eligible(old: Path, tmp_path: Path) -> None:
    new = write(tmp_path / "new.yaml", manifest("img:v2"))
    result = invoke(str(old), str(new))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "an image patch can apply this update: the ServingGroups are updated in place"
    assert "  role a entry container main: img:v1 -> img:v2" in lines
    assert "  role a worker container main: img:v1-worker -> img:v2-worker" in lines
    assert "  role b entry container main: img:v1 -> img:v2" in lines


def test_findings_are_one_field_and_reason_a_line(old: Path, tmp_path: Path) -> None:
    data = manifest("img:latest", schedulerName="other")
    new = write(tmp_path / "new.yaml", data)
    result = invoke(str(old), str(new))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("an image patch cannot apply this update; the controller recreates the ServingGroups")
    assert (
        "spec.schedulerName: only regular-container images can change in place; schedulerName changed from volcano to other"
        in lines
    )
    assert any(
        line.startswith(
            "spec.template.roles[0].entryTemplate.spec.containers[0].imagePullPolicy: imagePullPolicy is omitted"
        )
        for line in lines
    )
    assert "image changes:" in lines


def test_identical_files_say_there_is_nothing_to_patch(old: Path) -> None:
    result = invoke(str(old), str(old))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "an image patch can apply this update: the ServingGroups are updated in place",
        "no image changes",
    ]


@pytest.mark.parametrize(
    ("new_spec", "args", "eligible", "fields"),
    [
        pytest.param({}, [], True, [], id="identical"),
        pytest.param({"plugins": [{"name": "headless-service"}]}, [], False, ["spec.plugins[0]", "spec.plugins[0]"], id="headless-service"),
        pytest.param({"schedulerName": "x"}, ["--role", "b"], False, ["spec.schedulerName"], id="role-sees-modelserving-fields"),
    ],
)  # fmt: skip
def test_json(
    old: Path, tmp_path: Path, new_spec: dict[str, Any], args: list[str], eligible: bool, fields: list[str]
) -> None:
    new = write(tmp_path / "new.yaml", manifest("img:v2", **new_spec))
    result = invoke(str(old), str(new), "--output", "json", *args)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["eligible"] is eligible
    assert [f["field"] for f in document["findings"]] == fields
    assert all(set(f) == {"field", "reason"} for f in document["findings"])
    changes = document["imageChanges"]
    assert {"role": "b", "template": "entry", "container": "main", "old": "img:v1", "new": "img:v2"} in changes
    assert len(changes) == (1 if args else 3)


def test_role_checks_only_that_role(old: Path, tmp_path: Path) -> None:
    data = manifest()
    data["spec"]["template"]["roles"][0]["entryTemplate"]["spec"]["containers"][0]["command"] = ["serve"]
    set_image("img:v2", role=1)(data["spec"])
    new = write(tmp_path / "new.yaml", data)
    whole = invoke(str(old), str(new))
    assert "spec.template.roles[0].entryTemplate.spec.containers[0].command:" in whole.stdout
    only_b = invoke(str(old), str(new), "--role", "b")
    assert only_b.exit_code == 0, only_b.output
    assert only_b.stdout.splitlines() == [
        "an image patch can apply this update: the instances of Role b are updated in place",
        "image changes:",
        "  role b entry container main: img:v1 -> img:v2",
    ]


def test_new_from_stdin(old: Path) -> None:
    result = invoke(str(old), "-", "--output", "json", stdin=yaml.safe_dump(manifest("img:v2")))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["eligible"] is True


def test_old_from_stdin(tmp_path: Path) -> None:
    new = write(tmp_path / "new.yaml", manifest("img:v2"))
    result = invoke("-", str(new), stdin=yaml.safe_dump(manifest()))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("an image patch can apply this update")


NOT_A_ROLE = {"name": "Not_A_Role", "entryTemplate": {"spec": {"containers": []}}, "workerReplicas": 0}


@pytest.mark.parametrize(
    ("content", "args", "messages"),
    [
        pytest.param(None, [], ["cannot read", "missing.yaml", "No such file"], id="missing-file"),
        pytest.param("kind: [unclosed", [], ["cannot read", "new.yaml", "line 1"], id="bad-yaml"),
        pytest.param("---\nkind: ModelServing\n---\nkind: ModelServing\n", [], ["cannot read", "new.yaml", "single document"], id="two-documents"),
        pytest.param("", [], ["new.yaml does not hold a ModelServing (it is empty)"], id="empty"),
        pytest.param("- a\n- b\n", [], ["new.yaml does not hold a ModelServing (it holds a list)"], id="yaml-list"),
        pytest.param("just text\n", [], ["new.yaml does not hold a ModelServing (it holds a string)"], id="yaml-scalar"),
        pytest.param({"kind": "Deployment", "metadata": {"name": "x"}}, [], ["new.yaml does not hold a ModelServing (kind: Deployment)"], id="wrong-kind"),
        pytest.param({"metadata": {"name": "x"}}, [], ["does not hold a ModelServing (no kind)"], id="no-kind"),
        pytest.param({**manifest(), "spec": {**manifest()["spec"], "replicas": -1}}, [],
                     ["new.yaml is not a valid ModelServing", "spec.replicas: Input should be greater than or equal to 0"], id="validation-error"),
        pytest.param({**manifest(), "spec": {**manifest()["spec"], "template": {"roles": [NOT_A_ROLE]}}}, [],
                     ["new.yaml is not a valid ModelServing", "spec.template.roles[0].name: String should match pattern"], id="validation-error-in-a-list"),
        pytest.param(manifest(), ["--role", "x"], ["--role x: no such Role", "old.yaml", "new.yaml", "roles: a, b"], id="unknown-role"),
        pytest.param(manifest(), ["--output", "yaml"], ["Invalid value for '--output'"], id="unknown-output"),
    ],
)  # fmt: skip
def test_bad_input_is_one_message_and_exit_2(
    old: Path, tmp_path: Path, content: Any, args: list[str], messages: list[str]
) -> None:
    new = tmp_path / ("missing.yaml" if content is None else "new.yaml")
    if content is not None:
        write(new, content)
    result = invoke(str(old), str(new), *args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    for message in messages:
        assert message in result.stderr
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_a_directory_is_a_bad_input(old: Path, tmp_path: Path) -> None:
    result = invoke(str(tmp_path), str(old))
    assert result.exit_code == 2, result.output
    assert f"cannot read {tmp_path}" in result.stderr
    assert "Traceback" not in result.output


def test_both_from_stdin_is_a_bad_input() -> None:
    result = invoke("-", "-", stdin="")
    assert result.exit_code == 2, result.output
    assert "cannot both be -" in result.stderr
