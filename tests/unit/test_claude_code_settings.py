"""Installing and uninstalling the supervisor's hooks in Claude Code's settings files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from supervisor.claude_code.settings import (
    DEFAULT_MATCHER,
    SettingsInvalid,
    install,
    is_ours,
    settings_path,
    uninstall,
)


def test_install_creates_the_documented_entry(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.json"
    change = install(path, timeout=120, executable="/opt/sup/bin/supervisor")
    assert change.changed
    hooks = json.loads(path.read_text())["hooks"]
    assert set(hooks) == {"PreToolUse", "PostToolUse", "PostToolUseFailure"}
    (group,) = hooks["PreToolUse"]
    assert group == {
        "matcher": DEFAULT_MATCHER,
        "hooks": [
            {
                "type": "command",
                "command": "/opt/sup/bin/supervisor hook claude-code --timeout 120",
                "timeout": 120,
            }
        ],
    }
    assert not install(path, timeout=120, executable="/opt/sup/bin/supervisor").changed


def test_reinstall_replaces_instead_of_adding(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    install(path, timeout=120)
    install(path, timeout=300, db_url="sqlite:////tmp/a b.db")
    groups = json.loads(path.read_text())["hooks"]["PreToolUse"]
    (group,) = groups
    (hook,) = group["hooks"]
    assert hook["timeout"] == 300 and "'sqlite:////tmp/a b.db'" in hook["command"]


@pytest.mark.parametrize("indent", [None, 2, 4])
def test_round_trip_keeps_the_file_byte_identical(tmp_path: Path, indent: int | None) -> None:
    path = tmp_path / "settings.json"
    original = json.dumps(
        {
            "env": {"FOO": "é"},
            "hooks": {
                "PreToolUse": [
                    {"matcher": "*", "hooks": [{"type": "command", "command": "mine.sh"}]}
                ]
            },
        },
        indent=indent,
        ensure_ascii=False,
    )
    path.write_text(original)
    install(path)
    assert path.read_text() != original
    uninstall(path)
    assert path.read_text() == original


def test_uninstall_keeps_other_hooks_in_a_shared_group(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    install(path)
    data = json.loads(path.read_text())
    data["hooks"]["PreToolUse"][0]["hooks"].append({"type": "command", "command": "other.sh"})
    path.write_text(json.dumps(data, indent=2) + "\n")
    uninstall(path)
    assert json.loads(path.read_text()) == {
        "hooks": {
            "PreToolUse": [
                {"matcher": DEFAULT_MATCHER, "hooks": [{"type": "command", "command": "other.sh"}]}
            ]
        }
    }


def test_uninstall_without_a_file_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    assert not uninstall(path).changed
    assert not path.exists()


@pytest.mark.parametrize("text", ["{oops", "[]", '{"hooks": []}'])
def test_an_unreadable_settings_file_is_left_alone(tmp_path: Path, text: str) -> None:
    path = tmp_path / "settings.json"
    path.write_text(text)
    with pytest.raises(SettingsInvalid):
        install(path)
    with pytest.raises(SettingsInvalid):
        uninstall(path)
    assert path.read_text() == text


def test_scopes_and_ownership(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert settings_path("user") == tmp_path / ".claude" / "settings.json"
    assert settings_path("project", project_dir=tmp_path / "p") == (
        tmp_path / "p" / ".claude" / "settings.json"
    )
    assert is_ours({"type": "command", "command": "/x/supervisor hook claude-code"})
    assert not is_ours({"type": "command", "command": "lint.sh"})
    assert not is_ours("hook claude-code")
