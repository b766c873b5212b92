"""`kthena-ref run` outside a cluster without --kubeconfig: one clear message, no traceback."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from kthena_ref.cli import main


def test_run_without_a_cluster_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    result = CliRunner().invoke(main, ["run"])
    assert result.exit_code == 1, result.output
    assert "no cluster to connect to" in result.output and "--kubeconfig" in result.output
    assert "Traceback" not in result.output


def test_kubeconfig_comes_from_the_environment_as_kubectls_does(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    result = CliRunner().invoke(main, ["run"])
    assert result.exit_code == 2, result.output
    assert "--kubeconfig" in result.output and "/nonexistent/kubeconfig" in result.output
    assert "Traceback" not in result.output
