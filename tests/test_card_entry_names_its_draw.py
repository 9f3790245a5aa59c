"""A card entry names the draw it is for (issue 25): an `m CARD` typed twice, or a second
click of the screen's form, is refused for the next unreadable card instead of being taken
as its face. Through the console's public surface (submit, expect) and the terminal's parser."""

from __future__ import annotations

from table.console import Command, Console, Expectation
from table.interfaces.terminal import parse_key_line
from table.roles import Actor, Role

S1 = Actor("S-1", Role.SUPERVISOR, source="test")


def _entry(card: str, draw_index: int | None, replies: list) -> Command:
    args = {"card": card, "supervisor": "S-1"}
    if draw_index is not None:
        args["draw_index"] = draw_index
    return Command("confirm_card", args, replies.append, S1)


def _asking(console: Console, draw_index: int) -> None:
    console.expect(Expectation("confirm_card", f"a supervisor to enter unreadable card {draw_index + 1}",
                               "supervisor", ("confirm_card",), draw_index=draw_index))


def test_an_entry_for_another_draw_is_refused_and_the_right_one_taken():
    console = Console()
    console.attached = True
    _asking(console, 6)  # a released round resumes its deal: card 7 is unreadable now
    replies: list = []
    console.submit(_entry("Qs", 3, replies))  # the second tap of the entry for card 4
    assert replies and replies[0]["ok"] is False and replies[0]["code"] == "not_expected"
    assert "entered for card 4" in replies[0]["error"] and "unreadable card 7" in replies[0]["error"]
    replies.clear()
    console.submit(_entry("Kd", 6, replies))
    assert replies == []  # taken: answered by the table once it carries it out
    taken = console.wait(("confirm_card",), "a supervisor to enter unreadable card 7", role="supervisor",
                         draw_index=6)
    assert taken.args["card"] == "Kd" and taken.args["draw_index"] == 6


def test_an_entry_naming_no_draw_is_still_taken():  # the API and older clients: the draw is optional
    console = Console()
    console.attached = True
    _asking(console, 2)
    replies: list = []
    console.submit(_entry("Qs", None, replies))
    assert replies == []


def test_the_terminal_names_the_draw_counted_from_1():
    assert parse_key_line("m Qs 4", "S-1").args["draw_index"] == 3
    assert "draw_index" not in parse_key_line("m Qs", "S-1").args  # filled in from the prompt shown
