"""Helpers for tests and benchmarks of Tribunal services (``stack``: Redis and processes)."""
