"""The bench the browser tests (and bench/web.py) drive: a real-table controller (`tablectl run`
with --web) against standalone emulators (`tablectl emulate ... --tcp --control`), people who
may sign in, and the dealer's hands on the emulators' control ports; real Chromium through
Playwright, with each page's WebSocket traffic recorded and a screenshot of its final page."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlparse

import argon2

from table.interfaces.auth import PeopleFile, PinHasher
from table.keys import generate, save
from table.roles import Role

#: the [link] timings of a bench whose devices are unplugged by a test: a link that goes
#: away is given up on (the round held) after RECONNECT_WAIT_S
RECONNECT_WAIT_S = 2.0
FAST_LINK = (f"[link]\nreconnect_wait_s = {RECONNECT_WAIT_S}\nheartbeat_interval_ms = 200\nheartbeat_timeout_ms = 200\n"
             "heartbeat_misses = 2\nreconnect_initial_ms = 50\nreconnect_max_ms = 200\n")
#: cheap hashes for tests: verifying one costs milliseconds (the parameters are in the hash)
CHEAP = PinHasher(argon2.PasswordHasher(time_cost=1, memory_cost=8192, parallelism=1))
PEOPLE = {"D-4": (Role.DEALER, "482913"), "S-17": (Role.SUPERVISOR, "739201"), "S-18": (Role.SUPERVISOR, "615048"),
          "P-2": (Role.PIT, "550917"), "A-1": (Role.AUDITOR, "771204"), "D-7": (Role.DEALER, "208461")}
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
CARD_RE = re.compile(r"(?<![0-9A-Za-z])(?:10|[2-9TJQKA])[shdc](?![0-9A-Za-z])")


def chromium_path() -> str | None:
    """Debian's chromium (``.ci/run`` installs it), or None when truly absent."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return "/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None


