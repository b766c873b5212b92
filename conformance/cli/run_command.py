"""``kthena-conformance run``: its options, turned into :class:`conformance.run.options.RunOptions`, and
the summary it prints of the report :mod:`conformance.run.orchestration` wrote.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .base import _progress_printer, main, provider_options


@main.command("run")
@provider_options
@click.option(
    "--report-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("reports"), show_default=True
)
@click.option("--keep-cluster", is_flag=True, help="leave the cluster running afterwards")
@click.option(
    "--implementation",
    type=click.Choice(["reference", "external"]),
    default="reference",
    help="deploy the reference controller, or test one already running in the cluster (or started by "
    "--implementation-command or the support file's launch)  [default: external when a command starts it, "
    "else reference]",
)
@click.option("--support-file", type=click.Path(dir_okay=False, path_type=Path), help="ImplementationSupport YAML")
@click.option("--supported-features", multiple=True, help="declare supported features (comma-separated)")
@click.option("--all-features", is_flag=True, help="declare every feature supported")
@click.option("--implementation-name", default=None, help="implementation name (with --supported-features)")
@click.option("--implementation-version", default=None, help="implementation version (with --supported-features)")
@click.option("--profile", "profiles", multiple=True, help="run these profiles (default: all)")
@click.option("--feature", "features", multiple=True, help="run these features only")
@click.option("--id", "ids", multiple=True, help="run these behaviour ids (shell patterns: dns/*)")
@click.option("--skip-slow", is_flag=True, help="skip tests marked slow")
@click.option(
    "--shard",
    default=None,
    metavar="I/N",
    help="run only the I-th of N slices of the selection (CI fleets; merge the reports with `report merge`)",
)
@click.option("--workers", "-n", type=click.IntRange(1, 64), default=2, show_default=True, help="parallel pass workers")
@click.option("--timeout-scale", default="1", show_default=True, help="multiply every documented wait")
@click.option("--timeout", "timeouts", multiple=True, metavar="NAME=SECONDS", help="override one documented wait")
@click.option("--keep", type=click.Choice(["never", "on-failure", "always"]), default="never", show_default=True,
              help="keep test namespaces")  # fmt: skip
@click.option("--dry-run", is_flag=True, help="list what would run, run nothing")
@click.option("--reference-fault", "reference_faults", multiple=True, hidden=True, help="self-validation only")
@click.option("--controller-log", type=click.Path(dir_okay=False, path_type=Path), help="external: its log (evidence)")
@click.option(
    "--implementation-command",
    default=None,
    metavar="CMD",
    help="start your implementation with this command (quoted as for a shell, run without one) once the cluster "
    "is up, KUBECONFIG set to it; its output goes to REPORT_DIR/implementation.log; implies --implementation "
    "external",
)
@click.option(
    "--implementation-manifest",
    "implementation_manifests",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="with --implementation-command: YAML applied before it starts (its CRD, RBAC, webhook configuration); "
    "repeatable",
)
@click.option(
    "--implementation-ready-log",
    default=None,
    metavar="REGEX",
    help="with --implementation-command: it is ready once a line of its output matches (default: once it has run 3 s)",
)
@click.option(
    "--implementation-webhook",
    is_flag=True,
    help="with --implementation-command: make a loopback serving certificate and a free port for its admission "
    "webhook; {webhook_port}, {webhook_cert}, {webhook_key}, {webhook_ca} in the command and manifests (and "
    "{webhook_ca_bundle}, base64) are filled in, webhook configurations applied once it is ready",
)
@click.option(
    "--implementation-ready-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=60.0,
    show_default=True,
    help="with --implementation-command: seconds it may take to be ready",
)
@click.option(
    "--capabilities",
    "capability_files",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="accelerator capability file of a DRA driver to certify (repeatable; the Accelerators profile)",
)
@click.option(
    "--fake-devices/--no-fake-devices",
    default=None,
    help="certify the fake GPU and NPU drivers with their shipped capability files [default: on the embedded "
    "(local) cluster when no --capabilities is given; --no-fake-devices leaves the Accelerators profile out]",
)
@click.option("--fake-devices-fault", "fake_device_faults", multiple=True, hidden=True, help="self-validation only")
@click.option(
    "--real-nodes/--no-real-nodes",
    default=None,
    help="real nodes (containerd and a kubelet on this host) in the embedded cluster, for the behaviours only "
    "observable inside a running container: one per accelerator device class, or one plain node [default: when "
    "the host supports them, or as KTHENA_REAL_NODES=on|off|auto says; --real-nodes makes a host that cannot an "
    "error]",
)
@click.option(
    "--runner-address",
    default=None,
    metavar="HOST",
    help="the address at which the cluster's workloads (an in-cluster autoscaler) reach this machine; the "
    "Autoscaling tests' Prometheus server listens there [default: the provider's: kind its Docker network's "
    "gateway, local 127.0.0.1; give it for an existing cluster whose controller runs in the cluster]",
)
def run_command(
    provider_name: str,
    name: str,
    kubeconfig: str | None,
    context: str | None,
    report_dir: Path,
    keep_cluster: bool,
    implementation: str,
    support_file: Path | None,
    supported_features: tuple[str, ...],
    all_features: bool,
    implementation_name: str | None,
    implementation_version: str | None,
    profiles: tuple[str, ...],
    features: tuple[str, ...],
    ids: tuple[str, ...],
    skip_slow: bool,
    shard: str | None,
    workers: int,
    timeout_scale: str,
    timeouts: tuple[str, ...],
    keep: str,
    dry_run: bool,
    reference_faults: tuple[str, ...],
    controller_log: Path | None,
    implementation_command: str | None,
    implementation_manifests: tuple[Path, ...],
    implementation_ready_log: str | None,
    implementation_ready_timeout: float,
    implementation_webhook: bool,
    capability_files: tuple[Path, ...],
    fake_devices: bool | None,
    fake_device_faults: tuple[str, ...],
    real_nodes: bool | None,
    runner_address: str | None,
) -> None:
    """Provision a cluster, deploy the implementation, run the suite, write the report.

    Exit codes: 0 every selected profile succeeded; 1 a profile is failure, partial or not-run;
    2 bad input; 3 the cluster or its preflight failed; 130 interrupted. The report
    (REPORT_DIR/conformance-report.{yaml,json}), junit.xml and allure-results/ are written in
    every case.
    """
    from ..run.options import RunOptions
    from ..run.orchestration import run as run_suite

    named = click.get_current_context().get_parameter_source("name") is not click.core.ParameterSource.DEFAULT
    source = click.get_current_context().get_parameter_source("implementation")
    if source is click.core.ParameterSource.DEFAULT:
        implementation = "auto"  # external when a command (flag or support file launch) starts it
    options = RunOptions(
        provider_name=provider_name,
        report_dir=report_dir,
        kubeconfig=kubeconfig,
        context=context,
        keep_cluster=keep_cluster,
        cluster_name=name if keep_cluster or named else None,  # a kept cluster is reused by name next time
        implementation=implementation,
        support_file=support_file,
        supported_features=list(supported_features),
        all_features=all_features,
        implementation_name=implementation_name,
        implementation_version=implementation_version,
        profiles=list(profiles),
        features=list(features),
        ids=list(ids),
        skip_slow=skip_slow,
        shard=shard,
        workers=workers,
        timeout_scale=timeout_scale,
        timeouts=list(timeouts),
        keep=keep,
        dry_run=dry_run,
        reference_faults=list(reference_faults),
        controller_log=controller_log,
        implementation_command=implementation_command,
        implementation_manifests=list(implementation_manifests),
        implementation_ready_log=implementation_ready_log,
        implementation_ready_timeout=implementation_ready_timeout,
        implementation_webhook=implementation_webhook,
        capabilities=list(capability_files),
        fake_devices=fake_devices,
        fake_device_faults=list(fake_device_faults),
        real_nodes=real_nodes,
        runner_address=runner_address,
    )
    result = run_suite(options, progress=_progress_printer())
    report = result.report
    if dry_run and not report.get("error"):
        for line in result.listing:
            click.echo(line)
        click.echo(f"{len(result.listing)} behaviour(s) selected{f' in shard {shard}' if shard else ''}", err=True)
        sys.exit(result.exit_code)
    for check in report.get("preflight", []):
        click.echo(f"  preflight {check['name']:28} {check['result']:8} {check['message']}", err=True)
    for profile in report.get("profiles", []):
        counts = ", ".join(f"{v} {k}" for k, v in profile["counts"].items() if v)
        click.echo(f"  profile {profile['profile']:20} {profile['verdict']:9} {counts}", err=True)
    explained = set()
    for cause in report.get("causes", []):  # one line per shared cause, then the failures of their own
        explained.update(cause["behaviours"])
        click.echo(f"  cause ({len(cause['behaviours'])} behaviours): {cause['cause']}", err=True)
    for test in report.get("tests", []):
        if test["outcome"] in ("non-conformant", "warning", "error") and test["id"] not in explained:
            click.echo(f"  {test['outcome']:15} {test['id']}: {test['message'][:300]}", err=True)
    for note in report.get("notes", []):
        click.echo(f"  note: {note[:500]}", err=True)
    if report.get("error"):
        click.secho(f"error: {report['error']['message']}", fg="red", err=True)
        if report["error"].get("hint"):
            click.echo(f"  -> {report['error']['hint']}", err=True)
    if report["run"].get("interrupted"):
        click.echo(f"{report['run'].get('interruption') or 'interrupted'}", err=True)
    if result.unwritten is not None:
        if "no report could be written" not in str(report.get("error", {}).get("message")):
            click.secho(f"error: {result.unwritten}", fg="red", err=True)
        click.echo(f"verdict: {report['verdict']} (exit code {result.exit_code}); no report was written", err=True)
    else:
        click.echo(f"verdict: {report['verdict']}; report: {', '.join(str(p) for p in result.paths)}", err=True)
    sys.exit(result.exit_code)
