"""Kthena's reference ModelServing controller (implemented in later issues; see the README)."""

__version__ = "0.1.0"
