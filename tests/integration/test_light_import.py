"""``import supervisor`` stays light: no UI, no model client, no browser, sandbox or MCP SDK."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("textual", "openai", "browser_use", "e2b", "mcp", "acp", "screens")


def _loaded_after(statement: str) -> set[str]:
    code = (
        f"import sys, json\n{statement}\n"
        "print(json.dumps(sorted({name.split('.')[0] for name in sys.modules})))"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    return set(json.loads(output))


def test_import_supervisor_loads_no_heavy_package() -> None:
    assert _loaded_after("import supervisor").isdisjoint(HEAVY)


def test_public_governance_api_loads_no_heavy_package() -> None:
    loaded = _loaded_after(
        "from supervisor import governed_tool, ToolResult, ToolOutcome, ToolRegistry\n"
        "import supervisor.demo.tools"
    )
    assert loaded.isdisjoint(HEAVY), loaded & set(HEAVY)


def test_cli_help_loads_no_heavy_package() -> None:
    loaded = _loaded_after(
        "from click.testing import CliRunner\n"
        "from supervisor.cli.main import cli\n"
        "CliRunner().invoke(cli, ['--help'])"
    )
    assert loaded.isdisjoint(HEAVY), loaded & set(HEAVY)
