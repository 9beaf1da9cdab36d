"""Pane widgets; one folder per pane a user sees."""
