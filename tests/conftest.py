"""The project's own tests: unit tests need nothing; tests marked ``cluster`` get the embedded one."""

pytest_plugins = ["conformance.cluster.testing"]
