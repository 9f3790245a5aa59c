"""Frame-level helpers shared by the tests of the frame trace and of tablectl probe."""

from __future__ import annotations

from protocols.cards import BackColour, Card
from protocols.frame import encode_frame
from protocols.messages import CardDrawn, encode_message


def card_drawn_frame(card: str, draw_index: int = 4, seq: int = 9, colour: BackColour = BackColour.RED) -> bytes:
    """The bytes of a CardDrawn event frame."""
    t, p = encode_message(CardDrawn(draw_index, Card.parse(card), colour))
    return encode_frame(seq, t, p)


def recover_card(hex_text: str) -> list[str]:
    """The attack on a trace: from a CardDrawn frame's hex as shown (``??`` where masked),
    every card consistent with it, the CRC-16 included when it is shown."""
    shown = hex_text.split()
    colour = BackColour(int(shown[7], 16)) if shown[7] != "??" else BackColour.RED
    out = []
    for index in range(52):
        card = Card.from_index(index)
        wire = card_drawn_frame(str(card), int(shown[4], 16), int(shown[2], 16), colour).hex(" ").split()
        if all(s == "??" or s == w for s, w in zip(shown, wire)):
            out.append(str(card))
    return out
