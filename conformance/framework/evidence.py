"""Failure evidence, collected before cleanup: what a reviewer needs to see why a test failed.

For a failed test the framework writes, under ``<artifacts>/<behaviour-id with / as _>/``
(:func:`directory_name`): every
ModelServing of the test namespace and everything in it (Pods, Services, EndpointSlices,
ControllerRevisions, PodGroups when served), its Events in time order, the Pod status history
recorded while the test ran, and the implementation's log lines that mention the namespace.
Collection is best effort: a part that cannot be read is named in ``errors.txt``, never hidden.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from pathlib import Path
from typing import Any

import yaml


def directory_name(behaviour_id: str) -> str:
    """The evidence directory of a behaviour, under the artifacts directory: its id with ``/`` as
    ``_`` (one level, so the report page and a reader find it by the id alone)."""
    return behaviour_id.replace("/", "_")


class PodHistory:
    """Records every Pod status change in a namespace while a test runs (a watch in a thread)."""

    def __init__(self, kube: Any, namespace: str) -> None:
        self.kube = kube
        self.ns = namespace
        self.lines: list[str] = []
        self._stop = threading.Event()
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name=f"pod-history-{namespace}", daemon=True)

    def start(self) -> PodHistory:
        self._thread.start()
        return self

    def stop(self, *, wait: bool = False) -> None:
        """Stop recording; ``wait`` (when the history is about to be written) lets the watch
        deliver what it has. Otherwise the daemon thread ends at its next watch timeout (<= 2 s)."""
        self._stop.set()
        if wait:
            self._thread.join(timeout=3)

    def _run(self) -> None:
        from kubernetes import watch

        version = ""
        while not self._stop.is_set():
            w = watch.Watch()  # type: ignore[no-untyped-call]
            try:
                for event in w.stream(  # type: ignore[no-untyped-call]
                    self.kube.core.list_namespaced_pod, self.ns, timeout_seconds=2, resource_version=version or None
                ):
                    pod = event["object"]
                    version = pod.metadata.resource_version
                    self.lines.append(self._line(event["type"], pod))
                    if self._stop.is_set():
                        break
            except Exception as exc:  # the namespace may be going away; keep what was seen
                self.lines.append(f"+{time.monotonic() - self._started:7.2f}s watch error: {exc}")
                version = ""
                self._stop.wait(0.5)
            finally:
                w.stop()  # type: ignore[no-untyped-call]

    def _line(self, kind: str, pod: Any) -> str:
        status = pod.status
        ready = next((c.status for c in (status.conditions or []) if c.type == "Ready"), "-") if status else "-"
        restarts = sum(c.restart_count or 0 for c in (status.container_statuses or [])) if status else 0
        return (
            f"+{time.monotonic() - self._started:7.2f}s {kind:8} {pod.metadata.name} uid={pod.metadata.uid} "
            f"phase={status.phase if status else '-'} ready={ready} restarts={restarts}"
            f"{' deleting' if pod.metadata.deletion_timestamp else ''}"
        )


def collect(
    kube: Any, namespace: str, directory: Path, *, history: PodHistory | None, controller_log: Path | None
) -> Path:
    """Write the evidence for ``namespace`` into ``directory``; returns it."""
    directory.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    sanitize = kube.api.sanitize_for_serialization

    def dump(name: str, read: Any) -> None:
        try:
            data = read()
            (directory / name).write_text(yaml.safe_dump(sanitize(data), sort_keys=False))
        except Exception as exc:
            errors.append(f"{name}: {type(exc).__name__}: {exc}")

    from ..framework.modelserving import GROUP, PLURAL, VERSION

    dump("modelservings.yaml", lambda: kube.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL))
    dump("pods.yaml", lambda: kube.core.list_namespaced_pod(namespace).items)
    dump("services.yaml", lambda: kube.core.list_namespaced_service(namespace).items)
    dump("endpointslices.yaml", lambda: kube.discovery.list_namespaced_endpoint_slice(namespace).items)
    dump("controllerrevisions.yaml", lambda: kube.apps.list_namespaced_controller_revision(namespace).items)
    dump(
        "podgroups.yaml",
        lambda: kube.custom.list_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", namespace, "podgroups"),
    )

    def events() -> list[Any]:
        items = kube.core.list_namespaced_event(namespace).items
        epoch = dt.datetime.min.replace(tzinfo=dt.UTC)
        return sorted(items, key=lambda e: e.last_timestamp or e.event_time or e.metadata.creation_timestamp or epoch)

    dump("events.yaml", events)
    if history is not None:
        (directory / "pod-history.txt").write_text("\n".join(history.lines) + "\n")
    if controller_log is not None:
        try:
            lines = [line for line in controller_log.read_text(errors="replace").splitlines() if namespace in line]
            (directory / "controller.log").write_text("\n".join(lines[-2000:]) + "\n")
        except OSError as exc:
            errors.append(f"controller.log: {exc}")
    if errors:
        (directory / "errors.txt").write_text("\n".join(errors) + "\n")
    return directory
