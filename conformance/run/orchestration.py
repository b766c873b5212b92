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
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from ..cluster.errors import HarnessError
from ..cluster.paths import runs_root
from ..cluster.provider import ClusterInfo, Progress, quiet
from ..cluster.registry import get_provider
from ..cluster.spec import ClusterSpec, NodePool
from . import credentials, signals
from .accelerators import (
    AcceleratorPlan,
    certified_drivers,
    device_pools,
    drivers_absent,
    fake_build,
    fake_device_faults,
    load_accelerators,
)
from .deploy import deploy_command, deploy_reference
from .launch import SETTLE_SECONDS, Launch, LaunchError, crds_of
from .options import (
    EXIT_CLUSTER,
    EXIT_INTERRUPTED,
    EXIT_NONCONFORMANT,
    EXIT_OK,
    EXIT_USAGE,
    PACKAGE_DIR,
    REFERENCE_SUPPORT,
    RunOptionError,
    RunOptions,
    check_cluster_options,
)
from .preflight import preflight
from .prerequisites import installable
from .progress import BehaviourCounter, ProgressTail, profile_lines
from .realnodes import ENV as REAL_NODES_ENV
from .realnodes import PLAIN_POOL, asked_by_env, host_problem, observed_notes, plan_real_nodes
from .restarts import RestartService

__all__ = ["RunOptions", "RunResult", "options_wait", "run"]


@dataclass
class RunResult:
    report: dict[str, Any]
    paths: list[Path] = field(default_factory=list)
    exit_code: int = EXIT_OK
    listing: list[str] = field(default_factory=list)  # --dry-run


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
    try:
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
    except (
        SupportFileError, SelectionError, TimeoutConfigError, CapabilityFileError, LaunchError, RunOptionError
    ) as exc:  # fmt: skip
        data["error"] = {"message": str(exc), "hint": "see `kthena-conformance run --help`"}
        result.exit_code = EXIT_USAGE
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
        injects = get_provider(
            options.provider_name, kubeconfig=options.kubeconfig, context=options.context
        ).injects_now()
        result.listing = [
            f"{b.id:60} {b.profile.name:20} {'serial' if b.serial else 'parallel':8} "
            + dry_run_verdict(b, support, options.provider_name, injects)
            for b in selected
        ]
        data["verdict"] = "not-run"
        data["notes"].append("dry run: nothing was run")
        data["tests"] = []
        return _finish(result, options, started, write=False)

    provider = get_provider(options.provider_name, kubeconfig=options.kubeconfig, context=options.context)
    info: ClusterInfo | None = None
    controller: Any = None
    passes: list[dict[str, Any]] = []
    credentials.sweep_orphans()
    secrets_dir = credentials.make()
    report_dir = options.report_dir.resolve()
    work = report_dir / ".passes"
    try:
        _clean(report_dir)
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
        asked = options.real_nodes if options.real_nodes is not None else asked_by_env(os.environ.get(REAL_NODES_ENV))
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
        checks = preflight(info)
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
        counter = BehaviourCounter(len(selected))
        with contextlib.ExitStack() as stack:
            if controller is not None:  # the harness runs it, so the harness restarts it on request
                restarts = stack.enter_context(RestartService(work / "restarts", controller.restart))
                base += ["--controller-restart", json.dumps(restarts.command())]
            for pass_name in ("parallel", "serial"):
                if not any(_in_pass(b, pass_name) for b in selected):
                    continue
                progress(f"running the {pass_name} pass")
                passes.append(_run_pass(base, pass_name, options, work, progress, counter))
                if passes[-1]["interrupted"]:
                    break
    except KeyboardInterrupt as interruption:
        data["run"]["interrupted"] = True
        data["run"]["interruption"] = f"interrupted ({signals.name_of(interruption)}) while running"
        result.exit_code = EXIT_INTERRUPTED
    except HarnessError as exc:
        data["error"] = {"message": exc.message, "hint": exc.hint}
        result.exit_code = EXIT_CLUSTER
    finally:
        try:
            if info is not None and passes is not None:
                _assemble(data, passes, behaviours, selection, support, result, shard=shard, owners=owners)
                _sweep(info, run_id, options, data)
        finally:
            if controller is not None:
                controller.stop()
            secrets_dir.cleanup()
            if info is not None and not options.keep_cluster:
                provider.down(info.name)
            _finish(result, options, started)
    return result


