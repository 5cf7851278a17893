"""Near misses: the one lookup behind every "did you mean" (unknown fields, names,
functions, keys, tools, rules, files).

In ``expr`` because it is the lowest layer: the loader, the checkers, lint, the test
runner and the CLI all import it, and each words its own hint.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["closest"]


def closest(name: str, known: Iterable[str], *, cutoff: float = 0.6) -> str | None:
    """The known name ``name`` most likely misspells, or None.

    ``name`` itself when known; else the one equal to it but for case, ``_`` and ``-``
    (``Amount`` for ``amount``, ``sendEmail`` for ``send_email``: a slip no similarity
    ratio weighs fairly in a short name); else difflib's closest spelling at or above
    ``cutoff`` (0.6 for a hint beside an error; 0.8 where a near miss is itself reported,
    as for a case's tool, so that only a real typo is).
    """
    names = list(known)
    if name in names:
        return name
    folded = {_fold(k): k for k in names}
    found = folded.get(_fold(name))
    if found is not None:
        return found
    close = difflib.get_close_matches(name, names, n=1, cutoff=cutoff)
    return close[0] if close else None


def _fold(name: str) -> str:
    return name.lower().replace("_", "").replace("-", "")
