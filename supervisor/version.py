"""The package version, in a module of its own so that any module can name it without importing
the public ``supervisor`` facade (which would make every such module part of an import cycle).
Keep it equal to ``version`` in pyproject.toml."""

from __future__ import annotations

__version__ = "0.1.0"
