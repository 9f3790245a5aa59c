"""The people bench (issue 15 point 4): a real table, run by people, against standalone emulators.

Everything here reaches the table the way people at it would, and nothing else:

* :class:`Emulator`: ``tablectl emulate shuffler|shoe`` as its own process, on TCP
  or a pty; its control socket is the physical dealer's hands;
* :class:`Table`: ``tablectl run`` for a real table (no ``--simulate``): the devices'
  URLs, a journal, the control socket, the web front door, a config with
  ``[link] reconnect_wait_s``, ``[roles]`` and ``[auth]``;
* :class:`DealerClient`: the dealer's console on the control socket, as a child
  process running as another account (``nobody``) in the dealer group, so its role
  comes from ``SO_PEERCRED`` as on a table PC; it subscribes with status pushes;
* :class:`Supervisor`: a person signed in over HTTP with an id and PIN (made with
  ``tablectl people add``, the PIN typed on stdin);
* :class:`Hands`: does what the table's ``waiting_for`` asks physically, through
  the emulators' control sockets, and keeps track of where each physical deck is;
* :class:`Crew`: the dealer and the hands playing the table until a condition holds.

No sleep decides anything: every wait is on the table's status (a status push on the
dealer's subscription wakes it; a status request under a deadline confirms), and
every reply must name its request and come at once (:data:`REPLY_WITHIN_S`).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from console_helpers import ChildOutput
from tests.tables import table_toml

CLI = [sys.executable, "-c", "from table.cli import main; main()"]

#: "at once": the longest a reply may take (the console answers every command without
#: waiting for the table; this bound leaves room for two busy shared cores)
REPLY_WITHIN_S = 2.0

#: the account the dealer's console runs as, and the groups of the config's [roles]
NOBODY = 65534
ACCESS_GROUP, DEALER_GROUP = "users", "audio"

SUPERVISOR_PINS = {"S-1": "739164", "S-2": "528417"}
DEALER_PINS = {"D-1": "604381"}  # a dealer who signs in over HTTP (the web console)
#: how long the table waits for a link that went down before it holds the round (s)
RECONNECT_WAIT_S = 2.0


def _gid(name: str) -> int:
    import grp

    return grp.getgrnam(name).gr_gid


class BenchError(AssertionError):
    """The table did not do what the procedure says, within the deadline."""


# -- the emulators ------------------------------------------------------------------------------


#: the emulator of each driver package a bench can put in the shoe's place (docs/drivers.md)
DRIVER_EMULATORS = {"ascii-shoe": [sys.executable, "-m", "threecard_ascii_shoe.emulator"]}


class Emulator:
    """``tablectl emulate KIND`` on ``transport`` (``tcp`` or ``pty``), with a control socket;
    for a ``driver`` other than ``spec``, that driver package's emulator (same control lines)."""

    def __init__(self, kind: str, transport: str, folder: Path, seed: int, driver: str = "spec") -> None:
        self.kind = kind
        self.log_path = folder / f"{kind}.log"
        self._log = open(self.log_path, "wb")
        if driver == "spec":
            where = ["--tcp", "127.0.0.1:0"] if transport == "tcp" else ["--pty", str(folder / kind)]
            argv = [*CLI, "emulate", kind, *where, "--control", "127.0.0.1:0", "--no-stdin", "--seed", str(seed),
                    "--log-format", "json"]
        else:
            where = ["--tcp", "127.0.0.1:0"] if transport == "tcp" else ["--pty", "--link", str(folder / kind)]
            argv = [*DRIVER_EMULATORS[driver], *where, "--control", "127.0.0.1:0", "--seed", str(seed)]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._log)
        self.url = self.proc.stdout.readline().decode().strip()
        control = self.proc.stdout.readline().decode().split()
        if not self.url or len(control) != 2:
            self.stop()
            raise BenchError(f"the {kind} emulator did not start: {self.log_path.read_text()[-2000:]}")
        host, port = control[1].rsplit(":", 1)
        self._ctl = socket.create_connection((host, int(port)), timeout=10)
        self._ctl_file = self._ctl.makefile("rwb")
        self.commands: list[tuple[str, str]] = []  # what the hands did, and the device's reply

    def do(self, line: str) -> str:
        """One physical happening (a control command); the reply must be ``ok``."""
        reply = self.try_do(line)
        if not reply.startswith("ok"):
            raise BenchError(f"the {self.kind} refused {line!r}: {reply}")
        return reply[3:]

    def try_do(self, line: str) -> str:
        self._ctl_file.write(line.encode() + b"\n")
        self._ctl_file.flush()
        reply = self._ctl_file.readline().decode().strip()
        self.commands.append((line, reply))
        return reply

    def stop(self) -> None:
        for f in (getattr(self, "_ctl_file", None), getattr(self, "_ctl", None)):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self._log.close()


