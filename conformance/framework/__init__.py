"""The suite's machinery: profiles and features, support declarations, the behaviour catalog, selection,
outcomes and verdicts, the report, waits, namespaces and evidence (see docs/development.md)."""
