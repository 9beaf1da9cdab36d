"""Trace analysis and export: figures from content-free outcome evidence, OTLP/JSONL output."""

from __future__ import annotations

from supervisor.analysis.analyzer import TraceStats, analyze, format_stats, parse_since
from supervisor.analysis.stats import ToolStats

__all__ = ["ToolStats", "TraceStats", "analyze", "format_stats", "parse_since"]