def tablectl() -> list[str]:
    exe = shutil.which("tablectl", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-c", "from table.cli import main; main()"]


def free_port() -> int:
    """A port free now (another process may take it before it is bound: prefer port 0 and
    the listener's own word, as :class:`BenchTable` does)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(check: Callable[[], Any], timeout_s: float, what: str, step_s: float = 0.05) -> Any:
    """``check()``'s first truthy value within ``timeout_s`` (a deadline, never a fixed sleep)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(step_s)


def enter_sign_in(page: Any, person: str, pin: str) -> None:
    """On the table's sign-in page (``index.html``): waits until its script listens (the button
    enabled; before, Enter does nothing), types ``person`` and ``pin`` and presses Enter, as a
    person does without a pointer."""
    page.wait_for_selector("#sign-in-button:not([disabled])")
    page.fill("#person", person)
    page.fill("#pin", pin)
    page.keyboard.press("Enter")


def at_page(path: str) -> Callable[[str], bool]:
    """A ``page.wait_for_url`` predicate: the address's path is ``path`` (a glob such as
    ``**/shift.html`` also matches the sign-in page's ``/?next=/shift.html``)."""
    return lambda url: urlparse(url).path == path


def make_people(path: Path) -> Path:
    people = PeopleFile(path)
    for person, (role, pin) in PEOPLE.items():
        people.add(person, role, pin, hasher=CHEAP)
    return path



def kill(proc: subprocess.Popen) -> None:
    """SIGKILL, and reap it."""
    proc.kill()
    proc.wait(10)


def stop(proc: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM, ``grace_s`` to stop, then SIGKILL."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def listening_url(lines: Any) -> str | None:
    """The URL of the first ``web_listening`` record among ``lines`` (a child's JSON log
    lines, str or bytes; other lines are skipped), or None. The table logs it once its web
    front door listens, with the port it bound: with ``--web HOST:0`` the port it picked
    itself, so no other process can have taken it first (table/interfaces/web.py)."""
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("event") == "web_listening":
            return entry["url"]
    return None


def web_url_in_log(proc: subprocess.Popen, log: Path, start_at: int = 0) -> str | None:
    """The URL of the ``web_listening`` line ``proc`` wrote to its JSON log file ``log``
    (from byte ``start_at`` on: this run's part of a log a restart appends to), or None
    while it has not. Raises ``AssertionError`` (with the log's end) once ``proc`` exited."""
    if proc.poll() is not None:
        raise AssertionError(f"tablectl run exited {proc.returncode}: {log.read_text(errors='replace')[-3000:]}")
    try:
        with open(log, "rb") as f:
            f.seek(start_at)
            return listening_url(f.read().splitlines())
    except FileNotFoundError:  # a --log-file the child has not opened yet
        return None


class ChildOutput:
    """One pipe of a child process (its stdout or stderr), read line by line by a thread of
    its own as the child writes it, so a test waits on what the child said (a condition
    wakes it at each line) instead of polling a file under a sleep.

    Each line is kept and copied to ``copy_to`` (for a person reading the bench later);
    with ``logs_to``, a line that is a JSON log record (an object with an ``event``) goes
    to that file and to :attr:`records` instead, so the text a person would read (prompts,
    round lines) stays apart from the logs. Reading goes on until the child closes the
    pipe (it exited), so a chatty child never blocks on a full pipe; :meth:`close` (after
    the child is stopped) waits for the reader to end."""

    def __init__(self, pipe: Any, copy_to: Path, logs_to: Path | None = None, *, name: str = "child-output") -> None:
        self._pipe = pipe
        self._copy_to, self._logs_to = copy_to, logs_to
        self._cond = threading.Condition()
        self._text: list[str] = []
        self.records: list[str] = []  # the JSON log lines (with ``logs_to``)
        self.ended = False
        self._thread = threading.Thread(target=self._read, name=name, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        out = open(self._copy_to, "ab")
        logs = open(self._logs_to, "ab") if self._logs_to is not None else None
        try:
            for raw in iter(self._pipe.readline, b""):
                line = raw.decode("utf-8", "replace")
                record = logs is not None and line.startswith("{") and '"event"' in line
                (logs if record else out).write(raw)
                (logs if record else out).flush()
                with self._cond:
                    (self.records if record else self._text).append(line)
                    self._cond.notify_all()
        finally:
            out.close()
            if logs is not None:
                logs.close()
            with self._cond:
                self.ended = True
                self._cond.notify_all()

    def text(self) -> str:
        """Everything read so far (but the log records, with ``logs_to``)."""
        with self._cond:
            return "".join(self._text)

    def wait(self, check: Callable[["ChildOutput"], Any], timeout_s: float, what: str) -> Any:
        """``check(self)``'s first value other than None, tried at each line the child writes,
        within ``timeout_s``. Raises ``AssertionError`` naming ``what`` (with the output's end)
        on the deadline, or once the child closed the pipe (exited) without it."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                value = check(self)
                if value is not None:
                    return value
                left = deadline - time.monotonic()
                if self.ended or left <= 0:
                    said = ("".join(self._text) + "".join(self.records[-20:]))[-3000:]
                    why = "the child closed its output (exited)" if self.ended else f"timed out after {timeout_s:g} s"
                    raise AssertionError(f"{why} waiting for {what}:\n{said}")
                self._cond.wait(left)

    def web_url(self, timeout_s: float = 60.0) -> str:
        """The URL of the child's ``web_listening`` log record (see :func:`listening_url`)."""
        return self.wait(lambda o: listening_url(o.records or o._text), timeout_s, "the table's web front door")

    def close(self, timeout_s: float = 30.0) -> None:
        """Wait for the reader to reach the pipe's end (the child exited), then close the pipe."""
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise AssertionError(f"{self._thread.name}: the pipe stayed open {timeout_s:g} s after the child stopped")
        self._pipe.close()


class Emulator:
    """``tablectl emulate KIND --tcp 127.0.0.1:0 --control 127.0.0.1:0`` in its own process."""

    def __init__(self, kind: str, folder: Path, seed: int) -> None:
        self.kind = kind
        self.proc = subprocess.Popen(tablectl() + ["emulate", kind, "--tcp", "127.0.0.1:0", "--control",
                                                   "127.0.0.1:0", "--no-stdin", "--seed", str(seed),
                                                   "--log-format", "json"],
                                     stdout=subprocess.PIPE, stderr=open(folder / f"{kind}.log", "wb"), text=True)
        self.url = self.proc.stdout.readline().strip()
        control = self.proc.stdout.readline().split()
        if not self.url.startswith("socket://") or len(control) != 2:
            raise RuntimeError(f"the {kind} emulator did not start: {self.url!r}")
        host, port = control[1].rsplit(":", 1)
        self.control = (host, int(port))

    def do(self, command: str) -> str:
        """One control command (a person's hands at the device); its reply line."""
        with socket.create_connection(self.control, timeout=10) as s:
            f = s.makefile("rw")
            f.write(command + "\n")
            f.flush()
            reply = f.readline().strip()
        if not reply.startswith("ok"):
            raise AssertionError(f"{self.kind} {command!r}: {reply}")
        return reply

    def kill(self) -> None:
        """The device's process dies (SIGKILL)."""
        kill(self.proc)

    def stop(self) -> None:
        stop(self.proc, 10)
        self.proc.stdout.close()


class BenchTable:
    """A real table on a bench: emulators, ``tablectl run`` with ``--web`` (real dealer:
    decisions and steps from the console), people in a people file. ``decks``: id ->
    colour. The controller's stderr (its prompts and logs) goes to ``folder/run.log``."""

    def __init__(self, folder: Path, *, seats: int = 3, rounds: int = 5, seed: int = 7,
                 decks: tuple[tuple[str, str], ...] = (("A", "red"), ("B", "blue")), table_id: str = "bench-01",
                 extra: str = "") -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        os.chmod(folder, 0o700)
        self.people = make_people(folder / "people.toml")
        self.decks = dict(decks)
        self.shuffler = Emulator("shuffler", folder, seed)
        self.shoe = Emulator("shoe", folder, seed + 1)
        self.port = 0  # the table picks a free one at its first start (no race with a port found beforehand)
        self.journal = folder / "journal.sqlite3"
        self.key_file, self.public_key_file = save(generate(), folder / "table.key")
        self.table_id = table_id
        deck_toml = "".join(f'[[decks]]\nid = "{i}"\nback_colour = "{c}"\n' for i, c in decks)
        self.config = folder / "table.toml"
        self.config.write_text(f'[table]\nid = "{table_id}"\nseats = {seats}\n{deck_toml}'
                               f'[devices.shuffler]\nurl = "{self.shuffler.url}"\n'
                               f'[devices.shoe]\nurl = "{self.shoe.url}"\n{extra}')
        self.log = open(folder / "run.log", "wb")
        self.rounds = rounds
        self.url = ""  # the table's, once it listens
        self.run_args: list[str] = []  # more options for the next start (e.g. --anchors FILE)
        self.start()

    def start(self) -> None:
        """``tablectl run`` (again, after :meth:`kill`: the same journal, port and devices);
        returns once its web front door listens: its own ``web_listening`` line in the log
        (the first start takes a port the table picks itself). A port found free beforehand
        and only probed for a listener could be taken meanwhile by another process on the
        machine (an emulator, a table of another suite): the probe found that one, and the
        sign-in waited on it for an answer that never came."""
        self.log.flush()
        start_at = (self.folder / "run.log").stat().st_size
        self.proc = subprocess.Popen(tablectl() + ["run", "--config", str(self.config), "--journal",
                                                   str(self.journal), "--table-key", str(self.key_file),
                                                   "--web", f"127.0.0.1:{self.port}",
                                                   "--people-file", str(self.people), "--rounds", str(self.rounds),
                                                   "--log-format", "json", *self.run_args],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log)
        self.url = wait_until(lambda: self._listening(start_at), 60, "the table's web front door")
        self.port = int(self.url.rsplit(":", 1)[1])

    def _listening(self, start_at: int) -> str | None:
        """The URL of this run's ``web_listening`` log line (the log from ``start_at`` on), or None."""
        return web_url_in_log(self.proc, self.folder / "run.log", start_at)

    def kill(self) -> None:
        """The table PC dies (SIGKILL): nothing is said to the broker; its Last Will is."""
        kill(self.proc)

    def stop(self) -> None:
        stop(self.proc, 20)
        self.log.close()
        self.shuffler.stop()
        self.shoe.stop()

    def colour(self, deck_id: str) -> str:
        return self.decks[deck_id]


class Hands:
    """The dealer's hands: what the dealer's screen asks of the devices (the physical
    steps), done on the emulators' control ports. ``draws``: every card drawn, in order
    (the shoe's reply names it), so a test knows the dealer's cards without the table."""

    def __init__(self, bench: BenchTable) -> None:
        self.bench = bench
        self.draws: list[str] = []
        self.insert_args: dict[str, str] = {}  # colour -> extra args for the next insert (e.g. "-As")
        self.carried: dict[str | None, str] = {}  # colour -> the deck the shuffler handed over, in its order

    def do(self, action: str, colour: str | None) -> None:
        b = self.bench
        if action == "insert_deck":
            held = re.search(r"cards=(\d+)", b.shuffler.do("status"))
            if held and int(held.group(1)) > 0:  # a deck taken out of service is still inside: out it comes
                b.shuffler.do("take")
            b.shuffler.do(f"insert {colour} {self.insert_args.pop(colour, '')}".strip())
        elif action == "take_from_shuffler":  # the deck, in the order the shuffle committed to, carried to the shoe
            taken = b.shuffler.do("take")
            cards = next((w[5:] for w in taken.split() if w.startswith("deck=")), None)
            if cards:
                self.carried[colour] = cards
        elif action == "unload_shoe":  # the last deck's stub to the discard rack, when the table asks
            b.shoe.do("unload")
        elif action == "load_shoe":  # the table asked for the stub first: the shoe is empty
            cards = self.carried.pop(colour, None) or self.carried.pop(None, None)
            b.shoe.do(f"load deck={cards}" if cards else f"load {colour}")
        elif action == "draw_card":
            reply = b.shoe.do("draw")
            self.draws.append(reply.split()[-1])
        else:
            raise AssertionError(f"not a physical step: {action}")


DEVICE_STEPS = ("insert_deck", "take_from_shuffler", "unload_shoe", "load_shoe", "draw_card")


class WorkerChromium:
    """One Chromium for every browser test of a pytest process (an xdist worker), launched
    when the first test asks for it (tests/conftest.py's ``chromium`` fixture); each test
    makes its own contexts (a person = a context: cookies and storage apart), and every
    context a test opened is closed after it. A launch costs ~0.6 s of CPU (the Playwright
    driver and Chromium), a context ~0.15 s: the 22 launches of a run (9 a module, 13 a
    test) became one a worker. Measured on 2 busy cores, the 18 browser modules in one
    pytest process (no ``-n``, ``-m "not alone"``): 157.8 s of CPU (children included)
    before, 139.9 s after.

    Why this works with Playwright's sync API, and what it takes: the API runs its asyncio
    loop in a greenlet of the main thread and, after every call, marks that loop as the
    thread's *running* loop (``asyncio._set_running_loop``, playwright/_impl/_greenlets.py),
    so that its callbacks find it. Left so, any later test of the worker that calls
    ``asyncio.run()`` (or ``run_until_complete``) on the main thread fails with "cannot be
    called from a running event loop" (checked: a browser test, then an ``asyncio.run``
    test, in one process). So :meth:`release` clears the mark after each browser test and
    :meth:`acquire` sets it again before the next one: between browser tests the loop is
    suspended, not running, exactly as the mark then says. Threads (the servers tests start)
    have loops of their own and are not concerned. A module-scoped browser would need no
    such care but costs a launch a module."""

    def __init__(self, executable: str) -> None:
        self.executable = executable
        self._playwright: Any = None
        self.browser: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._before: set = set()

    def start(self) -> "WorkerChromium":
        """Launch the browser (from a session fixture: outside any test's leak check, since
        the Playwright driver's pipes and child watcher live as long as the worker)."""
        from playwright.sync_api import sync_playwright

        self._playwright = sync_playwright().start()
        self._loop = asyncio.get_running_loop()  # the mark Playwright set
        # Playwright writes screenshots from its loop's default pool, whose threads start on
        # demand: a test that took a second screenshot at once started one more, and conftest
        # fails a test that leaves a thread behind. So a pool of its own, every thread started
        # here (named as asyncio's, which the browser modules' leak checks expect).
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="asyncio")
        barrier = threading.Barrier(3)
        started = [pool.submit(barrier.wait, 30) for _ in range(2)]
        barrier.wait(30)
        for future in started:
            future.result()
        self._loop.set_default_executor(pool)
        self.browser = self._playwright.chromium.launch(executable_path=self.executable, args=CHROMIUM_ARGS)
        asyncio._set_running_loop(None)  # type: ignore[attr-defined]
        return self

    def acquire(self) -> Any:
        """The worker's browser for one test; the contexts open now are kept by :meth:`release`."""
        asyncio._set_running_loop(self._loop)  # type: ignore[attr-defined]
        self._before = set(self.browser.contexts)
        return self.browser

    def release(self) -> None:
        """Close the contexts opened since :meth:`acquire` (their pages stop reconnecting to
        a table that is gone) and clear the running-loop mark."""
        try:
            for context in list(self.browser.contexts):
                if context not in self._before:
                    context.close()
        finally:
            asyncio._set_running_loop(None)  # type: ignore[attr-defined]

    def close(self) -> None:
        if self.browser is not None:
            asyncio._set_running_loop(self._loop)  # type: ignore[attr-defined]
            try:
                self.browser.close()
            finally:
                self._playwright.stop()
                self.browser = None


def close_contexts(browser: Any) -> None:
    """Close every context of ``browser`` (the people's pages leave before the server they
    watch stops; the browser itself is the worker's, :class:`WorkerChromium`)."""
    for context in list(browser.contexts):
        context.close()


def screenshot_dir() -> Path:
    """Where the browser tests save their final pages (a CI artefact; printed by the run)."""
    folder = Path(os.environ.get("THREECARD_SCREENSHOTS") or Path.cwd() / "test-artifacts" / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class PageTraffic:
    """Every WebSocket frame a page receives and every DOM snapshot taken, with the event
    seq reached, for the sealing checks."""

    def __init__(self, page: Any) -> None:
        self.frames: list[str] = []
        page.on("websocket", lambda ws: ws.on("framereceived", self._frame))

    def _frame(self, payload: Any) -> None:
        self.frames.append(payload if isinstance(payload, str) else payload.decode("utf-8", "replace"))

    def messages(self) -> list[dict]:
        out = []
        for f in self.frames:
            try:
                out.append(json.loads(f))
            except ValueError:
                out.append({"unparsed": f})
        return out


def cards_in(text: str) -> set[str]:
    """Every card name written in ``text`` as a token ("Qs", "10h"), not inside a hex digest."""
    return {("T" + m[2:]) if m.startswith("10") else m for m in CARD_RE.findall(text)}


class ApiDealer:
    """A dealer at full speed for benches: the table API over one WebSocket (signed in as
    ``person``) for the screen's steps, :class:`Hands` for the devices'. Reads what the
    table waits for from the status, never more than the deal's cards."""

    def __init__(self, bench: BenchTable, person: str = "D-4", decide: Callable[[int], str] = lambda seat: "play"):
        import urllib.request

        from websockets.sync.client import connect

        req = urllib.request.Request(bench.url + "/api/v1/session", method="POST",
                                     data=json.dumps({"person": person, "pin": PEOPLE[person][1]}).encode(),
                                     headers={"content-type": "application/json"})
        # a deadline, not a decision: under a loaded CI machine the sign-in took over 10 s
        with urllib.request.urlopen(req, timeout=60) as resp:
            token = json.loads(resp.read())["token"]
        self.ws = connect(bench.url.replace("http", "ws", 1) + "/api/v1/ws",
                          additional_headers={"authorization": f"Bearer {token}"})
        self.hands = Hands(bench)
        self.decide = decide
        self.n = 0
        self.sent: set[tuple] = set()

    def request(self, req: dict) -> dict:
        self.n += 1
        self.ws.send(json.dumps({**req, "id": self.n}))
        while True:
            reply = json.loads(self.ws.recv(30))
            if reply.get("id") == self.n:
                return reply

    def deal(self, rounds: int, timeout_s: float = 3600.0) -> None:
        """Deal until ``rounds`` rounds have been played."""
        end = time.monotonic() + timeout_s
        draws, last = 0, None
        while True:
            st = self.request({"action": "status"})
            if st.get("rounds_played", 0) >= rounds:
                return
            if time.monotonic() > end:
                raise TimeoutError(f"dealt {st.get('rounds_played')} of {rounds} rounds")
            w = st.get("waiting_for") or {}
            action, state = w.get("action"), (st.get("round") or {}).get("state")
            key = (action, state, st.get("rounds_played"), json.dumps(st.get("decks")))
            if action == "draw_card":
                if draws < self.deal_size:
                    self.hands.do(action, None)
                    draws += 1
                else:
                    time.sleep(0.002)
            elif action in DEVICE_STEPS:
                # Once per step: a deck's place moves (in the shuffler, shuffling) before the
                # table's next instruction replaces this one, so a status a moment old can still
                # ask for the deck just inserted (then "take" found it being shuffled).
                step = (action, w.get("colour"), st.get("rounds_played"), (st.get("round") or {}).get("round_id"))
                if key != last and step not in self.sent:
                    self.sent.add(step)
                    self.hands.do(action, w.get("colour"))
                else:
                    time.sleep(0.002)
            elif action in ("close_bets", "decide", "confirm_collect"):
                # Once per round and step: a status a moment old still shows a step already done,
                # and a command the table is not waiting for is answered only at its next step.
                done = ((st.get("round") or {}).get("round_id"), action)
                if done in self.sent:
                    time.sleep(0.002)
                    continue
                self.sent.add(done)
                if len(self.sent) > 64:
                    self.sent = {done}
                if action == "close_bets":
                    draws = 0
                    self.request({"action": "close_bets"})
                elif action == "decide":
                    for seat in range(1, self.seats + 1):
                        self.request({"action": "decide", "seat": seat, "decision": self.decide(seat)})
                else:
                    self.request({"action": "confirm_collect"})
            else:
                time.sleep(0.002)
            last = key

    seats = 3

    @property
    def deal_size(self) -> int:
        return 3 * (self.seats + 1)

    def close(self) -> None:
        self.ws.close()
