"""Widgets of the detail pane."""
