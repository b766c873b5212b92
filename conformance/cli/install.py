"""``kthena-conformance install prerequisites``: what the selected profiles need in a cluster
besides the implementation; ``install reference``: the reference controller deployed into a cluster
in one step (least privilege), running until interrupted.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..cluster.errors import HarnessError
from ..cluster.registry import get_provider
from .base import _fail, main, provider_options


@main.group("install")
def install_group() -> None:
    """Install what the suite needs in a cluster besides the implementation."""


@install_group.command("prerequisites")
@provider_options
@click.option("--profile", "profiles", multiple=True, help="these profiles' prerequisites (default: every profile's)")
@click.option("--list", "list_only", is_flag=True, help="say what each profile needs; install nothing")
def install_prerequisites(
    provider_name: str, name: str, kubeconfig: str | None, context: str | None, profiles: tuple[str, ...],
    list_only: bool,
) -> None:  # fmt: skip
    """Install the selected profiles' prerequisites (the PodGroup CRD for GangScheduling, ...) into a
    cluster: a local one by --name, or any by --provider existing --kubeconfig/--context. Runs on a
    cluster the harness creates do this by themselves."""
    from ..framework.features import SelectionError, get_profile
    from ..run.deploy import apply_manifests
    from ..run.prerequisites import for_profiles, installable

    try:
        names = [get_profile(p).name for p in profiles]
    except SelectionError as exc:
        click.secho(f"error: {exc}", fg="red", err=True)
        sys.exit(2)
    for item in for_profiles(names):
        how = "installed by this command" if item.load else "not installable by this command"
        click.echo(f"{item.profile}: {item.what} ({how})")
    if list_only:
        return
    try:
        docs = installable(names)  # may fetch a CRD (the LeaderWorkerSet CRD from its Go module)
        if not docs:
            return
        info = get_provider(provider_name, kubeconfig=kubeconfig, context=context).info(name)
        where = [(f"{d['kind']} {d['metadata']['name']}", d) for d in docs]
        apply_manifests(info, where, set(), lambda line: click.echo(line, err=True))
    except HarnessError as exc:
        _fail(exc)
        return
    click.echo(f"installed: {', '.join(w for w, _ in where)}", err=True)


@install_group.command("reference")
@provider_options
@click.option("--log-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("."), show_default=True,
              help="where the controller's log (kthena-ref.log) goes")  # fmt: skip
def install_reference(provider_name: str, name: str, kubeconfig: str | None, context: str | None,
                      log_dir: Path) -> None:  # fmt: skip
    """Deploy the reference controller into a cluster in one step, as the harness does, and run it
    until interrupted (Ctrl-C): its CRDs and ClusterRole, a ServiceAccount bound to that ClusterRole
    alone whose token the controller runs with (least privilege), the controller itself, and on a
    local cluster (whose API server reaches this machine's loopback) its validating webhook. For a
    cluster another test suite then drives (upstream Kthena's e2e, say): a local one by --name, or
    any by --provider existing --kubeconfig/--context. On exit (Ctrl-C or SIGTERM) the controller
    stops and the webhook configuration it registered is removed (so it refuses nothing once its
    server is gone)."""
    import signal
    import tempfile

    from ..implementations import reference
    from ..run.deploy import deploy_reference

    try:
        info = get_provider(provider_name, kubeconfig=kubeconfig, context=context).info(name)
    except HarnessError as exc:
        _fail(exc)
        return
    log_dir.mkdir(parents=True, exist_ok=True)

    def interrupted(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # Ctrl-C, and SIGTERM (a backgrounded command's SIGINT may be ignored), end it the same way.
    signal.signal(signal.SIGINT, interrupted)
    signal.signal(signal.SIGTERM, interrupted)
    with tempfile.TemporaryDirectory(prefix="kthena-ref-secrets-") as secrets:
        try:
            controller = deploy_reference(info, Path(secrets), log_dir, [])
        except HarnessError as exc:
            _fail(exc)
            return
        webhook = info.provider == "local"
        click.echo(
            f"kthena-ref runs against {info.name} (pid {controller.pid}, log {log_dir / 'kthena-ref.log'}"
            f"{', webhook registered' if webhook else ', no webhook: the API server cannot reach this machine'}); "
            "Ctrl-C stops it",
            err=True,
        )
        try:
            controller.process.wait()
            click.secho(f"error: kthena-ref exited with code {controller.process.returncode}", fg="red", err=True)
            code = 1
        except KeyboardInterrupt:
            code = 0
        finally:
            controller.stop()
            if webhook:
                reference.unregister_webhook(info)
    sys.exit(code)
