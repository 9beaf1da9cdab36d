"""Offline review of a trace: rows read from a source, their index and their statistics.

- :mod:`~supervisor.services.review.rows`: a row, the filters, reading a ledger or a JSONL
  trace in chunks.
- :mod:`~supervisor.services.review.index`: every row in a temporary SQLite database, with
  filtered selections grown in steps.
- :mod:`~supervisor.services.review.stats`: outcome mix, per-tool figures, approval latency.
- :mod:`~supervisor.services.review.service`: one review (a source and its index), built by
  the composition root and handed to the review screen.
"""
