"""The project's own tests: unit tests need nothing; tests marked ``cluster`` get the embedded one,
and the ones that need it the reference controller too."""

pytest_plugins = ["conformance.cluster.testing", "conformance.implementations.testing"]
