"""Widgets of the trace pane."""
