"""``kthena-conformance run``: provision, deploy, preflight, run the suite, write the report.

The main job, end to end:

1. validate the inputs (support declaration, selection, waits): a mistake is one clear message,
   exit code 2, and a report saying so; print the profiles the run covers and why any is left
   out (on the embedded cluster, Accelerators certifies the fake drivers by default, see
   :func:`.accelerators.plan_accelerators`);
2. bring up the cluster (any provider) and deploy the implementation under test: the reference
   controller (least-privilege token, admission webhook), or ``external`` (already running);
3. preflight: what the cluster must provide (Nodes Ready, the ModelServing CRD served at
   v1alpha1, a validating webhook answering, the schedulers the suite's manifests name), each
   missing item named; a failed preflight runs no test (exit 3);
4. the suite in two pytest passes, in subprocesses: the tests that may share the cluster on
   ``--workers`` xdist workers, then the ones that must run alone; each pass's full output goes
   to its log, and one line per finished behaviour is printed from its progress file
   (:mod:`.progress`);
5. merge both passes with the catalog: every behaviour of the selected profiles appears in the
   report, as run or as skipped-by-user / not-supported / not run (interrupted); verdicts per
   profile (a SHOULD or MAY behaviour that does not hold is a ``warning``, which never fails a
   profile); the spec map's coverage of the judged profiles (:mod:`conformance.framework.specmap`);
   the report (YAML + JSON), JUnit XML and allure results are written in every case, including
   Ctrl-C, and this run's leftover namespaces are swept.

With ``--shard I/N`` the run covers the I-th of N slices of the selection (see
:mod:`conformance.framework.shard`): the other shards' behaviours are reported skipped-by-user,
``run.shard`` records the slice, and the exit code judges only this shard's own behaviours;
``kthena-conformance report merge`` makes one report of the N shard reports.

The steps live in :mod:`.planning` (1), :mod:`.passes` (4) and :mod:`.finish` (5); this module
is their sequence.

Exit codes: 0 every selected profile succeeded; 1 a profile is failure, partial or not-run;
2 bad input; 3 the cluster or its preflight failed; 130 interrupted.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import os
import secrets
import sys
from pathlib import Path
from typing import Any

from .. import __version__
from ..cluster.errors import BadInput, HarnessError
from ..cluster.paths import runs_root
from ..cluster.provider import ClusterInfo, Progress, quiet
from ..cluster.registry import get_provider
from ..cluster.spec import ClusterSpec, NodePool
from . import credentials
from .accelerators import (
    certified_drivers,
    device_pools,
    drivers_absent,
    fake_build,
    fake_device_faults,
    load_accelerators,
)
from .checkpoint import Checkpoint
from .deploy import deploy_command, deploy_reference
from .finish import RunResult, _assemble, _clean, _finish, _sweep, internal_error, interrupted, options_wait
from .health import Watch
from .launch import SETTLE_SECONDS, LaunchError, crds_of
from .options import (
    EXIT_CLUSTER,
    EXIT_USAGE,
    RunOptionError,
    RunOptions,
    check_cluster_options,
)
from .passes import _in_pass, _pytest_base, _run_pass
from .planning import (
    _announce,
    _deployed_by,
    _launch,
    _names,
    _resolve_implementation,
    _support,
    check_report_dir,
    dry_run_verdict,
)
from .preflight import preflight, preflight_line
from .prerequisites import installable
from .progress import RunProgress
from .realnodes import ENV as REAL_NODES_ENV
from .realnodes import PLAIN_POOL, asked_by_env, host_problem, plan_real_nodes
from .restarts import RestartService

__all__ = ["RunOptions", "RunResult", "options_wait", "run"]


def run(options: RunOptions, progress: Progress = quiet) -> RunResult:
    """The whole job; always writes the report (see the module docstring)."""
    from ..framework import catalog
    from ..framework.features import SelectionError
    from ..framework.selection import Selection
    from ..framework.shard import Shard, assign
    from ..framework.support import SupportFileError
    from ..framework.timeouts import TimeoutConfigError, Timeouts

    started = dt.datetime.now(dt.UTC)
    run_id = secrets.token_hex(4)
    behaviours = catalog.collect()
    data: dict[str, Any] = {
        "suite": {"name": "kthena-conformance", "version": __version__, "digest": catalog.suite_digest()},
        "run": {
            "id": run_id,
            "startedAt": started.isoformat(),
            "command": list(sys.argv),
            "keep": options.keep,
            "selection": {"profiles": options.profiles, "features": options.features, "ids": options.ids},
        },
        "implementation": {"name": options.implementation_name or options.implementation},
        "verdict": "error",
        "notes": [],
    }
    result = RunResult(data)
    from ..framework.capabilities import CapabilityFileError, effective_support

    shard: Shard | None = None
    provider: Any = None
    if not options.dry_run:  # a dry run writes nothing; any other run's directory holds only that run
        try:
            check_report_dir(options.report_dir)
        except BadInput as exc:
            data["error"] = {"message": exc.message, "hint": exc.hint}
            result.exit_code, result.unwritten = EXIT_USAGE, exc.message
            return _finish(result, options, started, write=False)
        _clean(options.report_dir.resolve())
    try:
        provider = get_provider(options.provider_name, kubeconfig=options.kubeconfig, context=options.context)
        if options.shard is not None:
            shard = Shard.parse(options.shard)
            data["run"]["shard"] = shard.as_report([])
        declared = _support(options)
        options = _resolve_implementation(options, declared)
        capabilities, options, plan = load_accelerators(options, data, behaviours)
        support = effective_support(declared, capabilities)
        selection = Selection.parse(options.profiles, options.features, options.ids, include_slow=not options.skip_slow)
        selection.check_ids(behaviours)
        timeouts = Timeouts.from_options(options.timeout_scale, options.timeouts)
        launch = _launch(options, declared)
        check_cluster_options(options)
        provider.check_inputs()
        asked_env = asked_by_env(os.environ.get(REAL_NODES_ENV))
    except BadInput as exc:
        data["error"] = {"message": exc.message, "hint": exc.hint}
        result.exit_code = EXIT_USAGE
        return _finish(result, options, started)
    except (
        SupportFileError, SelectionError, TimeoutConfigError, CapabilityFileError, LaunchError, RunOptionError
    ) as exc:  # fmt: skip
        data["error"] = {"message": str(exc), "hint": "see `kthena-conformance run --help`"}
        result.exit_code = EXIT_USAGE
        return _finish(result, options, started)
    except KeyboardInterrupt as interruption:
        interrupted(data, result, interruption, "while its inputs were read")
        return _finish(result, options, started)
    except Exception as exc:
        internal_error(data, result, exc)
        return _finish(result, options, started)
    data["implementation"] = {**support.as_report(), "deployedBy": _deployed_by(options, launch)}
    if launch is not None:
        data["implementation"]["command"] = list(launch.command)
    data["run"]["selection"] = selection.as_report()
    _announce(options, plan, progress)
    data["run"]["timeouts"] = timeouts.as_report()
    selected = [b for b in behaviours if selection.selects(b)]
    owners: dict[str, int] = {}
    if shard is not None:
        owners = assign(selected, shard.total)
        mine = [b for b in selected if owners[b.id] == shard.index]
        data["run"]["shard"] = shard.as_report(b.id for b in mine)
        data["notes"].append(
            f"shard {shard}: {len(mine)} of the {len(selected)} selected behaviours are this shard's; the other "
            "shards' are skipped-by-user here, and the exit code judges this shard's own behaviours only "
            "(`kthena-conformance report merge` makes one report of all the shards' reports)"
        )
        selected = mine
    if options.dry_run:
        # an existing cluster may declare faults it injects (conformance.cluster.declared)
        injects = provider.injects_now()
        real_nodes = _dry_run_real_nodes(options)
        result.listing = [
            f"{b.id:60} {b.profile.name:20} {'serial' if b.serial else 'parallel':8} "
            + dry_run_verdict(b, support, options.provider_name, injects, real_nodes)
            for b in selected
        ]
        data["verdict"] = "not-run"
        data["notes"].append("dry run: nothing was run")
        data["tests"] = []
        return _finish(result, options, started, write=False)

    info: ClusterInfo | None = None
    controller: Any = None
    passes: list[dict[str, Any]] = []
    credentials.sweep_orphans()
    secrets_dir = credentials.make()
    report_dir = options.report_dir.resolve()
    work = report_dir / ".passes"
    try:
        progress(f"bringing up the {options.provider_name} cluster")
        spec = ClusterSpec(name=options.cluster_name or f"conformance-{os.getpid()}")
        if options.provider_name == "local":  # created before the garbage collector starts: known at once
            if options.implementation == "reference":
                from ..implementations import reference

                own = reference.crds()
            else:
                own = crds_of(list(launch.manifests)) if launch is not None else []
            needed = [d for d in installable(selection.profiles) if d["metadata"]["name"] not in
                      {c["metadata"]["name"] for c in own}]  # fmt: skip
            spec = spec.model_copy(update={"crds": [*own, *needed]})
            if needed:
                progress(f"installing the prerequisites of the selected profiles: {_names(needed)}")
        asked = options.real_nodes if options.real_nodes is not None else asked_env
        own_run_dir = runs_root() / spec.name  # the local provider's run directory of this cluster
        problem = host_problem(own_run_dir) if options.provider_name == "local" and asked is not False else None
        real = plan_real_nodes(asked, options.provider_name, problem)
        data["notes"].append(real.note)
        pools = device_pools(capabilities, real_nodes=real.use) if options.provider_name in ("local", "kind") else []
        if real.use and not any(p.kind == "real" for p in pools):
            pools.append(NodePool(name=PLAIN_POOL, kind="real", count=1))
        if pools:
            spec = spec.model_copy(update={"node_pools": [*spec.node_pools, *pools]})
        with fake_device_faults(options.fake_device_faults):
            info = provider.up(
                spec, progress=progress, owner_pid=options.cluster_owner_pid if options.keep_cluster else os.getpid()
            )
        data["cluster"] = info.as_report()
        if capabilities:
            data["accelerators"]["drivers"] = certified_drivers(
                capabilities, info.details.get("draDrivers") or [], fake_build()
            )
            absent = drivers_absent(capabilities, info, progress)
            if absent:
                data["error"] = {"message": "; ".join(absent), "hint": "docs/accelerators.md says how to install one"}
                result.exit_code = EXIT_CLUSTER
                return result
        controller_log = options.controller_log
        if options.implementation == "reference":
            progress("deploying the reference controller (least-privilege token, webhook)")
            controller = deploy_reference(info, Path(secrets_dir.name), report_dir, options.reference_faults)
            controller_log = controller.log
            data["implementation"]["log"] = str(controller.log)
            if options.reference_faults:
                data["implementation"]["faults"] = list(options.reference_faults)
        elif launch is not None:
            installed = {crd["metadata"]["name"] for crd in spec.crds}
            controller = deploy_command(info, launch, installed, Path(secrets_dir.name), report_dir, progress)
            controller_log = controller.log
            data["implementation"]["log"] = str(controller.log)
            if launch.ready_log is None:
                data["notes"].append(
                    f"the implementation counted as ready once it had run {SETTLE_SECONDS:g}s "
                    "(no --implementation-ready-log pattern was given)"
                )
        progress("running preflight checks")
        checks = preflight(info, tell=lambda check: progress(preflight_line(check)))
        data["preflight"] = [c.as_dict() for c in checks]
        missing_fields = next((c.detail for c in checks if c.name == "crd-documented-fields" and c.detail), None)
        if missing_fields:
            data["cluster"]["crdMissingFields"] = list(missing_fields)
            progress(next(c.message for c in checks if c.name == "crd-documented-fields"))
        if not all(c.ok or not c.required for c in checks):
            missing = ", ".join(c.name for c in checks if not c.ok and c.required)
            data["error"] = {"message": f"preflight failed: {missing}", "hint": "see the preflight section"}
            result.exit_code = EXIT_CLUSTER
            return result
        work.mkdir(parents=True, exist_ok=True)
        info_file = work / "cluster.json"
        info_file.write_text(info.to_json())
        base = _pytest_base(options, info, info_file, run_id, report_dir, controller_log)
        counter = RunProgress(len(selected))
        checkpoint = Checkpoint(
            lambda: _write_draft(data, passes, counter, len(selected), behaviours, selection, support, shard, owners,
                                 options.report_dir)
        )  # fmt: skip
        with contextlib.ExitStack() as stack:
            watch = stack.enter_context(_watch(controller, info, provider))
            if controller is not None:  # the harness runs it, so the harness restarts it on request
                restart = watch.restart_wrapper(controller.restart)
                restarts = stack.enter_context(RestartService(work / "restarts", restart))
                base += ["--controller-restart", json.dumps(restarts.command())]
            for pass_name in ("parallel", "serial"):
                if not any(_in_pass(b, pass_name) for b in selected):
                    continue
                progress(f"running the {pass_name} pass")
                passes.append(_run_pass(base, pass_name, options, work, progress, counter, watch, checkpoint))
                lost = passes[-1].get("lost")
                if lost is not None:
                    data["error"] = lost.as_error()
                    result.exit_code = lost.exit_code
                    break
                if passes[-1]["interrupted"]:
                    break
        if checkpoint.failure:
            data["notes"].append(f"the report could not be written while the run went on: {checkpoint.failure}")
    except KeyboardInterrupt as interruption:
        interrupted(data, result, interruption, "while running" if info is not None else "while the cluster started")
    except HarnessError as exc:
        data["error"] = {"message": exc.message, "hint": exc.hint}
        result.exit_code = EXIT_USAGE if isinstance(exc, BadInput) else EXIT_CLUSTER
    except Exception as exc:
        internal_error(data, result, exc)
    finally:
        try:
            if info is not None and passes is not None:
                try:
                    _assemble(data, passes, behaviours, selection, support, result, shard=shard, owners=owners)
                except Exception as exc:
                    internal_error(data, result, exc)
                lost = next((p["lost"] for p in passes if p.get("lost") is not None), None)
                if passes:  # the results are final now: on disk before the sweep, which may take minutes
                    _write_now(data, result, options.report_dir)
                if lost is not None and lost.what != "controller":
                    data["notes"].append(f"this run's test namespaces were not swept: {lost.cause}")
                else:  # without the controller, finalizers may keep them: ask, do not wait
                    wait = lost is None and options.await_namespace_removal
                    _sweep(info, run_id, dataclasses.replace(options, await_namespace_removal=wait), data)
        finally:
            if controller is not None:
                controller.stop()
            secrets_dir.cleanup()
            if info is not None and not options.keep_cluster:
                provider.down(info.name)
            _finish(result, options, started)
    return result


def _watch(controller: Any, info: ClusterInfo, provider: Any) -> Watch:
    """The run's watch on what the tests depend on (:mod:`.health`): the controller the harness
    runs, the API server, and on the embedded cluster its components (from its supervisor's state)."""
    from .health import api_probe, node_readiness

    try:
        probe, server = api_probe(info.kubeconfig, info.context)
        nodes: Any = node_readiness(info.kubeconfig, info.context)
    except Exception:  # a kubeconfig the client cannot use for a probe: the tests will say so
        probe, server, nodes = None, "", None
    state = (lambda: provider.status(info.name)) if info.provider == "local" else None
    return Watch(controller, probe, state, server=server, nodes=nodes)


def _write_draft(
    data: dict[str, Any],
    passes: list[dict[str, Any]],
    counter: RunProgress,
    selected: int,
    behaviours: list[Any],
    selection: Any,
    support: Any,
    shard: Any,
    owners: dict[str, int],
    report_dir: Path,
) -> None:
    """The report as it stands while a pass runs (:mod:`.checkpoint`): what finished so far, the rest
    not run, marked interrupted with the run's progress; written atomically."""
    from ..framework import report
    from ..framework.catalog import REGISTRY
    from .checkpoint import partial_pass, provisional, results_from_progress

    draft = provisional(data, counter.done, selected, dt.datetime.now(dt.UTC))
    over = {p["pass"] for p in passes}
    running = {n: e for n, e in counter.finished.items() if e.get("pass") not in over}
    current = partial_pass(
        str(next(iter(running.values()), {}).get("pass", "running")), results_from_progress(running, REGISTRY)
    )
    _assemble(draft, [*passes, current], behaviours, selection, support, RunResult(draft), shard=shard, owners=owners)
    draft["exitCode"] = None
    report.write(draft, report_dir)


def _write_now(data: dict[str, Any], result: RunResult, report_dir: Path) -> None:
    """The assembled report on disk at once (the run's last steps may take minutes); its files are
    written again, complete, at the very end."""
    from ..framework import report

    with contextlib.suppress(Exception):  # the final write says what went wrong, if it does again
        report.write({**data, "exitCode": result.exit_code}, report_dir)


def _dry_run_real_nodes(options: RunOptions) -> str | None:
    """Why a run with ``options`` would have no real nodes (None: it would, or the cluster declares
    its own): the same decision a run makes, on this host now."""
    if options.provider_name != "local":
        return None
    asked = options.real_nodes if options.real_nodes is not None else asked_by_env(os.environ.get(REAL_NODES_ENV))
    problem = host_problem(runs_root() / "dry-run") if asked is not False else None
    try:
        plan = plan_real_nodes(asked, options.provider_name, problem)
    except HarnessError as exc:
        return str(exc)
    return None if plan.use else plan.note