def _announce(options: RunOptions, plan: AcceleratorPlan, progress: Progress) -> None:
    """Print the profiles this run covers, every one it leaves out with the reason, and the
    accelerator drivers chosen by default."""
    from ..framework.features import PROFILES

    left_out = {"Accelerators": plan.left_out} if plan.left_out else {}
    for line in profile_lines(options.profiles, list(PROFILES), left_out):
        progress(line)
    if plan.by_default:
        for note in plan.notes:
            progress(note)


def _in_pass(b: Any, pass_name: str) -> bool:
    from ..framework.selection import in_pass

    return in_pass(b, pass_name)


def _resolve_implementation(options: RunOptions, support: Any) -> RunOptions:
    """``auto`` made concrete: external when a command starts it (flag or support file), else the reference."""
    if options.implementation != "auto":
        return options
    starts = options.implementation_command is not None or getattr(support, "launch", None) is not None
    return dataclasses.replace(options, implementation="external" if starts else "reference")


def _launch(options: RunOptions, support: Any = None) -> Launch | None:
    """The implementation command to start, checked; None when the harness starts none. From the
    ``--implementation-*`` flags or the support file's ``launch`` (never both)."""
    from .launch import LaunchNames

    flags = bool(options.implementation_manifests or options.implementation_ready_log or options.implementation_webhook)
    declared = getattr(support, "launch", None)
    if declared is not None:
        if options.implementation_command is not None or flags:
            raise LaunchError(
                f"{declared.source}: launch: the support file already says how to start the implementation; "
                "drop --implementation-command/-manifest/-ready-log/-webhook (or the launch section)"
            )
        if options.implementation == "reference":
            raise LaunchError(
                f"{declared.source}: launch starts your implementation: run it with --implementation external "
                "(or leave --implementation out)"
            )
        return Launch.parse(
            declared.command,
            declared.ready_log,
            declared.ready_timeout,
            list(declared.manifests),
            declared.webhook,
            names=LaunchNames.of_file(declared.source),
        )
    if options.implementation_command is None:
        if flags:
            raise LaunchError(
                "--implementation-manifest, --implementation-ready-log and --implementation-webhook need "
                "--implementation-command"
            )
        return None
    if options.implementation == "reference":
        raise LaunchError(
            "--implementation-command starts your implementation: give --implementation external with it "
            "(and declare what it supports)"
        )
    return Launch.parse(
        options.implementation_command,
        options.implementation_ready_log,
        options.implementation_ready_timeout,
        options.implementation_manifests,
        options.implementation_webhook,
    )


def dry_run_verdict(b: Any, support: Any, provider: str, injects: frozenset[Any]) -> str:
    """What a run would do with behaviour ``b``: ``run``, ``not-supported``, or ``inconclusive
    here`` with the reason when the provider's clusters cannot inject a fault kind it needs (the
    catalog's ``faults``; a test known only to inject some fault needs the provider to inject any). Pure."""
    if not all(support.supports(f) for f in b.features):
        return "not-supported"
    can = {str(f) for f in injects}
    lacking = [f for f in b.faults if f not in can]
    if lacking or (b.injects_faults and not can):
        kinds = ", ".join(lacking) if lacking else "faults"
        return f"inconclusive here: the {provider} provider cannot inject {kinds} into Pods (use the local provider)"
    return "run"


def _names(docs: list[dict[str, Any]]) -> str:
    return ", ".join(f"{d['kind']} {d['metadata']['name']}" for d in docs)


def _deployed_by(options: RunOptions, launch: Launch | None) -> str:
    if options.implementation == "reference":
        return "harness"
    return "harness-command" if launch is not None else "external"


def _support(options: RunOptions) -> Any:
    from ..framework.support import SupportFileError, load_support, support_from_flags

    if options.support_file is not None:
        return load_support(options.support_file)
    if options.supported_features or options.all_features:
        return support_from_flags(
            options.implementation_name or options.implementation,
            options.implementation_version or "unknown",
            options.supported_features,
            options.all_features,
        )
    if options.implementation == "reference" or (
        options.implementation == "auto" and options.implementation_command is None
    ):
        return load_support(REFERENCE_SUPPORT)
    raise SupportFileError(
        "an external implementation must declare what it supports: --support-file FILE, "
        "--supported-features A,B or --all-features"
    )


