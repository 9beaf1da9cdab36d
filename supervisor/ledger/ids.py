"""Full ids from what a person typed: the whole id, or a prefix of it that names one row.

The CLI resolves every id argument this way (``supervisor proposals approve 3f9c``) and then
acts on the full id, which it prints; the SDK's own methods take full ids only, so code never
approves by a guess. A prefix shorter than :data:`MIN_PREFIX` is refused however few rows there
are: what names one proposal today would name two tomorrow in a script.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor.errors import SupervisorError
from supervisor.ledger.errors import (
    GrantNotFound,
    IdAmbiguous,
    IdPrefixTooShort,
    ProposalNotFound,
)
from supervisor.ledger.webhook_models import WebhookNotFound

if TYPE_CHECKING:
    from supervisor.store.ids import IdKind
    from supervisor.store.repository import Repository

#: The shortest prefix accepted.
MIN_PREFIX = 4
_CANDIDATES = 11  # one more than listed, to say "more than 10"


def resolve_id(repository: Repository, kind: IdKind, given: str) -> str:
    """The one id that is ``given`` or starts with it.

    Raises:
        ProposalNotFound, GrantNotFound, WebhookNotFound: None does.
        IdAmbiguous: Several do (the candidates are listed, with their tool).
        IdPrefixTooShort: ``given`` is shorter than :data:`MIN_PREFIX` and no id equals it.
    """
    with repository.read() as tx:
        found = tx.ids_starting(kind, given, _CANDIDATES) if given else []
    if len(found) == 1 and (found[0][0] == given or len(given) >= MIN_PREFIX):
        return found[0][0]
    if found and len(given) < MIN_PREFIX:
        raise IdPrefixTooShort(kind, given, MIN_PREFIX)
    if len(found) > 1:
        raise IdAmbiguous(kind, given, found)
    missing: SupervisorError
    if kind == "proposal":
        missing = ProposalNotFound(given)
    elif kind == "grant":
        missing = GrantNotFound(given)
    else:
        missing = WebhookNotFound(given)
    raise missing
