"""Ledger."""