def _pytest_base(
    options: RunOptions,
    info: ClusterInfo,
    info_file: Path,
    run_id: str,
    report_dir: Path,
    controller_log: Path | None,
) -> list[str]:
    args = [
        sys.executable, "-m", "pytest",
        "-p", "conformance.framework.plugin", "-p", "no:cacheprovider",
        "-c", str(PACKAGE_DIR / "suites" / "pytest.ini"), "--rootdir", str(PACKAGE_DIR / "suites"),
        str(PACKAGE_DIR / "suites"),
        "--kubeconfig", str(info.kubeconfig),
        "--cluster-info", str(info_file),
        "--run-id", run_id,
        "--keep", options.keep,
        "--artifacts-dir", str(report_dir / "artifacts"),
        "--wait-scale", options.timeout_scale,
        "--alluredir", str(report_dir / "allure-results"),
        "-q", "-rN", "--durations=15",
    ]  # fmt: skip
    if info.context:
        args += ["--context", info.context]
    if options.support_file is not None:
        args += ["--support-file", str(options.support_file.resolve())]
    elif options.supported_features or options.all_features:
        args += ["--implementation-name", options.implementation_name or options.implementation]
        args += ["--implementation-version", options.implementation_version or "unknown"]
        args += [f"--supported-features={f}" for f in options.supported_features]
        args += ["--all-features"] if options.all_features else []
    else:
        args += ["--support-file", str(REFERENCE_SUPPORT)]
    for flag, values in (("--profile", options.profiles), ("--feature", options.features), ("--id", options.ids)):
        args += [f"{flag}={v}" for v in values]
    args += [f"--wait={w}" for w in options.timeouts]
    if options.skip_slow:
        args.append("--skip-slow")
    if options.shard is not None:
        args.append(f"--shard={options.shard}")
    if controller_log is not None:
        args += ["--controller-log", str(controller_log)]
    if options.runner_address:
        args += ["--runner-address", options.runner_address]
    args += [f"--capabilities={p.resolve()}" for p in options.capabilities]
    return [*args, *options.pytest_args]


PROGRESS_POLL_SECONDS = 0.5  # how often a running pass's progress file is read


def _run_pass(
    base: list[str],
    pass_name: str,
    options: RunOptions,
    work: Path,
    progress: Progress,
    counter: BehaviourCounter | None = None,
) -> dict[str, Any]:
    """Run one pass as a pytest subprocess (full output in ``<pass>.log``), printing one line per
    finished behaviour from its progress file while it runs."""
    results = work / f"{pass_name}.json"
    results.unlink(missing_ok=True)
    events = work / f"{pass_name}.progress.jsonl"
    events.unlink(missing_ok=True)
    args = [*base, "--suite-pass", pass_name, "--results-file", str(results), "--progress-file", str(events)]
    if pass_name == "parallel" and options.workers > 1:
        args += ["-n", str(options.workers)]
    log = work / f"{pass_name}.log"
    tail, counter = ProgressTail(events), counter or BehaviourCounter(0)

    def forward() -> None:
        for line in counter.lines(tail.poll()):
            progress(line)

    started = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=str(work), stdin=subprocess.DEVNULL)
        try:
            while True:
                try:
                    code = proc.wait(timeout=PROGRESS_POLL_SECONDS)
                    break
                except subprocess.TimeoutExpired:
                    forward()
            forward()
        except KeyboardInterrupt as interruption:
            # Ctrl-C reached pytest too (same process group); SIGTERM reached only this process: pass it
            # on as Ctrl-C. Either way, let pytest finish its report.
            if isinstance(interruption, signals.Terminated):
                proc.send_signal(signal.SIGINT)
            try:
                code = proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
            payload = _read_pass(results, pass_name, code, log)
            payload["interrupted"] = True
            payload["signal"] = signals.name_of(interruption)
            progress(f"{pass_name} pass interrupted after {time.monotonic() - started:.0f}s")
            return payload
    progress(f"{pass_name} pass finished in {time.monotonic() - started:.0f}s (pytest exit {code})")
    return _read_pass(results, pass_name, code, log)