# -- the table ---------------------------------------------------------------------------------


class Table:
    """``tablectl run`` for a real table; :meth:`start` again after :meth:`kill` is a restart."""

    def __init__(self, folder: Path, shuffler_url: str, shoe_url: str, seats: int, shoe_driver: str = "spec") -> None:
        self.folder = folder
        self.control = folder / "control.sock"
        self.journal = folder / "journal.sqlite3"
        self.people = folder / "people.toml"
        self.port = 0  # the table picks a free one at its first start; a restart keeps it
        self.base_url = ""  # the table's, once it listens
        self.config = folder / "table.toml"
        text = table_toml("bench-01", seats, shuffler_url, shoe_url, f"""
[link]
reconnect_wait_s = {RECONNECT_WAIT_S}
heartbeat_interval_ms = 200
# a lost device is found within a second or two; an answer may take 1 s on a loaded machine
# (200 ms let two slow answers declare a working shuffler lost and hold the round)
heartbeat_timeout_ms = 1000
heartbeat_misses = 2
reconnect_initial_ms = 50
reconnect_max_ms = 200
[console]
control_socket = "{self.control}"
socket_group = "{ACCESS_GROUP}"
[roles]
dealer = ["{DEALER_GROUP}"]
owner = "none"
[auth]
people_file = "{self.people}"
""")
        if shoe_driver != "spec":  # the shoe speaks another protocol: its driver package drives it
            text = text.replace(f'url = "{shoe_url}"', f'url = "{shoe_url}"\ndriver = "{shoe_driver}"', 1)
        self.config.write_text(text)
        shutil.copy2(_people_file(), self.people)
        self.proc: subprocess.Popen | None = None
        self._out: ChildOutput | None = None
        self._err: ChildOutput | None = None
        self.runs = 0

    def start(self, *, journal: bool = True) -> None:
        """``tablectl run`` (again after :meth:`kill`: the same journal, control socket and
        port); returns once its web front door listens, told by the table's own
        ``web_listening`` log record. The first start binds port 0 (the table picks a free
        one itself): a port found free beforehand and then probed could meanwhile be taken
        by another process on a loaded machine, and the probe found that one. The control
        socket opens before the web door. The child's stdout and stderr are read as it
        writes them (:class:`console_helpers.ChildOutput`): its terminal text goes to
        ``runN.out`` / ``runN.err``, its JSON logs (on stderr) to ``runN.log``."""
        self.runs += 1
        self._close_output()
        cmd = [*CLI, "run", "--config", str(self.config), "--control-socket", str(self.control),
               "--web", f"127.0.0.1:{self.port}", "--rounds", "1000",
               "--log-format", "json", "--log-level", "info"]
        cmd += ["--journal", str(self.journal)] if journal else ["--no-journal"]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self._out = ChildOutput(self.proc.stdout, self.folder / f"run{self.runs}.out", name=f"table-run{self.runs}-out")
        self._err = ChildOutput(self.proc.stderr, self.folder / f"run{self.runs}.err",
                                self.folder / f"run{self.runs}.log", name=f"table-run{self.runs}-err")
        try:
            url = self._err.web_url(60)
        except AssertionError as exc:
            raise BenchError(f"tablectl run did not open its web front door: {exc}") from None
        self.port = int(url.rsplit(":", 1)[1])
        self.base_url = url
        if not self.control.exists():
            raise BenchError(f"tablectl run listens at {url} without its control socket {self.control}")

    def stderr(self, run: int | None = None) -> str:
        """What the table said on stderr (its prompts; its JSON logs are in ``runN.log``)."""
        if run in (None, self.runs) and self._err is not None:
            return self._err.text()
        return (self.folder / f"run{run}.err").read_text(errors="replace")

    def stdout(self, run: int | None = None) -> str:
        if run in (None, self.runs) and self._out is not None:
            return self._out.text()
        return (self.folder / f"run{run}.out").read_text(errors="replace")

    def wait_output(self, text: str, timeout_s: float = 10.0, *, err: bool = False) -> str:
        """Wait until the terminal shows ``text`` (words, whatever the wrapping) on stdout (or
        stderr, the prompts), as a person watching it would; returns the whole output. Woken
        at each line the table writes; a table that exits first fails at once."""
        want = " ".join(text.split())
        output = self._err if err else self._out
        assert output is not None, "the table was never started"

        def shown(o: ChildOutput) -> str | None:
            out = o.text()
            return out if want in " ".join(out.split()) else None

        try:
            return output.wait(shown, timeout_s, f"the terminal to show {text!r}")
        except AssertionError as exc:
            raise BenchError(str(exc)) from None

    def _close_output(self) -> None:
        """Wait for the readers of the last run's output (its process has ended)."""
        for output in (self._out, self._err):
            if output is not None:
                output.close()
        self._out = self._err = None

    def kill(self) -> None:
        """SIGKILL: the table PC loses power, as far as the controller is concerned."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)
        self.control.unlink(missing_ok=True)  # a socket file left by a killed process

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._close_output()
        return self.proc.returncode


_PEOPLE_TEMPLATE: Path | None = None


def _people_file() -> Path:
    """The bench's people file (the supervisors and the web dealer, their PINs typed into
    ``tablectl people add``), made once per process and copied into each bench: the same
    file every time, without three commands and their PIN hashing per test."""
    global _PEOPLE_TEMPLATE
    if _PEOPLE_TEMPLATE is None or not _PEOPLE_TEMPLATE.exists():
        import atexit

        folder = Path(tempfile.mkdtemp(prefix="threecard-people-file-"))
        atexit.register(shutil.rmtree, folder, True)
        people = folder / "people.toml"
        for person, pin in SUPERVISOR_PINS.items():
            add_person(people, person, "supervisor", pin)
        for person, pin in DEALER_PINS.items():
            add_person(people, person, "dealer", pin)
        _PEOPLE_TEMPLATE = people
    return _PEOPLE_TEMPLATE


def add_person(people: Path, person: str, role: str, pin: str) -> None:
    """``tablectl people add`` with the PIN typed (twice) on stdin, as an administrator does;
    in its own session, so no terminal is there to ask on."""
    proc = subprocess.run([*CLI, "people", "add", person, "--role", role, "--file", str(people)],
                          input=f"{pin}\n{pin}\n", capture_output=True, text=True, timeout=60, start_new_session=True)
    if proc.returncode != 0 or f"{person}: {role}" not in proc.stdout:
        raise BenchError(f"tablectl people add {person}: {proc.returncode} {proc.stdout} {proc.stderr}")


# -- replies -----------------------------------------------------------------------------------


@dataclass
class Replies:
    """Every request a client sent: the reply must name it and come within :data:`REPLY_WITHIN_S`."""

    who: str
    slowest_s: float = 0.0
    count: int = 0
    log: list[tuple[dict, dict, float]] = field(default_factory=list)

    def check(self, request: dict, reply: dict, took_s: float) -> dict:
        self.count += 1
        self.slowest_s = max(self.slowest_s, took_s)
        if request.get("action") != "status":
            self.log.append((request, reply, took_s))
        if reply.get("id") != request["id"]:
            raise BenchError(f"{self.who}: the reply to {request!r} names {reply.get('id')!r}: {reply}")
        if took_s > REPLY_WITHIN_S:
            raise BenchError(f"{self.who}: {request['action']} was answered after {took_s:.2f} s, not at once")
        return reply


# -- the dealer's console (control socket, as another account) ------------------------------------

#: the dealer's console process: it connects as ``nobody`` in the dealer group, then relays
#: request lines from stdin to the socket and every line from the socket to stdout
_RELAY = r"""
import os, socket, sys, threading
os.setgroups({groups!r}); os.setgid({groups[0]}); os.setuid({uid})
s = socket.socket(socket.AF_UNIX)
s.connect({path!r})
print("connected", flush=True)
def up():
    for line in sys.stdin.buffer:
        s.sendall(line)
    s.shutdown(socket.SHUT_WR)
