"""One row of the bad-input table, and what running it gets."""
from __future__ import annotations

import dataclasses
from typing import Callable


@dataclasses.dataclass(frozen=True)
class BadInput:
    call: str                   # what is called, as a reader would write it
    run: Callable[[], object]
    raises: type | None         # None: the call has a correct result, and ``run`` returns its description
    names: str                  # text the message (or the result's description) must contain
    defect: str = ""            # an open defect: what it gets now falls short of ``raises`` / ``names``


def outcome(row: BadInput) -> tuple[type | None, str]:
    """(exception type, first line of its message), or (None, the description ``run`` returned)."""
    try:
        result = row.run()
    except Exception as e:  # the table records whatever comes out
        return type(e), (str(e).splitlines() or [""])[0]
    return None, result if isinstance(result, str) else ""
