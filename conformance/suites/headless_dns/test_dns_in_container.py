"""DNSResolution, as the engine process sees it: inside each member's running container.

The headless-service plugin sets each Pod's hostname and subdomain so that a member's address is
``<pod-hostname>.<discovery-service>.<namespace>`` "as the engine process sees it", and gives the
Pods ``ENTRY_ADDRESS``. Outside a container (test_dns_resolution.py) the names are asked of the
cluster's DNS server directly; here they are asked through the Pod's own resolver, from inside a
member container, and the container's hostname is read: that needs a container the kubelet really
started, so the Pods run on the cluster's real nodes (:mod:`conformance.framework.realnodes`; a
cluster without them makes this inconclusive, never a pass).

Names are read from the objects (``spec.hostname``, ``spec.subdomain``, the ``ENTRY_ADDRESS`` a
Pod carries), never derived. A name counts as resolved when ``nslookup`` (the image's, through
``/etc/resolv.conf``, the cluster DNS the kubelet configured) answers with the Pod's IP. A
relative name (``ENTRY_ADDRESS`` is ``<entry-service>.<namespace>``) is looked up as a libc
resolver does with the Pod's ``search`` list and ``ndots:5``: each search domain appended in turn,
the first that answers wins (busybox's ``nslookup`` does not apply the search list itself).
"""

from __future__ import annotations

from typing import Any

from conformance.framework.catalog import behaviour
from conformance.framework.features import Feature
from conformance.framework.modelserving import ModelServings, container_of, env_of, expected_pod_count
from conformance.framework.realnodes import observed_on_real_nodes, place_modelserving, require, run_in

from . import ENTRY_ADDRESS, USING_PLUGINS, entries

CLUSTER_SUFFIX = "svc.cluster.local"


def _answers(ms: ModelServings, pod: Any, command: str) -> str:
    """What ``sh -c command`` prints in ``pod``'s first container (exec through the API server)."""
    return run_in(ms.kube.core, ms.ns, pod.metadata.name, container_of(pod).name, "sh", "-c", command)


def _addresses(output: str) -> set[str]:
    """The IPv4 addresses in an ``nslookup`` answer, the server's own line(s) excluded."""
    found: set[str] = set()
    answer = False
    for line in output.splitlines():
        if line.strip().startswith("Name:"):
            answer = True  # busybox prints the server first, then "Name:" and the answers
        if answer and "Address" in line:
            found.update(part for part in line.replace(":", " ").split() if part.count(".") == 3)
    return found


# The first search domain of /etc/resolv.conf under which NAME resolves (a libc resolver's order
# for a name with fewer than ndots:5 dots), then the name as given.
SEARCH_LOOKUP = (
    "for d in $(sed -n 's/^search //p' /etc/resolv.conf) ''; do "
    'n="$NAME${d:+.$d}"; out=$(nslookup "$n" 2>&1) && { echo "$out"; exit 0; }; done; echo "$out"; exit 1'
)


def _resolves(ms: ModelServings, asker: Any, name: str, ip: str, what: str, *, search: bool = False) -> None:
    """Wait until ``nslookup name`` inside ``asker`` answers exactly ``ip`` (``name`` is shell text;
    ``search``: through the Pod's search list, as its resolver would)."""

    def probe() -> str:
        return _answers(ms, asker, f"NAME={name}; {SEARCH_LOOKUP}" if search else f"nslookup {name}")

    def describe(out: str) -> str:
        return f"nslookup said: {out.strip()[-400:]}"

    ms.wait(
        "endpoints",
        f"{what} to resolve to {ip} inside pod {asker.metadata.name}",
        probe,
        lambda out: _addresses(out) == {ip},
        describe=describe,
    )


@behaviour(
    "dns/in-container/hostname-and-addresses",
    "Inside every member's running container the hostname MUST be the Pod's spec.hostname, and every member's "
    "address <pod-hostname>.<discovery-service>.<namespace> and ENTRY_ADDRESS MUST resolve to the Pods' IPs "
    "through the Pod's own resolver.",
    USING_PLUGINS,
    Feature.DNS_RESOLUTION,
)
def test_names_resolve_inside_member_containers(ms: ModelServings, manifest: Any, suite: Any, request: Any) -> None:
    real = require(suite, "a member's hostname and what its own resolver answers")
    body = manifest("dns-resolution")
    place_modelserving(body, real)
    ms.create(body)
    pods = ms.wait_pods(body["metadata"]["name"], expected_pod_count(body))
    observed_on_real_nodes(request, [p.spec.node_name for p in pods])

    for pod in pods:
        assert pod.spec.hostname and pod.spec.subdomain, (
            f"pod {pod.metadata.name} has hostname={pod.spec.hostname!r} subdomain={pod.spec.subdomain!r}: "
            "no member address to resolve"
        )
        seen = _answers(ms, pod, "hostname").strip()
        assert seen == pod.spec.hostname, (
            f"pod {pod.metadata.name}: the container's hostname is {seen!r}, its spec.hostname {pod.spec.hostname!r}"
        )

    # What each name must resolve to: member addresses to their Pod, ENTRY_ADDRESS to its instance's entry.
    want = {f"{p.spec.hostname}.{p.spec.subdomain}.{ms.ns}.{CLUSTER_SUFFIX}": p.status.pod_ip for p in pods}
    for name, ip in sorted(want.items()):
        _resolves(ms, pods[0], name, ip, name)
    by_instance: dict[str, list[Any]] = {}
    for pod in pods:
        by_instance.setdefault(pod.spec.subdomain, []).append(pod)
    for discovery, members in sorted(by_instance.items()):
        entry_pods = entries(members)
        names = [p.metadata.name for p in entry_pods]
        assert len(entry_pods) == 1, f"the Role instance with Discovery Service {discovery} has entry Pods {names}"
        entry = entry_pods[0]
        carriers = [p for p in members if env_of(p).get(ENTRY_ADDRESS)]
        assert carriers, f"no Pod of the Role instance with Discovery Service {discovery} carries {ENTRY_ADDRESS}"
        for pod in carriers:
            what = f"{ENTRY_ADDRESS} ({env_of(pod)[ENTRY_ADDRESS]}, entry Pod {entry.metadata.name})"
            _resolves(ms, pod, f'"${ENTRY_ADDRESS}"', entry.status.pod_ip, what, search=True)
