"""Deck custody: where each of the table's two decks is, and the rules on moving them.

Each deck is a ``transitions`` state machine (states and transitions declared
as data, ``auto_transitions=False``); :class:`DeckCustody` holds the two and
enforces the table-level rules across them. A broken rule raises a
:class:`CustodyViolation` naming the rule and its source, and is recorded.

Rules enforced, with their sources:

* two decks with backs of different colours, used alternately every round,
  one shuffled in the shuffler while the other is in play
  (58 Pa. Code 649a.3(b); California TCP standards of play);
* a deck is dealt only after the shuffler has verified it: 52 distinct cards
  of its own back colour, no duplicates, no foreign card; a deck whose count
  is wrong is removed from the table (COMAR 36.05.03.27 C);
* only one deck's cards in the discard rack at any time (California TCP
  standards of play);
* every card read carries the back colour of the deck in play; a card of
  another back colour is a foreign card and holds the round;
* one deck of each colour on the table: a deck counted in the shuffler while
  the shoe holds cards of its colour (the deck in play, a stub, a deck loaded
  behind the table's back) is a second deck of one colour, and the table is
  held for a supervisor (58 Pa. Code 649a.3(b); COMAR 36.05.03.27 C).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Iterable

from transitions import Machine, MachineError

from protocols.cards import BackColour, Card
from protocols.messages import DeckVerified


class DeckPlace(str, enum.Enum):
    """The places a deck can be (the deck machine's states)."""

    OFF_TABLE = "off_table"
    IN_SHUFFLER = "in_shuffler"
    SHUFFLING = "shuffling"
    VERIFIED = "verified"
    DELIVERED = "delivered"
    IN_SHOE = "in_shoe"
    IN_PLAY = "in_play"
    IN_DISCARD_RACK = "in_discard_rack"
    OUT_OF_SERVICE = "out_of_service"


P = DeckPlace
DECK_STATES = [p.value for p in DeckPlace]
DECK_TRANSITIONS = [
    {"trigger": "insert", "source": [P.OFF_TABLE.value, P.IN_DISCARD_RACK.value], "dest": P.IN_SHUFFLER.value},
    {"trigger": "start_shuffle", "source": P.IN_SHUFFLER.value, "dest": P.SHUFFLING.value},
    {"trigger": "shuffle_fault", "source": P.SHUFFLING.value, "dest": P.IN_SHUFFLER.value},
    {"trigger": "pass_verification", "source": P.SHUFFLING.value, "dest": P.VERIFIED.value},
    {"trigger": "fail_verification", "source": P.SHUFFLING.value, "dest": P.OUT_OF_SERVICE.value},
    {"trigger": "deliver", "source": P.VERIFIED.value, "dest": P.DELIVERED.value},
    {"trigger": "load_shoe", "source": P.DELIVERED.value, "dest": P.IN_SHOE.value},
    {"trigger": "deal", "source": P.IN_SHOE.value, "dest": P.IN_PLAY.value},
    {"trigger": "collect", "source": [P.IN_SHOE.value, P.IN_PLAY.value], "dest": P.IN_DISCARD_RACK.value},
    {"trigger": "remove", "source": "*", "dest": P.OUT_OF_SERVICE.value},
    # A deck step out of order between rounds (a dealer's slip): the deck's custody is no longer
    # known, so it goes off the table and round again through the shuffler, counted before dealt.
    {"trigger": "recount", "source": [P.IN_SHUFFLER.value, P.VERIFIED.value, P.DELIVERED.value, P.IN_SHOE.value,
                                      P.IN_DISCARD_RACK.value, P.OFF_TABLE.value], "dest": P.OFF_TABLE.value},
]


class Rule(str, enum.Enum):
    """Named custody rules; the value is the violation's code in logs and JSON."""

    SAME_BACK_COLOUR = "same_back_colour"
    UNKNOWN_BACK_COLOUR = "unknown_back_colour"
    DECK_NOT_VERIFIED = "deck_not_verified"
    DECK_INCOMPLETE = "deck_incomplete"
    DEAL_NOT_THE_SHUFFLE = "deal_not_the_shuffle"
    DECKS_NOT_ALTERNATING = "decks_not_alternating"
    SHOE_LOADED_WITH_DECK_JUST_PLAYED = "shoe_loaded_with_deck_just_played"
    OTHER_DECK_NOT_VERIFIED = "other_deck_not_verified"
    TWO_DECKS_IN_DISCARD_RACK = "two_decks_in_discard_rack"
    FOREIGN_CARD = "foreign_card"
    DUPLICATE_CARD = "duplicate_card"
    NO_DECK_IN_PLAY = "no_deck_in_play"
    CARD_DRAWN_EARLY = "card_drawn_before_bets_closed"
    WRONG_CARD_COUNT = "wrong_card_count"
    CARD_UNACCOUNTED = "card_unaccounted"
    EVENT_FROM_WRONG_DEVICE = "event_from_wrong_device"
    OUT_OF_ORDER = "out_of_order"
    SECOND_DECK = "second_deck_of_one_colour"


CITATIONS = {
    Rule.SAME_BACK_COLOUR: "58 Pa. Code 649a.3(b); CA TCP standards of play (two decks, different back colours)",
    Rule.UNKNOWN_BACK_COLOUR: "58 Pa. Code 649a.3(b) (only the table's two decks)",
    Rule.DECK_NOT_VERIFIED: "58 Pa. Code 649a.3(b) (deck shuffled in the device before play)",
    Rule.DECK_INCOMPLETE: "COMAR 36.05.03.27 C (a deck with a wrong count is removed)",
    Rule.DEAL_NOT_THE_SHUFFLE: "58 Pa. Code 649a.3(b) (the deck shuffled and verified in the device is the deck "
                               "dealt); 816a.1 (results verified before they are posted); protocols/SPEC.md 4.2.1",
    Rule.DECKS_NOT_ALTERNATING: "58 Pa. Code 649a.3(b) (decks alternate every round)",
    Rule.SHOE_LOADED_WITH_DECK_JUST_PLAYED: "58 Pa. Code 649a.3(b) (decks alternate every round)",
    Rule.OTHER_DECK_NOT_VERIFIED: "58 Pa. Code 649a.3(b) (one deck shuffled while the other is in play)",
    Rule.TWO_DECKS_IN_DISCARD_RACK: "CA TCP standards of play (one deck in the discard rack)",
    Rule.FOREIGN_CARD: "58 Pa. Code 649a.3(b) (only the deck in play is dealt)",
    Rule.DUPLICATE_CARD: "58 Pa. Code 649a.3 (one 52-card deck per round)",
    Rule.NO_DECK_IN_PLAY: "58 Pa. Code 649a.3(b) (one deck in play per round)",
    Rule.CARD_DRAWN_EARLY: "58 Pa. Code 649a.11 (cards dealt after wagers are placed): incident",
    Rule.WRONG_CARD_COUNT: "58 Pa. Code 649a.11 (three cards to each player and the dealer): misdeal",
    Rule.CARD_UNACCOUNTED: "58 Pa. Code 649a.3 (one 52-card deck in play: every card accounted for); 816a.1 "
                           "(results verified before they are posted)",
    Rule.EVENT_FROM_WRONG_DEVICE: "protocols/SPEC.md 4.5 (events by device kind): a shuffler deals no card, "
                                  "a shoe verifies no deck",
    Rule.OUT_OF_ORDER: "58 Pa. Code 649a.3(b) (deck custody procedure: docs/deck-custody.md)",
    Rule.SECOND_DECK: "58 Pa. Code 649a.3(b) (the table's two decks, of different back colours); COMAR 36.05.03.27 C "
                      "(a deck is dealt only as the shuffler counted it)",
}


class CustodyViolation(Exception):
    """A custody rule was broken. ``rule`` is the :class:`Rule`, ``citation`` its source."""

    def __init__(self, rule: Rule, detail: str) -> None:
        self.rule = rule
        self.detail = detail
        self.citation = CITATIONS[rule]
        super().__init__(f"{rule.value}: {detail} [{self.citation}]")


def commitment_from_hex(text: object) -> bytes:
    """A journaled shuffle commitment (hex, SPEC §4.2.1: a ``DeckVerified``'s or a custody
    snapshot's) as bytes; ``b""`` for none, or for text that does not read as 32 bytes
    (a journal from before protocol 1.1, a damaged field: the deck then has none)."""
    try:
        raw = bytes.fromhex(str(text or ""))
    except ValueError:
        return b""
    return raw if len(raw) == 32 else b""


@dataclass(eq=False)
class Deck:
    """One deck on the table: id, back colour, place (``state``), and ``cards_read``:
    the cards the shoe read from it since it was loaded (a round's deal, and any
    card that left the shoe before the round began: a card of the deck all the
    same, so the deal reading it again is a duplicate). ``commitment``: the shuffler's
    commitment to the order of its last verification (32 bytes; ``b""`` for none,
    SPEC §4.2.1), checked before the round dealt from it is settled."""

    deck_id: str
    back_colour: BackColour
    state: str = P.OFF_TABLE.value
    cards_read: set[int] = field(default_factory=set)
    commitment: bytes = b""

    @property
    def place(self) -> DeckPlace:
        return DeckPlace(self.state)


class DeckCustody:
    """The table's two decks and the rules across them.

    ``decks``: two ``(deck_id, back_colour)`` pairs. Each ``on_*`` method is fed
    one device event (or dealer confirmation) by one thread, in arrival order,
    and raises :class:`CustodyViolation` when the event breaks a rule.
    """

    def __init__(self, decks: Iterable[tuple[str, BackColour]]) -> None:
        pairs = [(d, BackColour.parse(c)) for d, c in decks]
        if len(pairs) != 2:
            raise ValueError(f"a table registers exactly two decks, got {len(pairs)}")
        if pairs[0][1] == pairs[1][1]:
            raise CustodyViolation(Rule.SAME_BACK_COLOUR, f"both decks have {pairs[0][1]} backs")
        if BackColour.NONE in (pairs[0][1], pairs[1][1]):
            raise ValueError("a deck needs a real back colour")
        self.decks = {c: Deck(d, c) for d, c in pairs}
        self.machines = {
            c: Machine(
                model=deck,
                states=DECK_STATES,
                transitions=DECK_TRANSITIONS,
                initial=P.OFF_TABLE.value,
                auto_transitions=False,
                queued=True,
                name=deck.deck_id,
            )
            for c, deck in self.decks.items()
        }
        self.last_played: Deck | None = None
        self.in_play: Deck | None = None
        self.violations: list[CustodyViolation] = []

    # -- helpers ------------------------------------------------------------------

    def _violation(self, rule: Rule, detail: str) -> CustodyViolation:
        v = CustodyViolation(rule, detail)
        self.violations.append(v)
        return v

    def deck(self, colour: BackColour | None) -> Deck:
        """The deck with ``colour`` backs; a colour not on this table (None: a journaled
        entry naming none, :func:`table.recovery.apply`) is a violation."""
        deck = self.decks.get(colour) if colour is not None else None
        if deck is None:
            raise self._violation(Rule.UNKNOWN_BACK_COLOUR, f"no deck with {colour} backs on this table")
        return deck

    def other(self, deck: Deck) -> Deck:
        return next(d for d in self.decks.values() if d is not deck)

    def _move(self, deck: Deck, trigger: str, rule: Rule = Rule.OUT_OF_ORDER) -> None:
        was = deck.state
        try:
            getattr(deck, trigger)()
        except MachineError:
            raise self._violation(rule, f"deck {deck.deck_id} ({deck.back_colour}) cannot {trigger} from {was}") from None

    def places(self) -> dict[str, str]:
        """Deck id → place, for logs and the journal."""
        return {d.deck_id: d.state for d in self.decks.values()}

    def snapshot(self) -> dict:
        """Everything needed to restore custody after a restart (a journal entry body)."""
        return {
            "decks": [
                {"deck_id": d.deck_id, "back_colour": str(d.back_colour), "place": d.state,
                 "cards_read": sorted(d.cards_read), **({"commitment": d.commitment.hex()} if d.commitment else {})}
                for d in self.decks.values()
            ],
            "last_played": self.last_played.deck_id if self.last_played else None,
            "in_play": self.in_play.deck_id if self.in_play else None,
        }

    @classmethod
    def restore(cls, snap: dict) -> "DeckCustody":
        """Rebuild custody from a :meth:`snapshot` (journal replay on restart)."""
        decks = snap["decks"]
        custody = cls([(d["deck_id"], BackColour.parse(d["back_colour"])) for d in decks])
        by_id = {}
        for d in decks:
            deck = custody.decks[BackColour.parse(d["back_colour"])]
            custody.machines[deck.back_colour].set_state(d["place"], model=deck)
            deck.cards_read = set(d["cards_read"])
            deck.commitment = commitment_from_hex(d.get("commitment"))
            by_id[deck.deck_id] = deck
        custody.last_played = by_id.get(snap.get("last_played"))
        custody.in_play = by_id.get(snap.get("in_play"))
        return custody

    def replace_deck(self, colour: BackColour, deck_id: str) -> Deck:
        """Register a replacement for the out-of-service deck with ``colour`` backs
        (a supervisor's action). The new deck starts off the table."""
        old = self.deck(colour)
        if old.place is not P.OUT_OF_SERVICE:
            raise self._violation(Rule.OUT_OF_ORDER, f"deck {old.deck_id} is {old.state}, not out of service")
        if any(d.deck_id == deck_id for d in self.decks.values()):
            raise ValueError(f"deck id {deck_id!r} is already in use")
        new = Deck(deck_id, colour)
        self.decks[colour] = new
        self.machines[colour] = Machine(model=new, states=DECK_STATES, transitions=DECK_TRANSITIONS,
                                        initial=P.OFF_TABLE.value, auto_transitions=False, queued=True, name=deck_id)
        if self.last_played is old:
            self.last_played = None
        return new

    # -- events -------------------------------------------------------------------

    def on_deck_inserted(self, colour: BackColour) -> Deck:
        """The shuffler reports a deck put in."""
        deck = self.deck(colour)
        if deck is self.in_play:
            raise self._violation(Rule.OUT_OF_ORDER, f"deck {deck.deck_id} is in play and cannot enter the shuffler")
        self._move(deck, "insert")
        return deck

    def second_deck(self, colour: BackColour, where: str) -> CustodyViolation:
        """The violation (recorded, returned for the caller to raise) of a deck of ``colour``
        counted in the shuffler while cards of ``colour`` are also ``where`` (the shoe's
        own word): two decks of one colour on the table, or a deck and cards of a third;
        the table is held for a supervisor (58 Pa. Code 649a.3(b); COMAR 36.05.03.27 C).
        ``colour`` must be one of the table's two (else :data:`Rule.UNKNOWN_BACK_COLOUR`)."""
        deck = self.deck(colour)
        return self._violation(Rule.SECOND_DECK, f"a {colour} deck is in the shuffler while {where} also holds "
                                                 f"{colour} cards: a second {colour} deck on the table (deck "
                                                 f"{deck.deck_id} is the only {colour} deck registered)")

    def on_shuffle_started(self, colour: BackColour) -> None:
        """The host told the shuffler to shuffle the deck it holds."""
        self._move(self.deck(colour), "start_shuffle")

    def on_shuffle_fault(self, colour: BackColour) -> None:
        """The shuffler stopped (jam, door open): the deck stays in it, unverified."""
        self._move(self.deck(colour), "shuffle_fault")

    def on_deck_verified(self, event: DeckVerified) -> Deck:
        """The shuffler counted the deck. Anything but 52 distinct cards of the
        deck's own colour takes the deck out of service (COMAR 36.05.03.27 C)."""
        deck = self.deck(event.back_colour)
        deck.commitment = event.commitment if event.complete else b""  # SPEC §4.2.1: this shuffle's order
        if not event.complete:
            self._move(deck, "fail_verification")
            detail = (
                f"deck {deck.deck_id} ({deck.back_colour}) counted {event.card_count} cards, "
                f"{len(event.present)} distinct, {len(event.duplicates)} duplicated, "
                f"{event.foreign_count} foreign; missing {sorted(str(Card.from_index(i)) for i in event.missing)}"
            )
            raise self._violation(Rule.DECK_INCOMPLETE, detail)
        self._move(deck, "pass_verification", Rule.OUT_OF_ORDER)
        return deck

    def on_deck_delivered(self, colour: BackColour) -> Deck:
        """The dealer took the verified deck out of the shuffler. A deck out of service
        taken out is just that: it stays out of service (off the table) until a
        supervisor registers its replacement."""
        deck = self.deck(colour)
        if deck.place is P.OUT_OF_SERVICE:
            return deck
        self._move(deck, "deliver", Rule.DECK_NOT_VERIFIED)
        return deck

    def on_shoe_loaded(self, colour: BackColour) -> Deck:
        """The shoe reports a deck loaded. It must be the verified deck just
        delivered, and not the deck played last round (649a.3(b))."""
        deck = self.deck(colour)
        if deck is self.last_played:
            raise self._violation(
                Rule.SHOE_LOADED_WITH_DECK_JUST_PLAYED, f"deck {deck.deck_id} ({colour}) was played last round"
            )
        if deck.place is not P.DELIVERED:
            raise self._violation(
                Rule.DECK_NOT_VERIFIED, f"deck {deck.deck_id} ({colour}) loaded from {deck.state}, not from the shuffler verified"
            )
        self._move(deck, "load_shoe", Rule.DECK_NOT_VERIFIED)
        deck.cards_read = set()  # a verified deck: nothing read from it yet
        return deck

    def start_round(self) -> Deck:
        """Begin a round with the deck in the shoe. The decks alternate every round
        and the other deck must already be verified in the shuffler (649a.3(b))."""
        shoe = [d for d in self.decks.values() if d.place is P.IN_SHOE]
        if not shoe:
            raise self._violation(Rule.NO_DECK_IN_PLAY, "no verified deck is loaded in the shoe")
        deck = shoe[0]
        if deck is self.last_played:
            raise self._violation(Rule.DECKS_NOT_ALTERNATING, f"deck {deck.deck_id} ({deck.back_colour}) was played last round")
        other = self.other(deck)
        if other.place is not P.VERIFIED:
            raise self._violation(
                Rule.OTHER_DECK_NOT_VERIFIED, f"deck {other.deck_id} ({other.back_colour}) is {other.state}, not verified"
            )
        # cards_read is kept, not cleared: it was emptied when the deck was loaded, and a
        # card drawn from it since (with no round in progress) is out of the deck already.
        self.in_play = deck
        return deck

    def on_card_read(self, card: Card, colour: BackColour) -> Deck:
        """The shoe read a card. Its back colour must be the deck in play's; a card
        of another colour is a foreign card; a card read twice is a duplicate."""
        deck = self.in_play
        if deck is None:
            raise self._violation(Rule.NO_DECK_IN_PLAY, f"card {card} read with no round in progress")
        if colour != deck.back_colour:
            raise self._violation(
                Rule.FOREIGN_CARD, f"{card} has {colour} backs; the deck in play ({deck.deck_id}) has {deck.back_colour}"
            )
        if card.index in deck.cards_read:
            raise self._violation(Rule.DUPLICATE_CARD, f"{card} read twice from deck {deck.deck_id}")
        if deck.place is P.IN_SHOE:
            self._move(deck, "deal")
        deck.cards_read.add(card.index)
        return deck

    def on_card_read_between_rounds(self, card: Card, colour: BackColour) -> Deck | None:
        """The shoe read a card with no round in progress (drawn early, or by mistake).
        It is dealt to nobody, but it left the deck in the shoe if it has that deck's
        back colour: the deck's next round reading it again is a duplicate (every
        card accounted for). A card of another colour touches no deck's record
        (None); read twice, it is a duplicate here too."""
        deck = next((d for d in self.decks.values() if d.place is P.IN_SHOE and d.back_colour == colour), None)
        if deck is None:
            return None
        if card.index in deck.cards_read:
            raise self._violation(Rule.DUPLICATE_CARD, f"{card} read twice from deck {deck.deck_id}")
        deck.cards_read.add(card.index)
        return deck

    def collect(self) -> Deck:
        """The dealer collects the round's cards (and the stub) into the discard rack.
        Refused while another deck's cards are still there (one deck in the rack)."""
        deck = self.in_play
        if deck is None:
            raise self._violation(Rule.NO_DECK_IN_PLAY, "nothing to collect: no round in progress")
        other = self.other(deck)
        if other.place is P.IN_DISCARD_RACK:
            raise self._violation(
                Rule.TWO_DECKS_IN_DISCARD_RACK,
                f"deck {other.deck_id} ({other.back_colour}) is still in the discard rack; load it into the shuffler first",
            )
        self._move(deck, "collect")
        self.last_played, self.in_play = deck, None
        return deck

    def recount(self) -> list[Deck]:
        """After a deck step out of order between rounds (a dealer's slip: a deck put back
        into the shuffler, the shoe loaded again): every deck that is not in play, being
        shuffled or out of service goes off the table, to be counted again in the shuffler
        before it is dealt (the table finds where each one is from the devices, as after a
        restart without the journal), and which deck was played last is forgotten, as the
        counts start over (58 Pa. Code 649a.3(b): a deck is shuffled and checked in the
        device before play). Returns the decks sent round again."""
        moved = []
        for deck in self.decks.values():
            if deck.place in (P.IN_PLAY, P.SHUFFLING, P.OUT_OF_SERVICE):
                continue
            self._move(deck, "recount")
            deck.commitment = b""  # counted again: its next count commits anew (SPEC §4.2.1)
            moved.append(deck)
        self.last_played = None
        return moved

    def take_out_of_service(self, colour: BackColour) -> Deck:
        """Remove a deck from the table (supervisor action)."""
        deck = self.deck(colour)
        self._move(deck, "remove")
        if self.in_play is deck:
            self.in_play = None
        return deck
