"""Widgets of the inbox pane."""
