"""Attacks on sign-in: the lock-out after ``max_failures`` wrong PINs; an unknown person's
PIN costs what a known person's does.

The lock-out was checked once, before a request waited for one of the two
Argon2 slots; requests sent together all passed the check before the first
failure was counted, and then each was hashed in turn. So a burst of N
guesses at once got N guesses, however small ``max_failures`` was (over HTTP,
as many as the front doors' worker pool runs at once, each time a lock-out ends).
"""

from __future__ import annotations

import threading

import argon2

from table.interfaces.auth import Authenticator, PeopleFile, PinHasher, SignInLocked
from table.roles import Role

from console_helpers import CHEAP, wait_until


class _Gate:
    """Stands for the hashing slots: holds every request that reached them until the
    test opens it, so all the guesses of a burst are in flight at once."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.waiting = 0
        self.lock = threading.Lock()

    def acquire(self, timeout: float | None = None) -> bool:
        with self.lock:
            self.waiting += 1
        return self.opened.wait(timeout)

    def release(self) -> None:
        pass


def test_a_burst_of_guesses_gets_no_more_than_max_failures(tmp_path):
    PeopleFile(tmp_path / "people.toml").add("S-17", Role.SUPERVISOR, "739201", hasher=CHEAP)
    auth = Authenticator(tmp_path / "people.toml", hasher=CHEAP, max_failures=3, lockout_s=60)
    gate = auth._hashing = _Gate()
    hashed = []
    verify = auth.hasher.verify
    auth.hasher.verify = lambda encoded, pin: hashed.append(pin) or verify(encoded, pin)
    outcomes: list[str] = []

    def guess(pin: str) -> None:
        try:
            auth.sign_in("S-17", pin, address="10.0.0.9")
            outcomes.append("in")
        except SignInLocked:
            outcomes.append("locked")
        except PermissionError:
            outcomes.append("wrong")

    burst = [threading.Thread(target=guess, args=(f"{100000 + i}",)) for i in range(10)]
    for t in burst:
        t.start()
    # every guess is either held at the hashing slots or already answered
    wait_until(lambda: gate.waiting + len(outcomes) == len(burst), 10, "the burst to reach the hashing slots")
    gate.opened.set()
    for t in burst:
        t.join(10)
    assert len(hashed) <= 3, f"{len(hashed)} PINs tried in one burst; max_failures is 3 ({outcomes})"
    assert outcomes.count("locked") >= 7


class _Recording(argon2.PasswordHasher):
    """The test's Argon2 hasher (cheap parameters): records each hash made and the
    parameters of each hash a PIN is checked against."""

    def __init__(self) -> None:
        super().__init__(time_cost=1, memory_cost=8192, parallelism=1)
        self.made = 0
        self.checked: list[argon2.Parameters] = []

    def hash(self, password, *, salt=None):
        self.made += 1
        return super().hash(password, salt=salt)

    def verify(self, hash, password):
        self.checked.append(argon2.extract_parameters(hash))
        return super().verify(hash, password)


def test_an_unknown_person_costs_one_argon2_check_at_the_hashers_parameters_and_starting_costs_none():
    """A PIN for nobody is checked at the cost a known person's is (no timing tells who
    exists), and a table starts without an Argon2 run (it made one per sign-in check at start)."""
    recording = _Recording()
    pins = PinHasher(recording)
    assert recording.made == 0
    known = pins.hash("493817")
    assert not pins.verify(None, "493817")
    assert not pins.verify(known, "111293")
    assert pins.verify(known, "493817")
    params = argon2.extract_parameters(known)
    assert recording.checked == [params, params, params]
