"""What a conformance run is asked to do, and the exit codes it answers with (defined in
:mod:`conformance.framework.exit_codes`, re-exported here).

Its own module so the run's parts (orchestration, accelerators) share one definition of the
options without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..framework.exit_codes import EXIT_CLUSTER, EXIT_INTERRUPTED, EXIT_NONCONFORMANT, EXIT_OK, EXIT_USAGE

__all__ = [
    "EXIT_CLUSTER",
    "EXIT_INTERRUPTED",
    "EXIT_NONCONFORMANT",
    "EXIT_OK",
    "EXIT_USAGE",
    "PACKAGE_DIR",
    "REFERENCE_SUPPORT",
    "RunOptionError",
    "RunOptions",
]

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # the ``conformance`` package
REFERENCE_SUPPORT = PACKAGE_DIR / "implementations" / "kthena-ref-support.yaml"


class RunOptionError(ValueError):
    """Options that contradict each other, with the options named."""


@dataclass
class RunOptions:
    provider_name: str = "local"
    report_dir: Path = Path("reports")
    kubeconfig: str | None = None
    context: str | None = None
    keep_cluster: bool = False
    cluster_name: str | None = None  # reuse (or make and keep) this cluster; default: a fresh one
    cluster_owner_pid: int | None = None  # with keep_cluster: the kept cluster still dies with this process
    # "reference", "external", or "auto": external when a command starts it (--implementation-command
    # or the support file's launch), else the reference; run() resolves it once the support is read
    implementation: str = "reference"
    support_file: Path | None = None
    supported_features: list[str] = field(default_factory=list)
    all_features: bool = False
    implementation_name: str | None = None
    implementation_version: str | None = None
    profiles: list[str] = field(default_factory=list)
    features: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    skip_slow: bool = False
    shard: str | None = None  # "I/N": run only the I-th of N shards of the selection (framework/shard.py)
    workers: int = 2
    timeout_scale: str = "1"
    timeouts: list[str] = field(default_factory=list)
    keep: str = "never"
    # Whether the run waits for its test namespaces to be gone before it returns (their deletion is
    # always asked for). Runs that follow each other on one kept cluster (self-validation) need not.
    await_namespace_removal: bool = True
    dry_run: bool = False
    reference_faults: list[str] = field(default_factory=list)  # self-validation only
    controller_log: Path | None = None  # external: the implementation's log, for evidence
    # The implementation as a command the harness starts (run/launch.py): argv as one shell-quoted
    # string, manifests applied before it starts, what its output shows once it is ready.
    implementation_command: str | None = None
    implementation_manifests: list[Path] = field(default_factory=list)
    implementation_ready_log: str | None = None
    implementation_ready_timeout: float = 60.0
    implementation_webhook: bool = False  # make a loopback certificate and port for its webhook
    pytest_args: list[str] = field(default_factory=list)
    # Accelerators: capability files of the DRA drivers to certify; fake_devices True adds the fake
    # drivers' shipped files, False never does, None (default) uses them on the embedded cluster
    # when no capability file is given (see run.accelerators.plan_accelerators); fake_device_faults
    # break the fake drivers (self-validation only).
    capabilities: list[Path] = field(default_factory=list)
    fake_devices: bool | None = None
    fake_device_faults: list[str] = field(default_factory=list)
    # Real nodes on the embedded cluster (run/realnodes.py): True insists, False never, None (default)
    # when the host supports them.
    real_nodes: bool | None = None
    # The address the cluster's workloads reach this machine at (runner_address.py): the Autoscaling
    # tests' Prometheus is served there. None: the provider's (kind: its network's gateway; local: loopback).
    runner_address: str | None = None


def check_cluster_options(options: RunOptions) -> None:
    """:class:`RunOptionError` when the cluster options cannot mean what they say. Pure."""
    if options.runner_address is not None:
        from ..cluster.runner_address import RunnerAddressError, parse

        try:
            parse(options.runner_address)
        except RunnerAddressError as exc:
            raise RunOptionError(str(exc)) from None
    if options.cluster_name is None:
        return
    if options.provider_name == "existing":
        raise RunOptionError(
            "--name: the existing provider's cluster is the one --kubeconfig/--context name; leave --name out"
        )
    if not options.keep_cluster:
        raise RunOptionError(
            f"--name {options.cluster_name}: names a cluster the run keeps and reuses; add --keep-cluster (without "
            "it a run uses a fresh cluster of its own and removes it afterwards)"
        )
