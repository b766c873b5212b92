"""A webhook address that cannot be bound is said in one line naming it, never a traceback."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conformance.cluster.pki import CertificateAuthority
from kthena_ref.admission.server import WebhookListenError, serve


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    issued = CertificateAuthority(tmp_path / "pki", common_name="ca").issue(
        "webhook", common_name="webhook", hosts=("127.0.0.1",), server=True
    )
    return issued.cert, issued.key


@pytest.fixture
def taken_port() -> object:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_serve_on_a_taken_port_names_it(pair: tuple[Path, Path], taken_port: int) -> None:
    with pytest.raises(WebhookListenError, match=rf"127\.0\.0\.1:{taken_port}: .*in use"):
        asyncio.run(serve(taken_port, *pair, "127.0.0.1"))


def test_run_with_a_taken_webhook_port_exits_with_one_clear_line(
    pair: tuple[Path, Path], taken_port: int, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    cert, key = pair
    argv = [sys.executable, "-m", "kthena_ref.cli", "run", "--kubeconfig", str(kubeconfig),
            "--webhook-port", str(taken_port), "--webhook-host", "127.0.0.1",
            "--webhook-cert", str(cert), "--webhook-key", str(key)]  # fmt: skip
    done = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert f"the webhook cannot listen on 127.0.0.1:{taken_port}" in done.stderr
    assert "in use" in done.stderr.lower() and "--webhook-port" in done.stderr
    assert "Traceback" not in done.stderr, done.stderr
