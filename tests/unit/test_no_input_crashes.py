"""No input makes the tool crash (property-based, hypothesis): any command line of the commands that
need no cluster, and any support or capability file, ends in a documented exit code with a message,
never a stack trace or an "internal error".

The command lines are built from the commands' own click parameters (every option of ``run``, so a
new option is covered without touching this file), with values drawn from junk and from values near
the valid ones. ``run`` always gets ``--dry-run`` and a local or unknown provider, so nothing starts.
The files are YAML documents built from the schemas' own field names with values of every type."""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance.cli import main
from conformance.cli.entry import invoke
from conformance.framework.capabilities import CapabilityFileError, load_all
from conformance.framework.support import SupportFileError, load_support

DOCUMENTED_CODES = {0, 1, 2, 3}

NEAR_VALID = [
    "", " ", "-", "--", "-1", "0", "1", "2", "65536", "1e999", "nan", "inf", "abc", "Core", "Nope", "core",
    "Core,Bogus", "Core,,", "a=b", "=", "a=", "=b", "x:y", "1/2", "0/0", "3/2", "2/x", "dns/*", "*", "{", "}",
    "'", '"', "ready(", "https://", "http://127.0.0.1", "ctl 'unclosed", "namespace-cleanup=5",
    "namespace-cleanup=-1", "never", "always", "reference", "external", "auto", "sub/x", "/", "/dev/null",
    "UPPER_case", "é", "x" * 80,
]  # fmt: skip
TOKENS = st.one_of(
    st.sampled_from(NEAR_VALID),
    st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=16),
)
PROVIDERS = st.sampled_from(["local", "lokal", "", "LOCAL", "kind "])


@contextlib.contextmanager
def _sandbox() -> Iterator[Path]:
    """A fresh working directory and cache, the environment variables the CLI reads unset."""
    saved_cwd, saved_env = os.getcwd(), dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="kthena-fuzz-") as tmp:
        os.chdir(tmp)
        os.environ["KTHENA_CACHE_DIR"] = str(Path(tmp) / "cache")
        for name in ("KTHENA_PROVIDER", "KTHENA_DEBUG", "KTHENA_REAL_NODES", "KUBECONFIG", "KTHENA_BIN_DIR"):
            os.environ.pop(name, None)
        try:
            yield Path(tmp)
        finally:
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)


