"""Kthena's reference ModelServing controller: the implementation the suite is proven against, and its
broken variants (docs/reference-controller.md)."""

__version__ = "0.1.0"
