"""Provider lookup by name, with one clear error for names that do not exist."""

from __future__ import annotations

from .errors import BadInput
from .provider import Provider

PROVIDER_NAMES = ("local", "kind", "k3s", "existing")


def get_provider(name: str, **options: str | None) -> Provider:
    """The provider called ``name``. ``options`` are provider-specific (kubeconfig, context...)."""
    if name == "local":
        from .local.provider import LocalProvider

        return LocalProvider()
    if name == "kind":
        from .kind import KindProvider

        return KindProvider()
    if name == "k3s":
        from .k3s import K3sProvider

        return K3sProvider()
    if name == "existing":
        from .existing import ExistingProvider

        return ExistingProvider(kubeconfig=options.get("kubeconfig"), context=options.get("context"))
    raise BadInput(
        f"--provider: unknown cluster provider {name!r} (from --provider or KTHENA_PROVIDER)",
        f"choose one of: {', '.join(PROVIDER_NAMES)} (local is the embedded default)",
    )
