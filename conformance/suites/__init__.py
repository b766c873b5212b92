"""The conformance tests, one package per profile; each test declares its behaviour (catalog)."""
