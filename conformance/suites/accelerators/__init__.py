"""Accelerators: a DRA driver certified against its vendor's capability file."""
