"""Chromium's own URL parser as a test oracle: ``new URL(x)`` in a real headless Chromium.

Chromium is started once with the worker's flags (`sandboxes.browser.config.CHROMIUM_ARGS`)
and a throwaway profile, and driven over the DevTools protocol (by
:class:`support.chromium_page.ChromiumPage`): each batch of inputs is one ``Runtime.evaluate``
in an ``about:blank`` page, so a property test can check hundreds of URLs in seconds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from support.chromium_page import ChromiumPage

_PARSE = """JSON.stringify(%s.map((text) => {
  try {
    const url = new URL(text);
    return {href: url.href, protocol: url.protocol, hostname: url.hostname, port: url.port,
            origin: url.origin, username: url.username, password: url.password};
  } catch (error) {
    return null;
  }
}))"""


@dataclass(frozen=True)
class ChromiumReading:
    """What Chromium's ``URL`` says about one input."""

    href: str
    scheme: str
    host: str
    port: str
    origin: str
    has_credentials: bool


class ChromiumURLs(ChromiumPage):
    """A headless Chromium that parses URLs on request (a context manager).

    Args:
        executable: The Chromium to launch.
    """

    def parse(self, inputs: list[str]) -> list[ChromiumReading | None]:
        """Chromium's reading of each input, ``None`` where ``new URL`` throws."""
        expression = _PARSE % json.dumps(inputs)
        readings: list[dict[str, str] | None] = json.loads(self.evaluate(expression))
        return [
            None
            if reading is None
            else ChromiumReading(
                href=reading["href"],
                scheme=reading["protocol"].removesuffix(":"),
                host=reading["hostname"],
                port=reading["port"],
                origin=reading["origin"],
                has_credentials=bool(reading["username"] or reading["password"]),
            )
            for reading in readings
        ]
