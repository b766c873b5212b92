"""A support-file scaffold: every feature, its profile and meaning, ready to trim.

Why this module exists: an implementer's first question is "what do I declare?". Reading
:mod:`.features` to find out cost hours; ``kthena-conformance support init`` writes a file that
already loads (:func:`conformance.framework.support.load_support`), lists every feature under its
profile with whether the profile requires it and what it covers, and shows the optional fields
(``podLabels``, ``controllerRestart``) commented out. The implementer deletes the features the
implementation lacks (or moves them to ``unsupportedFeatures`` with a reason).
"""

from __future__ import annotations

import json
import textwrap

from .features import FEATURES, PROFILES, feature_order
from .support import API_VERSION, KIND, PodLabels

WIDTH = 100


def _quoted(value: str) -> str:
    """A YAML scalar that stays a string (``1.10`` would be a number): JSON quoting is valid YAML."""
    return json.dumps(value)


def _comment(text: str, indent: str) -> list[str]:
    return [f"{indent}# {line}" for line in textwrap.wrap(text, WIDTH - len(indent) - 2)]


def support_scaffold(name: str, version: str) -> str:
    """The scaffold's YAML text for implementation ``name`` at ``version``. Pure."""
    lines = [
        f"# What {name} supports, for kthena-conformance (docs/testing-your-implementation.md).",
        "# Every feature is listed as supported: delete the ones it lacks, or move them to",
        "# unsupportedFeatures with a reason. A profile fails when one of its required features is not",
        "# supported; optional ones are tested only when declared. Check it with",
        "# `kthena-conformance support check FILE`.",
        f"apiVersion: {API_VERSION}",
        f"kind: {KIND}",
        "implementation:",
        f"  name: {_quoted(name)}",
        f"  version: {_quoted(version)}",
        "  # organization: Example Corp",
        "  # url: https://example.com",
        "  # contact: [conformance@example.com]",
        "supportedFeatures:",
    ]
    for profile in PROFILES.values():
        lines.append("")
        lines += _comment(f"Profile {profile.name}: {profile.description}", "  ")
        for feature in sorted(profile.features, key=feature_order):
            info = FEATURES[feature]
            kind = "required" if feature in profile.required else "optional"
            needs = f" Needs {', '.join(sorted(f.value for f in info.requires))}." if info.requires else ""
            lines += _comment(f"{feature.value} ({kind}): {info.description}{needs}", "  ")
            lines.append(f"  - {feature.value}")
    labels = PodLabels()
    lines += [
        "",
        "# unsupportedFeatures:             # declared NOT supported, each with a reason",
        "#   - {name: MigrationRequired, reason: not implemented}",
        "# podLabels:                       # the Pod label keys naming a ServingGroup and a Role instance",
        f"#   servingGroup: {labels.serving_group}",
        f"#   roleInstance: {labels.role_instance}",
        "# controllerRestart:               # how the suite restarts your controller (not needed when the",
        "#                                  # harness starts it with --implementation-command)",
        "#   command: [kubectl, -n, my-system, rollout, restart, deployment/my-controller]",
        "#   timeoutSeconds: 120",
        "# launch:                          # the harness installs and starts your implementation on the local",
        "#                                  # provider (as run --implementation-command; not with those flags)",
        '#   command: [./bin/my-controller, --webhook-port, "{webhook_port}"]   # argv, or one quoted string',
        "#   manifests: [deploy/crds.yaml]  # applied before it starts; relative to this file",
        "#   readyLog: caches synced        # ready once a line of its output matches (default: after 3 s)",
        "#   readyTimeoutSeconds: 60",
        "#   webhook: true                  # a loopback certificate and port: {webhook_port}, {webhook_cert}, ...",
    ]
    return "\n".join(lines) + "\n"
