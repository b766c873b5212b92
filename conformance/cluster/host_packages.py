"""Installs the Debian packages a host feature needs, so the README's two commands work from nothing.

``make conformance`` runs real nodes wherever the host can (behaviours seen only inside a running
container are then judged for real, not left inconclusive), and real nodes need runc, the CNI
plugins, iptables and a static busybox from Debian. A fresh machine of this project's kind has none
of them, so the main job installs them first, as ``.ci/run`` does for ``make test``.

:func:`missing` decides from ``dpkg-query`` output alone (pure, table-tested); :func:`ensure` asks
dpkg and runs ``apt-get install`` (``apt-get update`` first only when the plain install fails: the
package lists may be stale). A host that cannot install (not root, no apt) is told in one line
what to install by hand; nothing is half-done, since apt-get installs all or nothing.

Usage: ``python -m conformance.cluster.host_packages real-nodes [--check]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence

from .errors import HarnessError
from .realnode.preflight import APT_PACKAGES as REAL_NODE_PACKAGES

FEATURES: dict[str, tuple[str, ...]] = {"real-nodes": REAL_NODE_PACKAGES}
"""Each host feature the harness can install for, and its Debian packages."""

INSTALLED = "install ok installed"


def missing(wanted: Sequence[str], dpkg_status: str) -> list[str]:
    """The packages of ``wanted`` that ``dpkg_status`` (``dpkg-query -W -f='${Package} ${Status}\\n'``
    output, unknown packages absent) does not show installed, in ``wanted``'s order. Pure."""
    installed = set()
    for line in dpkg_status.splitlines():
        name, _, status = line.strip().partition(" ")
        if status.strip() == INSTALLED:
            installed.add(name.split(":", 1)[0])  # an architecture suffix (busybox-static:amd64)
    return [p for p in wanted if p not in installed]


def _dpkg_status(packages: Sequence[str]) -> str:
    # dpkg-query exits 1 when a package is unknown to dpkg; what it printed for the others still counts.
    result = subprocess.run(
        ["dpkg-query", "-W", "-f=${Package} ${Status}\\n", *packages], capture_output=True, text=True, check=False
    )
    return result.stdout


def _apt_install(packages: Sequence[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    argv = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages]
    return subprocess.run(argv, env=env, capture_output=True, text=True, check=False)


def ensure(feature: str, *, check_only: bool = False) -> list[str]:
    """Install what ``feature`` needs and is missing; the packages installed (empty: nothing to do).

    Raises :class:`HarnessError` naming the packages when they cannot be installed here."""
    wanted = FEATURES[feature]
    if shutil.which("dpkg-query") is None:
        raise HarnessError(
            f"{feature}: cannot tell whether {', '.join(wanted)} are installed (no dpkg-query: not a Debian host)",
            f"install the equivalents of the Debian packages {' '.join(wanted)} by hand",
        )
    absent = missing(wanted, _dpkg_status(wanted))
    if not absent or check_only:
        return absent
    fix = f"apt-get install -y {' '.join(absent)}"
    if os.geteuid() != 0:
        raise HarnessError(f"{feature}: the Debian packages {', '.join(absent)} are missing and this is not root", fix)
    print(f"host packages: installing {' '.join(absent)} (Debian) for {feature}", flush=True)
    result = _apt_install(absent)
    if result.returncode != 0:
        update = subprocess.run(["apt-get", "update", "-q"], capture_output=True, text=True, check=False)
        result = _apt_install(absent) if update.returncode == 0 else update
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise HarnessError(f"{feature}: apt-get could not install {', '.join(absent)}: {tail[0]}", fix)
    return absent


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="host_packages", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("feature", choices=sorted(FEATURES))
    parser.add_argument("--check", action="store_true", help="only list what is missing (exit 1 if anything is)")
    args = parser.parse_args(argv)
    try:
        absent = ensure(args.feature, check_only=args.check)
    except HarnessError as exc:
        print(f"host packages: {exc}", file=sys.stderr)
        return 2
    if args.check:
        print(f"host packages for {args.feature}: " + (f"missing {' '.join(absent)}" if absent else "all installed"))
        return 1 if absent else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
