"""Widgets of the processes pane."""