def _read_pass(results: Path, pass_name: str, code: int, log: Path) -> dict[str, Any]:
    try:
        payload: dict[str, Any] = json.loads(results.read_text())
    except (OSError, ValueError):
        tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
        return {"pass": pass_name, "exitStatus": code, "interrupted": code == 2, "results": [], "crashed": tail}
    if code not in (0, 1, 2, 5):
        payload["crashed"] = log.read_text(errors="replace")[-3000:]
    return payload


def _assemble(
    data: dict[str, Any],
    passes: list[dict[str, Any]],
    behaviours: list[Any],
    selection: Any,
    support: Any,
    result: RunResult,
    *,
    shard: Any = None,
    owners: dict[str, int] | None = None,
) -> None:
    """Every selected profile's behaviours, as run or as the reason they were not (with a
    ``shard``, the behaviours ``owners`` gives other shards are skipped-by-user)."""
    from ..framework.causes import causes
    from ..framework.documented_fields import blame
    from ..framework.features import PROFILES
    from ..framework.outcomes import Outcome, TestResult, Verdict, overall_verdict, profile_verdict
    from ..framework.shard import other_shard_ids, own_verdict

    owners = owners or {}

    by_id: dict[str, TestResult] = {}
    for payload in passes:
        for raw in payload.get("results", []):
            r = TestResult.from_dict(raw)
            by_id[r.id] = merge_cases(by_id[r.id], r) if r.id in by_id else r
        if payload.get("interrupted"):
            data["run"]["interrupted"] = True
            by = f" ({payload['signal']})" if payload.get("signal") else ""
            data["run"].setdefault("interruption", f"the {payload['pass']} pass was interrupted{by}")
        if payload.get("crashed"):
            data["notes"].append(f"the {payload['pass']} pass ended abnormally: {payload['crashed'][-800:]}")
        if payload.get("warnings") and data.get("accelerators") is not None:
            for bid, text in sorted(payload["warnings"].items()):
                data["accelerators"]["warnings"].append(f"{bid}: {text}")
    interrupted = bool(data["run"].get("interrupted"))
    missing = list(data.get("cluster", {}).get("crdMissingFields", []))
    failed = {Outcome.NON_CONFORMANT, Outcome.ERROR, Outcome.WARNING}
    profiles = [p for p in PROFILES.values() if not selection.profiles or p.name in selection.profiles]
    wanted = {f for p in profiles for f in p.features}
    tests: list[TestResult] = []
    for b in behaviours:
        if b.feature not in wanted:
            continue
        found = by_id.get(b.id)
        if found is None:
            if not selection.selects(b):
                outcome, message = Outcome.SKIPPED_BY_USER, "not selected (--profile/--feature/--id/--skip-slow)"
            elif shard is not None and owners.get(b.id, shard.index) != shard.index:
                outcome, message = Outcome.SKIPPED_BY_USER, shard.skip_reason(owners[b.id])
            elif not all(support.supports(f) for f in b.features):
                missing = next(f for f in b.features if not support.supports(f))
                outcome, message = Outcome.NOT_SUPPORTED, f"{missing}: {support.reason(missing)}"
            else:
                outcome = Outcome.ERROR
                message = (
                    "not run: the run was interrupted"
                    if interrupted
                    else f"not run: {data['error']['message']}"
                    if data.get("error")
                    else "not run: its pass did not report it"
                )
            found = TestResult(b.id, "", b.feature, outcome, 0.0, message, b.statement, b.spec, level=b.level)
        prefix = blame(b.features, missing) if found.outcome in failed else ""
        if prefix and not found.message.startswith(prefix):
            found.message = prefix + found.message
        tests.append(found)
    data["tests"] = [t.as_dict() for t in tests]
    data["notes"] += observed_notes(tests)
    data["causes"] = causes(data["tests"])
    results = [profile_verdict(p, [t for t in tests if t.feature in p.features], support) for p in profiles]
    data["profiles"] = [r.as_dict() for r in results]
    _coverage(data, behaviours, [p.name for p in profiles])
    preflight_ok = all(c.get("result") != "missing" for c in data.get("preflight", []))
    # An error that stopped the run (a failed deployment, say) is the verdict, whatever the
    # profiles' unrun tests add up to: the report's error and its verdict must agree.
    verdict = Verdict.ERROR if data.get("error") else overall_verdict(results, preflight_ok, interrupted)
    data["verdict"] = str(verdict)
    if shard is not None:  # the other shards' skips make the report partial, not this shard's exit code
        others = other_shard_ids(owners, shard)
        verdict = own_verdict(profiles, tests, others, support, preflight_ok=preflight_ok, interrupted=interrupted)
    if result.exit_code == EXIT_OK:
        if interrupted:
            result.exit_code = EXIT_INTERRUPTED
        elif str(verdict) != "success":
            result.exit_code = EXIT_NONCONFORMANT


