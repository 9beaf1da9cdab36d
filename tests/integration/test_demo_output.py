"""The demo's agents share one terminal: every line they print arrives whole, and escaped.

Real processes write to one pipe with Python unbuffered (``PYTHONUNBUFFERED=1``, as CI and
many containers run it), where ``print`` writes a line's text and its newline separately and
another agent's line can land in between: the demo's own test once missed a ``Pending:`` line
cut that way.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

WRITERS = 4
LINES = 20000
WRITER = """
import sys
from supervisor.demo.agent import say
name = sys.argv[1]
sys.stdin.read()  # all start writing at once: the test closes this pipe once they are up
say(f"[{name}] hostile \\x1b[31m red \\u202e end")
for number in range(int(sys.argv[2])):
    say(f"[{name}] line {number} " + "x" * 40)
"""
LINE = re.compile(r"^\[w(\d)\] line (\d+) x{40}$")


def test_lines_of_agents_writing_at_once_arrive_whole_and_escaped() -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    read, write = os.pipe()
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, f"w{index}", str(LINES)],
            stdin=subprocess.PIPE,
            stdout=write,
            env=env,
        )
        for index in range(WRITERS)
    ]
    os.close(write)
    for writer in writers:
        assert writer.stdin is not None
        writer.stdin.close()
    with os.fdopen(read, encoding="utf-8") as output:
        lines = output.read().splitlines()
    assert [writer.wait(timeout=60) for writer in writers] == [0] * WRITERS

    hostile = [line for line in lines if "hostile" in line]
    assert sorted(hostile) == [
        f"[w{index}] hostile \\u001b[31m red \\u202e end" for index in range(WRITERS)
    ]
    seen: dict[int, list[int]] = {index: [] for index in range(WRITERS)}
    cut = []
    for line in lines:
        if "hostile" in line:
            continue
        found = LINE.match(line)
        if found is None:
            cut.append(line)
            continue
        seen[int(found[1])].append(int(found[2]))
    assert cut == []
    assert seen == {index: list(range(LINES)) for index in range(WRITERS)}
