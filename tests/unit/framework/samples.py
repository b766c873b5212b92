"""Sample values the framework's table tests share (reports, merges, the HTML page)."""

from __future__ import annotations

from conformance.framework.features import Feature
from conformance.framework.support import Support

# An implementation declaring every feature but DNSResolution, as the reference does on a
# cluster whose DNS Pods cannot query.
SUPPORT = Support(
    "kthena-ref",
    "0.1.0",
    frozenset(Feature) - {Feature.DNS_RESOLUTION},
    {Feature.DNS_RESOLUTION: "the embedded cluster has no DNS server"},
    source="flags",
)