def _coverage(data: dict[str, Any], behaviours: list[Any], profiles: list[str]) -> None:
    """The report's ``coverage`` block: how much of the packaged spec map the suite asserts, for
    the judged ``profiles``. A spec map that cannot be read costs only the block (a note says why)."""
    from ..framework import specmap

    try:
        loaded = specmap.load(specmap.SPECMAP_PATH, catalog=behaviours)
    except specmap.SpecMapError as exc:
        more = f" (and {len(exc.problems) - 1} more problems)" if len(exc.problems) > 1 else ""
        data["notes"].append(f"spec coverage not computed: {exc.problems[0]}{more}")
        return
    data["coverage"] = specmap.report_block(loaded, specmap.coverage(loaded.statements), profiles)


def _sweep(info: ClusterInfo, run_id: str, options: RunOptions, data: dict[str, Any]) -> None:
    """Remove what this run left (a killed worker's namespace), unless asked to keep it."""
    if options.keep != "never":
        return
    from ..framework import namespaces
    from ..framework.kube import Kube

    wait = options_wait(options) if options.await_namespace_removal else 0.0
    try:  # tests delete their namespaces without waiting; the run waits for all of them here
        kube = Kube.connect(info.kubeconfig, info.context)
        swept = namespaces.sweep(kube, run_id, wait=wait)
    except Exception as exc:
        data["notes"].append(f"sweeping this run's namespaces failed: {exc}")
        return
    if swept and wait:
        data["notes"].append(f"waited for the removal of {len(swept)} test namespace(s) of this run")
    elif swept:
        data["notes"].append(f"asked for the removal of {len(swept)} test namespace(s) of this run (not waited for)")


def options_wait(options: RunOptions) -> float:
    from ..framework.timeouts import Timeouts

    return Timeouts.from_options(options.timeout_scale, options.timeouts).seconds("namespace-cleanup")


def _clean(report_dir: Path) -> None:
    """A report directory holds one run: old results, JUnit and allure files go first."""
    import shutil

    for name in ("allure-results", "artifacts", ".passes"):
        shutil.rmtree(report_dir / name, ignore_errors=True)
    for name in ("junit.xml", "conformance-report.yaml", "conformance-report.json", "index.html"):
        (report_dir / name).unlink(missing_ok=True)


def _finish(result: RunResult, options: RunOptions, started: dt.datetime, *, write: bool = True) -> RunResult:
    from ..framework import junit, report

    data = result.report
    finished = dt.datetime.now(dt.UTC)
    data["run"]["finishedAt"] = finished.isoformat()
    data["run"]["durationSeconds"] = round((finished - started).total_seconds(), 1)
    data["exitCode"] = result.exit_code
    data.setdefault("tests", [])
    if not write:
        return result
    result.paths = report.write(data, options.report_dir)
    result.paths.append(junit.write(data, options.report_dir / "junit.xml"))
    page = options.report_dir / "index.html"
    if page.is_file():
        result.paths.insert(0, page)
    return result


def merge_cases(first: Any, second: Any) -> Any:
    """One behaviour's result from two of its test cases (a parametrized test): the worst outcome wins,
    so a failing case is never hidden by a passing one; the messages of both, each named by its case. Pure."""
    from ..framework.outcomes import combine

    def tagged(r: Any) -> str:
        if not r.message or "[" not in r.nodeid or r.message.startswith("["):  # none, or already tagged
            return str(r.message)
        return f"[{r.nodeid.rpartition('[')[2].rstrip(']')}] {r.message}"

    worst = combine([first.outcome, second.outcome])
    base = first if worst == first.outcome else second
    message = "; ".join(m for m in (tagged(first), tagged(second)) if m)[:4000]
    duration = round(first.duration + second.duration, 3)
    return dataclasses.replace(base, outcome=worst, duration=duration, message=message)