threading.Thread(target=up, daemon=True).start()
for line in s.makefile("rb"):
    sys.stdout.buffer.write(line)
    sys.stdout.buffer.flush()
"""


class DealerClient:
    """The dealer at the console: the control socket, role from ``SO_PEERCRED`` (``nobody`` in
    the dealer group). Subscribed with status pushes: :meth:`wait_push` wakes on them."""

    def __init__(self, control: Path) -> None:
        self.control = control
        self.replies = Replies("dealer")
        self.events: list[dict] = []
        self._n = 0
        self._buf = b""
        self._pushes = 0
        self.proc: subprocess.Popen | None = None
        self.connect()

    def connect(self) -> None:
        self.close()
        code = _RELAY.format(groups=[_gid(ACCESS_GROUP), _gid(DEALER_GROUP)], uid=NOBODY, path=str(self.control))
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self._buf = b""
        try:
            first = self._line(10)
            if first != b"connected":
                raise BenchError(f"the dealer's console could not connect to {self.control}: {first!r}")
            me = self.request("whoami")
            if (me.get("role"), me.get("person")) != ("dealer", "nobody"):
                raise BenchError(f"the dealer's console is not a dealer: {me}")
            deadline = time.monotonic() + 30
            self.subscribed = False
            while True:  # "busy": the table is starting, its event stream opens in a moment (docs/console.md)
                sub = self.request("subscribe", status=True)
                if sub.get("ok"):
                    self.subscribed = True
                    break
                if "without a journal" in sub.get("error", ""):
                    break  # no event stream: the dealer's console polls the status
                if sub.get("code") != "busy" or time.monotonic() > deadline:
                    raise BenchError(f"subscribe refused: {sub}")
                self.wait_push(0.05)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.proc is None:
            return
        for f in (self.proc.stdin,):
            try:
                f.close()
            except OSError:
                pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self.proc = None

    def _line(self, timeout_s: float) -> bytes | None:
        """The next line from the socket within ``timeout_s`` (None: none came)."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout_s
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                raise ConnectionError("the control socket closed")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line

    def _take(self, obj: dict) -> None:
        """A message that is not a reply: an event or a status push."""
        self._pushes += 1
        if obj.get("type") != "status" and "seq" in obj:
            self.events.append(obj)

    def request(self, action: str, **args: Any) -> dict:
        self._n += 1
        req = {"id": f"d-{self._n}", "action": action, **args}
        assert self.proc is not None
        t0 = time.monotonic()
        self.proc.stdin.write((json.dumps(req) + "\n").encode())
        self.proc.stdin.flush()
        while True:
            line = self._line(max(0.0, t0 + REPLY_WITHIN_S + 5 - time.monotonic()))
            if line is None:
                raise BenchError(f"dealer: no reply to {req}")
            obj = json.loads(line)
            if "id" in obj:
                return self.replies.check(req, obj, time.monotonic() - t0)
            self._take(obj)

    def status(self) -> dict:
        st = self.request("status")
        if not st.get("ok"):
            raise BenchError(f"status refused: {st}")
        return st

    def wait_push(self, timeout_s: float) -> None:
        """Wait until the table pushes something (an event, a status) or ``timeout_s`` passes."""
        line = self._line(timeout_s)
        while line is not None:
            self._take(json.loads(line))
            line = self._line(0)

    def event_types(self) -> list[str]:
        return [e["type"] for e in self.events]

    def wait_event(self, match: Callable[[dict], bool], what: str, timeout_s: float = 10.0) -> dict:
        """The first event received that ``match`` accepts, waiting for the table to push it
        (a status says a step is done a moment before its event reaches a subscriber)."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = next((e for e in self.events if match(e)), None)
            if found is not None:
                return found
            left = deadline - time.monotonic()
            if left <= 0:
                raise BenchError(f"no {what} event within {timeout_s:g} s; got {self.event_types()[-12:]}")
            self.wait_push(left)


# -- supervisors (HTTP, signed in) -------------------------------------------------------------------


class Supervisor:
    """A person signed in over HTTP with an id and PIN (a supervisor, or ``role`` another)."""

    def __init__(self, base_url: str, person: str, pin: str | None = None, role: str = "supervisor") -> None:
        self.base_url, self.person = base_url, person
        self.replies = Replies(person)
        self._n = 0
        pin = pin or {**SUPERVISOR_PINS, **DEALER_PINS}[person]
        code, session = self.http("POST", "/api/v1/session", {"person": person, "pin": pin})
        if code != 200 or session.get("role") != role:
            raise BenchError(f"{person} could not sign in: {code} {session}")
        self.token = session["token"]

    def http(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        headers = {"content-type": "application/json"}
        if getattr(self, "token", None):
            headers["authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.base_url + path, method=method, headers=headers,
                                     data=None if body is None else json.dumps(body).encode())
        try:
            with urllib.request.urlopen(req, timeout=REPLY_WITHIN_S + 30) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def command(self, action: str, **args: Any) -> dict:
        """``POST /api/v1/commands/ACTION``; the reply (with ``http`` its status code)."""
        self._n += 1
        body = {"id": f"{self.person}-{self._n}", **args}
        t0 = time.monotonic()
        code, reply = self.http("POST", f"/api/v1/commands/{action}", body)
        self.replies.check({**body, "action": action}, reply, time.monotonic() - t0)
        reply["http"] = code
        return reply


# -- the hands -------------------------------------------------------------------------------------


@dataclass
class PhysicalDeck:
    """A deck of cards in the dealer's world: ``name`` (what the hands call it), its back
    ``colour``, what is wrong with it (``mods``: ``-As`` a card missing), and ``place``:
    ``rack`` (off the table or in the discard rack), ``shuffler``, ``out`` (taken out of
    the shuffler), ``shoe``, ``removed`` (taken off the table). ``cards``: the deck as the
    shuffler's ``take`` handed it over (``COLOUR:CARD,...``, docs/emulators.md "Carrying
    the deck"), loaded into the shoe as it is; None while it is not in hand."""

    name: str
    colour: str
    mods: tuple[str, ...] = ()
    place: str = "rack"
    cards: str | None = None


