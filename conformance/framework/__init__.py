"""The suite's framework: waits, namespaces and (in later issues) features, profiles and reports."""
