"""Assets ship inside the wheel and are found from a checkout and an install alike."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from supervisor.assets import asset_path, assets_dir

ROOT = Path(__file__).resolve().parents[2]


def test_assets_found_from_the_checkout() -> None:
    assert assets_dir() == ROOT / "assets"
    assert asset_path("styles", "supervisor.tcss").read_text().strip()


def test_missing_asset_is_a_clear_error() -> None:
    with pytest.raises(FileNotFoundError, match="missing"):
        asset_path("styles", "nope.tcss")


@pytest.mark.slow
def test_wheel_contains_packages_and_assets(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("agent_supervisor-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "supervisor/_assets/styles/supervisor.tcss" in names
    assert "supervisor/_assets/web/serve.css" in names  # `supervisor serve`'s pages
    assert "supervisor/_assets/web/tui/app_index.html" in names  # and its /tui page
    assert "supervisor/__init__.py" in names
    assert "screens/__init__.py" in names
    assert "sandboxes/__init__.py" in names
    entry_points = next(name for name in names if name.endswith("entry_points.txt"))
    assert (
        "supervisor = supervisor.cli.main:main"
        in zipfile.ZipFile(wheel).read(entry_points).decode()
    )


def test_installed_layout_finds_packaged_assets(tmp_path: Path) -> None:
    """Simulate the wheel layout: supervisor/_assets next to the package wins."""
    package = tmp_path / "supervisor"
    (package / "_assets" / "styles").mkdir(parents=True)
    source = (ROOT / "supervisor" / "assets.py").read_text()
    (package / "assets.py").write_text(source)
    (package / "__init__.py").write_text("")
    code = "import supervisor.assets as a; print(a.assets_dir())"
    output = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
    ).stdout.strip()
    assert output == str(package / "_assets")