class Hands:
    """The dealer's hands: each physical action the table asks for (``waiting_for`` with a
    device action), done through the emulators' control sockets, once. Physical decks are
    tracked here, never read off the emulators."""

    def __init__(self, shuffler: Emulator, shoe: Emulator) -> None:
        self.shuffler, self.shoe = shuffler, shoe
        self.decks = [PhysicalDeck("A", "red"), PhysicalDeck("B", "blue")]
        self.drawn = 0               # cards drawn from the shoe since it was loaded
        self.layout: list[str] = []  # the faces of those cards, as they lie on the layout
        self.collected: list[list[str]] = []  # each collect's layout, in order
        self.on_draw: Callable[[int], None] | None = None  # called before each draw (its index)
        self.done: list[str] = []

    def deck(self, name: str) -> PhysicalDeck:
        return next(d for d in self.decks if d.name == name)

    def at(self, place: str, colour: str | None = None) -> PhysicalDeck | None:
        return next((d for d in self.decks if d.place == place and (colour is None or d.colour == colour)), None)

    def bring(self, deck: PhysicalDeck) -> None:
        """A new deck (a replacement) comes to the table, into the rack."""
        self.decks.append(deck)

    def collect_if_told(self, status: dict) -> None:
        """The table told the dealer to collect (after the collect was confirmed, after a
        void): a deck it places in the discard rack that is still in the shoe goes there,
        with the round's cards."""
        places = {d["back_colour"]: d["place"] for d in status.get("decks", [])}
        d = self.at("shoe")
        if d is not None and places.get(d.colour) == "in_discard_rack":
            self.collect()

    def collect(self) -> None:
        d = self.at("shoe")
        if d is None:
            return
        self.shoe.do("unload")
        d.place = "rack"
        self.drawn = 0
        self.collected.append(self.layout)
        self.layout = []
        self.done.append(f"collect {d.name}")

    def draw(self) -> str:
        """Draw the next card from the shoe; returns its face, as it lies on the layout."""
        face = self.shoe.do("draw").split()[-1]  # "drew Qs"
        self.layout.append(face)
        self.drawn += 1
        return face

    def act(self, w: dict, status: dict) -> bool:
        """Do the physical action ``w`` asks for, unless it is done; True if something was done."""
        self.collect_if_told(status)
        action, colour = w["action"], w.get("colour")
        if action == "insert_deck":
            if self.at("shuffler") is not None:
                return False
            d = self.at("rack", colour)
            if d is None:
                raise BenchError(f"the table asks for the {colour} deck in the shuffler; the hands have "
                                 f"{[(x.name, x.colour, x.place) for x in self.decks]}")
            self.shuffler.do(" ".join(["insert", d.colour, *d.mods]))
            d.place = "shuffler"
        elif action == "take_from_shuffler":
            d = self.at("shuffler")
            if d is None:
                return False
            taken = self.shuffler.do("take")
            d.cards = next((w[5:] for w in taken.split() if w.startswith("deck=")), None)
            oos = any(x["back_colour"] == d.colour and x["place"] == "out_of_service" for x in status.get("decks", []))
            d.place = "removed" if oos else "out"
        elif action == "load_shoe":
            if self.at("shoe") is not None:
                return False
            d = self.at("out", colour)
            if d is None:
                raise BenchError(f"the table asks to load the {colour} deck; the hands have "
                                 f"{[(x.name, x.colour, x.place) for x in self.decks]}")
            self.shoe.do(f"load deck={d.cards}" if d.cards else f"load {d.colour}")
            d.cards = None
            d.place = "shoe"
            self.drawn = 0
            self.layout = []
        elif action == "collect":  # the table asks for the shoe to be emptied into the discard rack
            d = self.at("shoe")
            if d is None or (colour is not None and d.colour != colour):
                return False
            self.collect()
        elif action == "draw_card":
            if w.get("draw_index") != self.drawn:
                return False
            if self.on_draw is not None:
                self.on_draw(self.drawn)
            self.draw()
        else:
            return False
        self.done.append(f"{action} {colour or ''}".strip())
        return True


