"""Alembic migrations for the ledger, shipped inside the package and run from code."""
