"""Where the shipped assets (styles, demo pages) are, from a checkout and an install alike."""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def assets_dir() -> Path:
    """The assets folder: ``supervisor/_assets`` in a wheel, ``assets/`` in a checkout.

    Raises:
        FileNotFoundError: neither exists (a broken install).
    """
    for candidate in (_PACKAGE_DIR / "_assets", _PACKAGE_DIR.parent / "assets"):
        if (candidate / "styles").is_dir():
            return candidate
    raise FileNotFoundError(
        "The supervisor's assets are missing; reinstall agent-supervisor "
        "(pip install --force-reinstall agent-supervisor)."
    )


def asset_path(*parts: str) -> Path:
    """Path of one asset, e.g. ``asset_path("styles", "supervisor.tcss")``."""
    path = assets_dir().joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(f"Asset {'/'.join(parts)} is missing from {assets_dir()}.")
    return path
