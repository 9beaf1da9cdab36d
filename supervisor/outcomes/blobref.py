"""References to a stored blob, in the two forms the SDK writes them.

* ``sha256:<hex>``, the **pointer** form: what the model receives in an offloaded result's
  pointer and passes back to ``expand_result``/``search_result``, and what a trace event's
  ``blob_ref`` holds (the bare hex is accepted from the model too);
* ``blob:<hex>``, the **result_ref** form: what the ledger records as an execution's result.

The hex is always 64 lowercase hex digits (a SHA-256 of the content).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

POINTER_PREFIX = "sha256:"
RESULT_REF_PREFIX = "blob:"
_HEX = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True, slots=True)
class BlobRef:
    """A reference to the blob whose content hashes to ``hex``.

    Raises:
        ValueError: ``hex`` is not 64 lowercase hex digits.
    """

    hex: str

    def __post_init__(self) -> None:
        if not _HEX.match(self.hex):
            raise ValueError(f"{self.hex[:80]!r} is not a SHA-256 hex digest")

    @classmethod
    def from_pointer(cls, text: str) -> BlobRef:
        """Parse the pointer form, ``sha256:<hex>``, or the bare hex.

        Raises:
            ValueError: ``text`` is neither.
        """
        return cls(text.removeprefix(POINTER_PREFIX))

    @classmethod
    def from_result_ref(cls, text: str) -> BlobRef:
        """Parse the ledger's result_ref form, ``blob:<hex>``.

        Raises:
            ValueError: ``text`` is not in that form.
        """
        if not text.startswith(RESULT_REF_PREFIX):
            raise ValueError(f"{text[:80]!r} is not a {RESULT_REF_PREFIX}<hex> reference")
        return cls(text.removeprefix(RESULT_REF_PREFIX))

    @classmethod
    def parse(cls, text: str) -> BlobRef:
        """Parse either form, or the bare hex.

        Raises:
            ValueError: ``text`` is none of them.
        """
        if text.startswith(RESULT_REF_PREFIX):
            return cls.from_result_ref(text)
        return cls.from_pointer(text)

    @property
    def pointer(self) -> str:
        """The pointer form, ``sha256:<hex>``."""
        return POINTER_PREFIX + self.hex

    @property
    def result_ref(self) -> str:
        """The ledger's result_ref form, ``blob:<hex>``."""
        return RESULT_REF_PREFIX + self.hex

    def __str__(self) -> str:
        return self.pointer
