"""Widgets of the reconciliation view."""
