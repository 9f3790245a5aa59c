"""Attacks on sign-in: the lock-out after ``max_failures`` wrong PINs.

The lock-out was checked once, before a request waited for one of the two
Argon2 slots; requests sent together all passed the check before the first
failure was counted, and then each was hashed in turn. So a burst of N
guesses at once got N guesses, however small ``max_failures`` was (over HTTP,
as many as the front doors' worker pool runs at once, each time a lock-out ends).
"""

from __future__ import annotations

import threading

from table.interfaces.auth import Authenticator, PeopleFile, SignInLocked
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


def test_an_unknown_persons_pin_costs_a_known_persons_argon2_and_no_pin_matches_it(monkeypatch):
    """An unknown person id is no oracle: their PIN runs the same Argon2 computation (type,
    memory, time, lanes, digest length) as a known person's wrong PIN, and matches nothing;
    making the hasher runs no Argon2 (a table's start paid a 64 MiB hash for it)."""
    import argon2
    import argon2._password_hasher as password_hasher

    from table.interfaces.auth import PinHasher

    hashed, checked = [], []
    real_hash, real_verify = password_hasher.hash_secret, password_hasher.verify_secret
    monkeypatch.setattr(password_hasher, "hash_secret", lambda *a, **k: hashed.append(a) or real_hash(*a, **k))
    monkeypatch.setattr(password_hasher, "verify_secret",
                        lambda h, *a, **k: checked.append(h) or real_verify(h, *a, **k))
    hasher = PinHasher(argon2.PasswordHasher(time_cost=2, memory_cost=8192, parallelism=2, hash_len=24, salt_len=12))
    assert hashed == []  # nothing hashed to make it
    known = hasher.hash("739201")
    for pin in ("739201", "000000", "", "x" * 64):
        assert hasher.verify(None, pin) is False
    assert hasher.verify(known, "739202") is False and hasher.verify(known, "739201") is True
    params = [argon2.extract_parameters(h.decode() if isinstance(h, bytes) else h) for h in checked]
    assert len(params) == 6 and all(p == argon2.extract_parameters(known) for p in params), params
