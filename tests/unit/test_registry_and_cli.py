"""Provider lookup by name, and CLI validation errors (one clear message, right exit code, no cluster started)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from conformance.cli import main
from conformance.cluster.errors import HarnessError
from conformance.cluster.provider import Provider
from conformance.cluster.registry import PROVIDER_NAMES, get_provider


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("KTHENA_CACHE_DIR", str(cache))
    monkeypatch.delenv("KTHENA_BIN_DIR", raising=False)
    monkeypatch.delenv("KTHENA_DEBUG", raising=False)
    return cache


# -- registry -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", PROVIDER_NAMES)
def test_get_provider_returns_the_named_provider(name: str) -> None:
    provider = get_provider(name)
    assert isinstance(provider, Provider)
    assert provider.name == name


def test_provider_names() -> None:
    assert PROVIDER_NAMES == ("local", "kind", "k3s", "existing")


def test_existing_provider_takes_kubeconfig_and_context(tmp_path: Path) -> None:
    provider = get_provider("existing", kubeconfig=str(tmp_path / "kc"), context="ctx")
    assert provider.kubeconfig_path == tmp_path / "kc"  # type: ignore[attr-defined]
    assert provider.context == "ctx"  # type: ignore[attr-defined]


KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]
users: [{name: u, user: {token: x}}]
contexts:
- {name: staging, context: {cluster: c, user: u}}
- {name: prod-like, context: {cluster: c, user: u}}
current-context: staging
"""


@pytest.mark.parametrize(
    ("content", "context", "expected"),
    [
        pytest.param(KUBECONFIG, None, "staging", id="current-context"),
        pytest.param(KUBECONFIG, "prod-like", "prod-like", id="explicit-context"),
        pytest.param(KUBECONFIG.replace("current-context: staging\n", ""), None, None, id="no-current-context"),
        pytest.param("{not: [yaml", None, None, id="unreadable"),
    ],
)
def test_an_existing_cluster_is_named_by_its_context(
    tmp_path: Path, content: str, context: str | None, expected: str | None
) -> None:
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text(content)
    provider = get_provider("existing", kubeconfig=str(kubeconfig), context=context)
    assert provider.context_name() == expected  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ["nope", "", "Local", "kind ", "minikube"])
def test_unknown_provider_lists_the_valid_names(name: str) -> None:
    with pytest.raises(HarnessError) as info:
        get_provider(name)
    assert info.value.message == f"--provider: unknown cluster provider {name!r} (from --provider or KTHENA_PROVIDER)"
    for valid in PROVIDER_NAMES:
        assert valid in info.value.hint


@pytest.mark.parametrize("name", ["local", "kind", "k3s"])
def test_run_directories_live_under_the_cache_dir(name: str, cache_dir: Path) -> None:
    assert get_provider(name).runs == cache_dir / "clusters"  # type: ignore[attr-defined]


# -- CLI ------------------------------------------------------------------------------------------


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def _assert_clean_failure(result: Result, code: int) -> None:
    assert result.exit_code == code, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    assert result.stdout == ""  # errors go to stderr; stdout stays parseable


def test_cluster_up_unknown_provider() -> None:
    result = invoke("cluster", "up", "--provider", "nope")
    _assert_clean_failure(result, 2)
    lines = result.stderr.splitlines()
    assert lines[0] == "error: --provider: unknown cluster provider 'nope' (from --provider or KTHENA_PROVIDER)"
    assert lines[1].startswith("  -> choose one of: local, kind, k3s, existing")
    assert len(lines) == 2
    assert result.stderr.count("error:") == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(("--node-label", "bad"), "error: node-label 'bad' is not KEY=VALUE", id="no-equals"),
        pytest.param(("--node-label", "=v"), "error: node-label '=v' is not KEY=VALUE", id="empty-key"),
        pytest.param(
            ("--node-label", "a=b", "--node-label", "oops"), "error: node-label 'oops' is not KEY=VALUE", id="second"
        ),
        pytest.param(
            ("--node-taint", "gpu"), "error: node-taint 'gpu' is not KEY[=VALUE]:EFFECT", id="taint-no-effect"
        ),
        pytest.param(
            ("--node-taint", "=x:NoSchedule"),
            "error: node-taint '=x:NoSchedule' is not KEY[=VALUE]:EFFECT",
            id="taint-no-key",
        ),
    ],
)
def test_cluster_up_malformed_options(args: tuple[str, ...], message: str) -> None:
    result = invoke("cluster", "up", *args)
    _assert_clean_failure(result, 2)
    assert result.stderr.splitlines()[0] == message