# -- the crew ----------------------------------------------------------------------------------------

DEVICE_ACTIONS = ("insert_deck", "take_from_shuffler", "load_shoe", "draw_card", "collect")


def waiting(st: dict, action: str) -> bool:
    w = st.get("waiting_for")
    return bool(w) and (w["action"] == action or action in w.get("accepts", []))


class Crew:
    """The dealer and the hands: they do what the table waits for from them (close bets,
    each seat's decision, the collect, every physical step) until ``until(status)`` holds."""

    def __init__(self, dealer: DealerClient, hands: Hands, decisions: dict[int, str]) -> None:
        self.dealer, self.hands, self.decisions = dealer, hands, decisions
        self.last: dict = {}

    def run_until(self, until: Callable[[dict], bool], timeout_s: float = 60.0, *, what: str = "",
                  act: bool = True) -> dict:
        deadline = time.monotonic() + timeout_s
        while True:
            st = self.last = self.dealer.status()
            if until(st):
                return st
            acted = act and self.step(st)
            if time.monotonic() > deadline:
                from table.interfaces.terminal import describe_status

                raise BenchError(f"not reached within {timeout_s:g} s: {what or until}\n{describe_status(st)}\n"
                                 f"hands: {self.hands.done[-8:]}")
            if not acted:
                self.dealer.wait_push(0.05)

    def step(self, st: dict) -> bool:
        w = st.get("waiting_for")
        if not w:
            self.hands.collect_if_told(st)
            return False
        if w["action"] in DEVICE_ACTIONS:
            return self.hands.act(w, st)
        if w.get("role") != "dealer":
            return False
        if w["action"] == "close_bets":
            self._ok(self.dealer.request("close_bets"))
        elif w["action"] == "decide":
            seat = w["seat"]
            self._ok(self.dealer.request("decide", seat=seat, decision=self.decisions.get(seat, "play")))
        elif w["action"] == "confirm_collect":
            self.hands.collect()  # the cards go to the discard rack, then the dealer confirms
            self._ok(self.dealer.request("confirm_collect"))
        else:
            return False
        return True

    @staticmethod
    def _ok(reply: dict) -> None:
        if not reply.get("ok"):
            raise BenchError(f"the table refused the dealer: {reply}")

    def play_rounds(self, n: int, timeout_s: float = 90.0) -> dict:
        target = self.dealer.status()["rounds_played"] + n
        return self.run_until(lambda st: st["rounds_played"] >= target, timeout_s, what=f"{n} round(s) played")


