"""A card entry names the draw it is for (issue 25): an `m CARD` typed twice, or a second
click of the screen's form, is refused for the next unreadable card instead of being taken
as its face. Through the console's public surface (submit, expect) and the terminal's parser."""

from __future__ import annotations

import io
import os
import threading
from contextlib import contextmanager

from table.console import Command, Console, Expectation
from table.interfaces.terminal import KeyConsole, parse_key_line
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


def _asked(console: Console):
    """A function waiting until the table has asked for unreadable card ``draw_index + 1``."""
    changed, told = threading.Condition(), []

    def tell(exp) -> None:
        with changed:
            told.append(exp)
            changed.notify_all()

    console.on_expectation(tell)

    def asked(draw_index: int) -> None:
        with changed:
            assert changed.wait_for(lambda: any(e is not None and e.draw_index == draw_index for e in told), 20)

    return asked


def test_an_entry_naming_no_draw_sent_while_the_table_asks_for_no_card_is_refused():
    """The API's double tap (a client that names no draw): the second entry arrives while
    the table is between steps, having taken the first. No card is asked for then, so it
    was meant for the card already entered; it is refused at once, never held over and
    taken for the next unreadable card."""
    console = Console()
    console.attached = True
    asked = _asked(console)
    box: list = []
    t = _wait_for_card(console, 3, box)
    replies: list = []
    first = _entry("Qs", None, replies)
    asked(3)
    console.submit(first)
    t.join(30)
    assert box == [first]
    console.submit(_entry("Qs", None, replies))  # the double tap, between steps
    assert replies and replies[0]["ok"] is False and replies[0]["code"] == "not_expected"
    assert "names no draw_index" in replies[0]["error"]
    t = _wait_for_card(console, 6, box)
    third = _entry("Kd", 6, [])
    asked(6)
    console.submit(third)
    t.join(30)
    assert box[1] is third


def test_the_terminal_names_the_draw_counted_from_1():
    assert parse_key_line("m Qs 4", "S-1").args["draw_index"] == 3
    assert "draw_index" not in parse_key_line("m Qs", "S-1").args  # filled in from the prompt shown



class _Keys:
    """A person at the terminal: lines typed into a KeyConsole (a pipe), what it prints, and
    each command it hands the table, counted as it returns (no sleep decides anything)."""

    def __init__(self, console: Console, keys_in, keys_fd: int):
        self.console, self.out, self.submitted, self.told = console, io.StringIO(), [], []
        self._w = keys_fd
        self._changed = threading.Condition()
        submit = console.submit

        def counted(cmd: Command) -> None:
            submit(cmd)
            with self._changed:
                self.submitted.append(cmd)
                self._changed.notify_all()

        console.submit = counted
        self.keys = KeyConsole(console, "S-1", keys_in, self.out)

        def told(exp) -> None:  # registered after the KeyConsole's prompt: called after it
            with self._changed:
                self.told.append(exp)
                self._changed.notify_all()

        console.on_expectation(told)

    def type(self, *lines: str) -> None:
        os.write(self._w, "".join(line + "\n" for line in lines).encode())

    def handed(self, line: str) -> Command:
        """Type ``line``; the command the terminal handed the table for it."""
        with self._changed:
            before = len(self.submitted)
            self.type(line)
            assert self._changed.wait_for(lambda: len(self.submitted) > before, 20), (line, self.out.getvalue())
            return self.submitted[before]

    def shown(self, draw_index: int) -> None:
        """Until the table's prompt for unreadable card ``draw_index + 1`` has been printed."""
        with self._changed:
            assert self._changed.wait_for(lambda: any(e is not None and e.draw_index == draw_index
                                                      for e in self.told), 20), self.out.getvalue()


@contextmanager
def _terminal(console: Console):
    read_fd, write_fd = os.pipe()
    with os.fdopen(read_fd, "r") as keys_in:
        keys = _Keys(console, keys_in, write_fd)
        try:
            yield keys
        finally:
            os.close(write_fd)  # end of input: the terminal's reader ends
            keys.keys._thread.join(10)


def _wait_for_card(console: Console, draw_index: int, box: list) -> threading.Thread:
    """The table's side: waits for unreadable card ``draw_index + 1`` in a thread."""

    def wait() -> None:
        box.append(console.wait(("confirm_card",), f"a supervisor to enter unreadable card {draw_index + 1}",
                                role="supervisor", draw_index=draw_index, timeout_s=30))

    t = threading.Thread(target=wait)
    t.start()
    return t


def test_a_line_typed_twice_at_the_terminal_is_never_the_next_unreadable_card():
    """`m Qs` typed twice for card 4: the second arrives while the table is between steps
    (it took the first and journals it), and the next thing it asks is unreadable card 7
    (a released round resumes its deal). The terminal fills in the card the person was
    shown, so the second line is refused for card 7, and card 7 is what is typed for it."""
    console = Console()
    with _terminal(console) as keys:
        box: list = []
        t = _wait_for_card(console, 3, box)
        keys.shown(3)
        first = keys.handed("m Qs")
        t.join(30)
        assert box and box[0] is first and first.args["draw_index"] == 3 and first.args["card"] == "Qs"
        first.answer(ok=True, card="Qs")
        second = keys.handed("m Qs")  # the double tap, while the table is between steps
        assert second.args.get("draw_index") == 3
        t = _wait_for_card(console, 6, box)
        keys.shown(6)
        said = keys.out.getvalue()
        assert "confirm card refused" in said and "entered for card 4" in said and "unreadable card 7" in said
        third = keys.handed("m Kd")
        t.join(30)
        assert box[1] is third and third.args == {"card": "Kd", "supervisor": "S-1", "draw_index": 6}


def test_a_card_typed_with_no_card_prompt_shown_is_refused_at_the_terminal():
    """`m Qs` typed while the terminal shows no card to enter (the last prompt asked for a
    decision) names no card the person was shown: the terminal refuses it and says how to
    name one, so it is never taken for whatever card the table asks next."""
    console = Console()
    with _terminal(console) as keys:
        console.expect(Expectation("decide", "seat 2's decision", "dealer", ("decide",), seat=2))
        keys.handed("p 2")
        keys.type("m Qs")
        named = keys.handed("m Qs 7")  # naming the card is always possible
        assert named.args["draw_index"] == 6
        assert [c.action for c in keys.submitted] == ["decide", "confirm_card"]
        assert "confirm card refused" in keys.out.getvalue() and "m Qs N" in keys.out.getvalue()