def test_node_label_hint() -> None:
    result = invoke("cluster", "up", "--node-label", "bad")
    assert "  -> write it as --node-label key=value" in result.stderr


@pytest.mark.parametrize(
    ("args", "field"),
    [
        pytest.param(("--nodes", "-1"), "node_pools[0].count", id="negative-nodes"),
        pytest.param(("--nodes", "501"), "node_pools[0].count", id="too-many-nodes"),
        pytest.param(("--node-label", "bad key=v"), "node_pools[0].labels", id="invalid-label-key"),
        pytest.param(("--node-label", "k=-v"), "node_pools[0].labels", id="invalid-label-value"),
        pytest.param(("--apiserver-port", "70000"), "apiserver_port", id="bad-port"),
    ],
)
def test_cluster_up_invalid_spec_names_the_field(args: tuple[str, ...], field: str) -> None:
    result = invoke("cluster", "up", *args)
    _assert_clean_failure(result, 2)
    assert result.stderr.startswith("error: cluster options is invalid:\n")
    assert f"\n  {field}: " in result.stderr
    assert "  -> fix the fields named above" in result.stderr


def test_cluster_up_bad_name_with_a_config_file(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("node_pools: [{name: gpu, count: 1}]\n")
    result = invoke("cluster", "up", "--config", str(config), "--name", "Bad_Name")
    _assert_clean_failure(result, 2)
    assert "\n  name: " in result.stderr


def test_cluster_up_bad_name_without_a_config_file() -> None:
    result = invoke("cluster", "up", "--name", "Bad_Name")
    _assert_clean_failure(result, 2)
    assert "\n  name: " in result.stderr


def test_cluster_up_bad_config_file(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("node_pools:\n- count: many\n")
    result = invoke("cluster", "up", "--config", str(config))
    _assert_clean_failure(result, 2)
    assert f"error: {config} is invalid:" in result.stderr
    assert "node_pools[0].count" in result.stderr


def test_cluster_up_missing_config_file(tmp_path: Path) -> None:
    result = invoke("cluster", "up", "--config", str(tmp_path / "missing.yaml"))
    _assert_clean_failure(result, 2)
    assert "error: cannot read cluster config" in result.stderr
    assert "  -> check the path" in result.stderr


def test_cluster_up_validation_runs_before_the_provider_is_looked_up() -> None:
    # Both are wrong: the spec error wins, so nothing provider-specific (let alone a cluster) starts.
    result = invoke("cluster", "up", "--provider", "nope", "--nodes", "-1")
    _assert_clean_failure(result, 2)
    assert "node_pools[0].count" in result.stderr
    assert "unknown cluster provider" not in result.stderr


def test_cluster_up_invalid_taint_effect_is_a_clean_error() -> None:
    result = invoke("cluster", "up", "--node-taint", "gpu=true:Sometimes")
    _assert_clean_failure(result, 2)
    assert "effect" in result.stderr


def _default_provider() -> object:
    status = main.commands["cluster"].commands["status"]  # type: ignore[attr-defined]
    return next(p.default for p in status.params if p.name == "provider_name")


@pytest.mark.parametrize("provider", [None, "local"])
def test_cluster_status_of_a_missing_cluster_exits_3(provider: str | None) -> None:
    args = ["cluster", "status", "--name", "does-not-exist"]
    if provider is not None:
        args += ["--provider", provider]
    elif _default_provider() != "local":  # the default is read from KTHENA_PROVIDER at import
        pytest.skip("KTHENA_PROVIDER selects another default provider")
    result = invoke(*args)
    assert result.exit_code == 3, result.output
    assert "Traceback" not in result.output
    assert "no local cluster named 'does-not-exist'" in result.stderr


def test_cluster_status_unknown_provider_exits_2() -> None:
    result = invoke("cluster", "status", "--provider", "nope")
    _assert_clean_failure(result, 2)
    assert result.stderr.startswith("error: --provider: unknown cluster provider 'nope'")


def test_cluster_down_of_a_missing_local_cluster(cache_dir: Path) -> None:
    result = invoke("cluster", "down", "--provider", "local", "--name", "does-not-exist")
    assert result.exit_code == 0, result.output
    assert "no local cluster named 'does-not-exist' to remove" in result.stderr
    assert not (cache_dir / "clusters" / "does-not-exist").exists()


def test_binaries_path_when_not_built_exits_3() -> None:
    result = invoke("binaries", "path")
    assert result.exit_code == 3, result.output
    assert "make binaries" in result.stderr


def test_unknown_option_is_a_usage_error() -> None:
    result = invoke("cluster", "up", "--bogus")
    assert result.exit_code == 2
    assert "No such option" in result.output