# -- the bench ----------------------------------------------------------------------------------------


class Bench:
    """Both emulators, the table, the dealer, the hands and two supervisors, in a folder of its own
    (open to the dealer's account)."""

    def __init__(self, transport: str, seats: int = 2, seed: int = 7, shoe_driver: str = "spec") -> None:
        self.transport = transport
        self.folder = Path(tempfile.mkdtemp(prefix=f"threecard-people-{transport}-"))
        os.chmod(self.folder, 0o755)  # the dealer's account reaches the control socket
        self.shuffler = self.shoe = None
        self.table = None
        self.dealer = None
        try:
            self.shuffler = Emulator("shuffler", transport, self.folder, seed)
            self.shoe = Emulator("shoe", transport, self.folder, seed + 1, driver=shoe_driver)
            self.table = Table(self.folder, self.shuffler.url, self.shoe.url, seats, shoe_driver=shoe_driver)
            self.table.start()
            self.dealer = DealerClient(self.table.control)
            self.hands = Hands(self.shuffler, self.shoe)
            self.crew = Crew(self.dealer, self.hands, {1: "play", 2: "fold", 3: "play"})
        except BaseException:
            self.close()
            raise

    def supervisor(self, person: str) -> Supervisor:
        return Supervisor(self.table.base_url, person)

    def web_dealer(self, person: str = "D-1") -> Supervisor:
        """A dealer signed in over HTTP (the web console's dealer)."""
        return Supervisor(self.table.base_url, person, role="dealer")

    def restart(self, *, journal: bool = True) -> None:
        """SIGKILL the table, start it again (with or without its journal), reconnect the dealer."""
        self.dealer.close()
        self.table.kill()
        self.table.start(journal=journal)
        self.dealer.connect()

    def close(self) -> None:
        if self.dealer is not None:
            self.dealer.close()
        if self.table is not None:
            self.table.stop()
        for emu in (self.shoe, self.shuffler):
            if emu is not None:
                emu.stop()
        if os.environ.get("THREECARD_KEEP_BENCH"):
            print(f"bench kept in {self.folder}", file=sys.stderr)
        else:
            shutil.rmtree(self.folder, ignore_errors=True)