def _run_cli(args: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = invoke(args)
    return code, out.getvalue() + err.getvalue()


def _assert_clean(args: list[str], code: int, output: str) -> None:
    assert code in DOCUMENTED_CODES, f"{args}: exit {code}\n{output}"
    assert "Traceback" not in output, f"{args}\n{output}"
    assert "internal error" not in output, f"{args}\n{output}"


def _options(command: click.Command, skip: set[str]) -> list[click.Option]:
    return [p for p in command.params if isinstance(p, click.Option) and p.name not in skip and not p.hidden]


@st.composite
def option_args(draw: st.DrawFn, command: click.Command, skip: set[str]) -> list[str]:
    args: list[str] = []
    options = _options(command, skip)
    for option in draw(st.lists(st.sampled_from(options), max_size=6)) if options else []:
        flag = option.opts[0] if not option.secondary_opts or draw(st.booleans()) else option.secondary_opts[0]
        args += [flag] if option.is_flag else [flag, draw(TOKENS)]
    return args


RUN = main.commands["run"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(args=option_args(RUN, skip={"provider_name", "dry_run", "report_dir"}), provider=PROVIDERS)
def test_no_run_command_line_crashes(args: list[str], provider: str) -> None:
    with _sandbox():
        argv = ["run", "--dry-run", "--provider", provider, *args]
        _assert_clean(argv, *_run_cli(argv))


def _pure_command_lines() -> st.SearchStrategy[list[str]]:
    """Commands that touch no cluster, with any options and arguments."""

    def command(*path: str, skip: set[str] = frozenset(), arguments: int = 0) -> st.SearchStrategy[list[str]]:  # type: ignore[assignment]
        cmd: Any = main
        for name in path:
            cmd = cmd.commands[name]
        return st.tuples(option_args(cmd, set(skip)), st.lists(TOKENS, min_size=arguments, max_size=arguments + 1)).map(
            lambda pair: [*path, *pair[1], *pair[0]]
        )

    return st.one_of(
        command("support", "check", arguments=1),
        command("support", "init"),
        command("capabilities", "check", arguments=1),
        command("coverage"),
        command("report", "verify", arguments=1),
        command("report", "merge", arguments=1),
        command("cluster", "status", skip={"provider_name", "kubeconfig", "context"}),
        command("webhook", "register", skip={"provider_name", "kubeconfig", "context"}).map(lambda a: [*a, "--print"]),
        command("install", "prerequisites", skip={"provider_name", "kubeconfig", "context"}).map(
            lambda a: [*a, "--list"]
        ),
        command("binaries", "path"),
        st.lists(TOKENS, max_size=3),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(argv=_pure_command_lines())
def test_no_command_line_of_the_other_commands_crashes(argv: list[str]) -> None:
    with _sandbox():
        _assert_clean(argv, *_run_cli(argv))


# -- the support and capability file schemas --------------------------------------------------------------

SUPPORT_KEYS = ["apiVersion", "kind", "implementation", "supportedFeatures", "unsupportedFeatures", "podLabels",
                "launch", "controllerRestart", "name", "version", "url", "reason", "command", "manifests",
                "readyLog", "readyTimeoutSeconds", "webhook", "timeoutSeconds", "servingGroup", "roleInstance"]  # fmt: skip
CAPABILITY_KEYS = ["apiVersion", "kind", "vendor", "driver", "driverVersion", "pods", "image", "deviceClasses",
                   "name", "level", "deviceNamePattern", "nodes", "selector", "devicesPerNode", "minDevicesPerNode",
                   "minNodes", "tolerations", "attributes", "type", "atLeast", "equals", "pattern", "capacity",
                   "claims", "maxDevicesPerClaim", "containerEnv", "value"]  # fmt: skip
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(allow_nan=True), TOKENS,
    st.sampled_from(["conformance.kthena.io/v1alpha1", "ImplementationSupport", "Core", "Admission", "Recovery",
                     "conformance.kthena.io/capabilities/v1", "AcceleratorCapabilities", "MUST", "SHOULD", "int",
                     "string", "version", "gpu.example.com", "16Gi"]),
)  # fmt: skip


def _documents(keys: list[str], base: dict[str, Any]) -> st.SearchStrategy[Any]:
    values = st.recursive(
        SCALARS,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(keys) | TOKENS, inner, max_size=5),
        max_leaves=20,
    )
    documents = st.dictionaries(st.sampled_from(keys), values, max_size=8).map(lambda d: {**base, **d})
    return documents | values


def _write(tmp: Path, document: Any, raw: bool) -> Path:
    path = tmp / "file.yaml"
    if raw:
        path.write_bytes(document if isinstance(document, bytes) else str(document).encode("utf-8", "surrogatepass"))
    else:
        path.write_text(yaml.safe_dump(document, allow_unicode=True))
    return path


SUPPORT_BASE = {"apiVersion": "conformance.kthena.io/v1alpha1", "kind": "ImplementationSupport"}
CAPABILITY_BASE = {"apiVersion": "conformance.kthena.io/capabilities/v1", "kind": "AcceleratorCapabilities"}


@settings(max_examples=300, deadline=None)
@given(document=_documents(SUPPORT_KEYS, SUPPORT_BASE) | st.binary(max_size=64) | TOKENS)
def test_no_support_file_crashes_the_loader(document: Any) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = _write(Path(tmp), document, raw=isinstance(document, bytes | str))
        with contextlib.suppress(SupportFileError):
            load_support(path)


@settings(max_examples=300, deadline=None)
@given(document=_documents(CAPABILITY_KEYS, CAPABILITY_BASE) | st.binary(max_size=64) | TOKENS)
def test_no_capability_file_crashes_the_loader(document: Any) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = _write(Path(tmp), document, raw=isinstance(document, bytes | str))
        with contextlib.suppress(CapabilityFileError):
            load_all([path])


@settings(max_examples=60, deadline=None)
@given(document=_documents(SUPPORT_KEYS, SUPPORT_BASE))
def test_support_check_ends_with_0_or_2_and_a_message(document: Any) -> None:
    with _sandbox() as tmp:
        path = _write(tmp, document, raw=False)
        code, output = _run_cli(["support", "check", str(path)])
        _assert_clean(["support", "check"], code, output)
        assert code in (0, 2) and output.strip()


@pytest.mark.parametrize("command", ["run", "cluster", "support", "capabilities", "report", "webhook", "install"])
def test_help_of_every_group_exits_0(command: str) -> None:
    with _sandbox():
        code, output = _run_cli([command, "--help"])
    assert code == 0 and "Usage:" in output
