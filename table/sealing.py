"""What may be seen of a round, and when (58 Pa. Code 816a.1).

Nobody may see an outcome before the wager it decides is final: a seat's
cards go to that seat alone until every seat has decided, the dealer's hand
to nobody until then. Free text that may name a card (a hold reason, an
incident, a custody detail) is masked before it leaves the journal.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from typing import Any

#: A card face as written in free text: rank then suit, e.g. ``Qs``, ``Td``.
CARD_FACE = re.compile(r"\b[2-9TJQKA][cdhs]\b")


def mask_cards(text: Any) -> str:
    """``text`` with every card face replaced by ``??`` (None and "" give ""): what a log
    line, an event or an error message may say about a round whose hands are
    still sealed (816a.1). The journal keeps the text whole."""
    return CARD_FACE.sub("??", str(text or ""))


#: the domain tag that opens every card commitment's preimage
COMMITMENT_TAG = "threecard-card-commitment/1"


def commitment(table_id: str, round_id: str | None, draw_index: int, card: str, nonce: str) -> str:
    """The commitment to one dealt card, published with ``card_dealt`` before anyone may
    see it: SHA-256 (hex) over the canonical JSON array ``[COMMITMENT_TAG, table_id,
    round_id, draw_index, card, nonce]`` (no spaces, ``nonce`` 32 hex digits, 128 bits
    fresh per card: the journal derives it from the card's fresh seal nonce and the
    round's seal key, :func:`table.journal.commit_nonce`). The reveal (or void) publishes ``card`` and
    ``nonce``: anyone can recompute this and check the card was not changed after
    the decisions it decided ("commit-reveal"; docs/integration.md)."""
    preimage = json.dumps([COMMITMENT_TAG, table_id, round_id, draw_index, card, nonce],
                          separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(preimage.encode("utf-8")).hexdigest()


def fresh_nonce() -> str:
    """A fresh 128-bit nonce (32 hex digits) from the operating system's CSPRNG."""
    return secrets.token_hex(16)
