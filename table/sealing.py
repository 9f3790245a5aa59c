"""What may be seen of a round, and when (58 Pa. Code 816a.1).

Nobody may see an outcome before the wager it decides is final: a seat's
cards go to that seat alone until every seat has decided, the dealer's hand
to nobody until then. Free text that may name a card (a hold reason, an
incident, a custody detail) is masked before it leaves the journal.
"""

from __future__ import annotations

import re
from typing import Any

#: A card face as written in free text: rank then suit, e.g. ``Qs``, ``Td``.
CARD_FACE = re.compile(r"\b[2-9TJQKA][cdhs]\b")


def mask_cards(text: Any) -> str:
    """``text`` with every card face replaced by ``??`` (None and "" give ""): what a log
    line, an event or an error message may say about a round whose hands are
    still sealed (816a.1). The journal keeps the text whole."""
    return CARD_FACE.sub("??", str(text or ""))
