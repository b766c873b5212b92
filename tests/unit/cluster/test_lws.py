"""The LeaderWorkerSet CRD from its Go module: parsing ``go mod download -json``, verifying the
CRD, the per-user cache, and the installation's error handling (no cluster: the two API calls are
replaced). One test fetches the real module through Go (fast once the Go module cache has it)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance.cluster import lws
from conformance.cluster.errors import HarnessError
from conformance.framework.waits import WaitTimeout

OK = {
    "Path": "sigs.k8s.io/lws",
    "Version": "v0.7.0",
    "Dir": "/root/go/pkg/mod/sigs.k8s.io/lws@v0.7.0",
    "Sum": "h1:qWfzX8+UBak+Hq0+m/PuE3uO0mp/3dmm5q/h/7z31A8=",
}
REFUSED = {
    "Path": "sigs.k8s.io/lws",
    "Version": "v9.9.9",
    "Error": "sigs.k8s.io/lws@v9.9.9: reading https://proxy.golang.org/sigs.k8s.io/lws/@v/v9.9.9.info: 403 Forbidden",
}


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        pytest.param(json.dumps(OK, indent="\t"), Path(OK["Dir"]), id="go-prints-tab-indented-json"),
        pytest.param(json.dumps(OK) + "\n\n", Path(OK["Dir"]), id="trailing-whitespace"),
        pytest.param(
            json.dumps(REFUSED),
            "could not fetch sigs.k8s.io/lws@v9.9.9: sigs.k8s.io/lws@v9.9.9: reading",
            id="error-field",
        ),
        pytest.param(json.dumps({**OK, "Error": "checksum mismatch"}), "checksum mismatch", id="error-wins-over-dir"),
        pytest.param(
            json.dumps({k: v for k, v in OK.items() if k != "Dir"}), "no Dir for sigs.k8s.io/lws@v0.7.0", id="no-dir"
        ),
        pytest.param(json.dumps({**OK, "Dir": ""}), "no Dir for", id="empty-dir"),
        pytest.param(json.dumps({"Dir": 7}), "no Dir for ?@?", id="dir-not-a-string"),
        pytest.param("", "printed nothing", id="empty-output"),
        pytest.param("go: cannot find main module", "printed no JSON object", id="not-json"),
        pytest.param("[1, 2]", "printed list, not a JSON object", id="json-list"),
        pytest.param(json.dumps(OK) + json.dumps(OK), "more than one module", id="two-objects"),
    ],
)
def test_module_dir(output: str, expected: Path | str) -> None:
    if isinstance(expected, Path):
        assert lws.module_dir(output) == expected
        return
    with pytest.raises(HarnessError) as caught:
        lws.module_dir(output)
    assert expected in caught.value.message
    assert caught.value.hint


def _crd(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": lws.CRD_NAME},
        "spec": {
            "group": lws.GROUP,
            "names": {"kind": "LeaderWorkerSet", "plural": "leaderworkersets"},
            "versions": [{"name": "v1", "served": True, "storage": True}],
        },
    }
    doc.update(changes)
    return doc


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        pytest.param(_crd(), None, id="the-crd"),
        pytest.param(["a list"], "not a YAML mapping", id="not-a-mapping"),
        pytest.param(_crd(kind="Deployment"), "kind is 'Deployment'", id="wrong-kind"),
        pytest.param(_crd(metadata={"name": "other.example.com"}), "named 'other.example.com'", id="wrong-name"),
        pytest.param(
            _crd(spec={**_crd()["spec"], "group": "example.com"}), "is not leaderworkerset.x-k8s.io", id="wrong-group"
        ),
        pytest.param(
            _crd(
                spec={**_crd()["spec"], "versions": [{"name": "v1", "served": False}, {"name": "v2", "served": True}]}
            ),
            "serves ['v2'], not v1",
            id="v1-not-served",
        ),
        pytest.param(_crd(spec={**_crd()["spec"], "versions": []}), "serves no versions", id="no-versions"),
    ],
)
def test_check_crd(doc: Any, problem: str | None) -> None:
    if problem is None:
        assert lws.check_crd(doc, "here") is doc
        return
    with pytest.raises(HarnessError, match=r"^here: ") as caught:
        lws.check_crd(doc, "here")
    assert problem in caught.value.message


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KTHENA_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.skipif(shutil.which("go") is None, reason="needs the Go toolchain")
def test_fetches_the_real_crd_through_go_and_caches_it(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    said: list[str] = []
    crd = lws.lws_crd(progress=said.append)
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == "leaderworkersets.leaderworkerset.x-k8s.io"
    assert crd["spec"]["group"] == "leaderworkerset.x-k8s.io"
    assert crd["spec"]["scope"] == "Namespaced"
    assert [(v["name"], v["served"], v["storage"]) for v in crd["spec"]["versions"]] == [("v1", True, True)]
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert set(spec) == {"leaderWorkerTemplate", "networkConfig", "replicas", "rolloutStrategy", "startupPolicy"}
    assert lws.cached_crd_path().is_file()
    assert str(cache) in str(lws.cached_crd_path())
    assert any("go mod download" in line for line in said)

    # Cached: a second call needs no Go at all.
    monkeypatch.setenv("PATH", "")
    assert lws.lws_crd() == crd


def test_missing_go_is_a_harness_error_with_a_hint(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    with pytest.raises(HarnessError, match="Go toolchain was not found") as caught:
        lws.lws_crd()
    assert "install Go" in caught.value.hint


def test_a_cached_crd_that_does_not_verify_is_fetched_again(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = cache.parent / "module"
    (module / lws.CRD_PATH).parent.mkdir(parents=True)
    (module / lws.CRD_PATH).write_text("---\n" + yaml.safe_dump(_crd()))
    cached = lws.cached_crd_path()
    cached.parent.mkdir(parents=True)
    cached.write_text(yaml.safe_dump(_crd(kind="ConfigMap")))
    monkeypatch.setattr(lws, "download", lambda version: module)
    said: list[str] = []
    assert lws.lws_crd(progress=said.append) == _crd()
    assert "does not verify" in said[0]
    assert lws.check_crd(yaml.safe_load(cached.read_text()), "cache")


def test_a_module_without_the_crd_file(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match=r"sigs.k8s.io/lws@v0.1.0 has no readable config/crd/bases/"):
        lws.crd_from_module(tmp_path, "v0.1.0")


def test_two_documents_in_the_crd_file(tmp_path: Path) -> None:
    (tmp_path / lws.CRD_PATH).parent.mkdir(parents=True)
    (tmp_path / lws.CRD_PATH).write_text(yaml.safe_dump(_crd()) + "---\n" + yaml.safe_dump(_crd()))
    with pytest.raises(HarnessError, match="2 YAML documents"):
        lws.crd_from_module(tmp_path)


class _Recorder:
    def __init__(self, established: bool = True) -> None:
        self.applied: list[dict[str, Any]] = []
        self.waited: list[tuple[list[str], float]] = []
        self.established = established

    def apply(self, api: Any, doc: dict[str, Any]) -> None:
        doc["metadata"]["resourceVersion"] = "1"  # as reference.apply does on a replace
        self.applied.append(doc)

    def wait_established(self, api: Any, names: list[str], timeout: float = 30.0) -> None:
        self.waited.append((names, timeout))
        if not self.established:
            raise WaitTimeout(f"waited {timeout:g}s for CRD {names[0]} Established; last seen: False")


@pytest.mark.parametrize("established", [True, False])
def test_install_applies_a_copy_and_waits_until_established(
    cache: Path, monkeypatch: pytest.MonkeyPatch, established: bool
) -> None:
    from conformance.implementations import reference

    recorder = _Recorder(established)
    monkeypatch.setattr(reference, "apply", recorder.apply)
    monkeypatch.setattr(reference, "wait_established", recorder.wait_established)
    monkeypatch.setattr(lws, "lws_crd", lambda version, progress: _crd())
    api = object()
    if established:
        crd = lws.install_lws_crd(api, timeout=12)
        assert crd == _crd()  # the caller's copy is not the one apply wrote into
    else:
        with pytest.raises(HarnessError, match="was not Established: waited 12s") as caught:
            lws.install_lws_crd(api, timeout=12)
        assert "kubectl get crd leaderworkersets.leaderworkerset.x-k8s.io" in caught.value.hint
    assert [d["metadata"]["name"] for d in recorder.applied] == [lws.CRD_NAME]
    assert recorder.waited == [([lws.CRD_NAME], 12)]
