"""The table's side of a driver process: start it, supervise it, and show it as a driver.

:func:`open_apart` (the same call as :func:`devices.plugins.open_driver`: a driver name
and an :class:`~devices.contract.OpenRequest`) starts ``python -m devices.apart.host``
on one end of a socket pair and returns :class:`ApartShoe` or :class:`ApartShuffler`:
``link`` (:class:`ApartLink`), ``status()``, ``shuffle()``, ``open_shuffle()`` (when
the driver has it), ``capabilities``, ``driver_name``, ``close()``: the surface of
:class:`devices.contract.ShoeDriver`/``ShufflerDriver``, so the controller cannot tell
it from a driver in its own process. The driver's name, package, version and
capabilities are what the driver process says (``ready``): this process never imports
a plugin's code.

A driver's failure is a device fault (docs/drivers.md, "A driver's process";
docs/device-faults.md): an exception outside the contract in a call
(:class:`~devices.apart.wire.DriverRaised`), a call not answered within its deadline, or
the process ending (:class:`~devices.apart.wire.DriverProcessFailed`) are
:class:`~devices.contract.LinkError` s, which the table's ride-through holds on. The
process is then ended and started again (backing off 0.2 s doubling to 5 s while it
cannot start); meanwhile the link is down, announced with a ``link_down`` notice whose
detail names the driver and its version (the table journals it), and ``link_up`` (or
``device_rebooted``) when it answers again, its device's identity checked against the
one before (SPEC §6.1, §6.6: a different device is refused, ``identity_changed``).
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import json
import os
import queue
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import structlog

from devices.contract import (
    FULL,
    NOTICE_KINDS,
    Capabilities,
    DeviceEvent,
    DeviceIdentity,
    DriverError,
    DriverKind,
    HandshakeError,
    LinkConfig,
    LinkError,
    LinkState,
    OpenRequest,
    ShuffleOpening,
    StatusReply,
)
from protocols.messages import (CardDrawn, CardUnreadable, DeckDelivered, DeckInserted, DeckVerified, Message,
                                ShoeEmpty, ShoeLoaded, ShufflerFault)
from firmware_bridge.ledger import check_identity, post_notice, rebooted, refusal_notice

from . import wire
from .isolation import Isolation
from .wire import DriverProcessFailed, DriverRaised


#: the events each kind of device sends (protocols/SPEC.md §4.2 the shuffler's, §4.3 the
#: shoe's): a driver process that sends another kind's (a shuffler's driver forging a card
#: drawn) has broken the wire, and is ended
KIND_EVENTS: dict[DriverKind, tuple[type, ...]] = {
    DriverKind.SHUFFLER: (DeckInserted, DeckVerified, DeckDelivered, ShufflerFault),
    DriverKind.SHOE: (ShoeLoaded, CardDrawn, CardUnreadable, ShoeEmpty),
}


#: how a driver process starts (``python -S -E -B -c _BOOT PATHS FD``): the interpreter's own
#: standard library first (no empty entry: not the working folder), then the table's import
#: path, then the host; nothing of site-packages runs before :func:`devices.apart.host.main`
#: confines the process, not even a module an installed package names as a standard one
_BOOT = ("import json, os, sys; "
         "sys.path[:] = [p for p in sys.path if p] + [p for p in json.loads(sys.argv[1]) if p not in sys.path]; "
         "from devices.apart.host import main; "
         "os._exit(main(['--fd', sys.argv[2]] + (['--device-fd', sys.argv[3]] if len(sys.argv) > 3 else [])))")


def _import_path() -> list[str]:
    """Where a driver process finds the table's own packages (``devices`` and those below
    it) before it reads any ``*.pth`` file: the site-packages folders first (an installed
    table, readable by a driver's own user once it is confined), then the folder that holds
    the packages this table imported (an editable install reaches them through a finder a
    ``.pth`` file installs, which ``-S`` skips), then the table's ``sys.path``."""
    import devices

    here = os.path.dirname(os.path.dirname(os.path.abspath(devices.__file__)))
    out: list[str] = []
    for p in (*_site_dirs(), here, *sys.path):
        if p and p not in out:
            out.append(p)
    return out


def _site_dirs() -> list[str]:
    """The table's site-packages folders: a driver process reads their ``*.pth`` files
    (an editable install's path or finder) once it is confined, never before."""
    import site

    dirs = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    if site.ENABLE_USER_SITE and site.USER_SITE:
        dirs.append(site.USER_SITE)
    return [d for d in dirs if os.path.isdir(d)]

log = structlog.get_logger("devices.apart")


def serve_device(sock: socket.socket, url: str) -> None:
    """The table's side of a driver process's :class:`devices.apart.host.DeviceOpener`: each
    request on ``sock`` opens ``url`` (read and write, no controlling tty, non-blocking) and
    sends the descriptor over (SCM_RIGHTS), or ``E<errno>``; a node that is not a character
    device is refused (ENODEV): a driver is handed its device and nothing else. Ends when
    the driver process's end closes."""
    while True:
        try:
            if not sock.recv(16):
                return
        except OSError:
            return
        try:
            fd = os.open(url, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            reply, fd = b"E%d" % (exc.errno or 5), -1
        else:
            if not stat.S_ISCHR(os.fstat(fd).st_mode):
                os.close(fd)
                reply, fd = b"E%d" % errno.ENODEV, -1
            else:
                reply = b"F"
        try:
            if fd >= 0:
                socket.send_fds(sock, [reply], [fd])
            else:
                sock.sendall(reply)
        except OSError:
            return
        finally:
            if fd >= 0:
                os.close(fd)

#: the setting that says which drivers run apart: ``"all"`` (the default: the built-in ``spec``
#: and plugins alike), ``"plugins"`` (every driver but ``spec``) or ``"none"`` (the in-process
#: form, chosen explicitly by tests and benches where it is cheaper)
APART_SETTING = "devices.apart"
APART_CHOICES = ("all", "plugins", "none")
#: how long a driver process may take to load and open its device (s)
OPEN_TIMEOUT_S = 30.0
#: the restart back-off (s): a driver process that fails is started again at once; one that
#: fails again within the same outage waits the first wait, doubled at each failure, at most
#: the cap (a driver that crashes as it starts is never restarted in a flood)
RESTART_FIRST_S, RESTART_MAX_S = 0.2, 30.0
#: an outage ends once a start of the driver answers a call, or serves this long (s) without failing
STABLE_S = 30.0


def runs_apart(setting: str, driver: str) -> bool:
    """Whether driver ``driver`` runs in its own process under ``setting`` (:data:`APART_CHOICES`)."""
    if setting not in APART_CHOICES:
        raise DriverError(f"{APART_SETTING}: {setting!r} is not one of {', '.join(APART_CHOICES)}")
    return setting == "all" or (setting == "plugins" and driver != "spec")


def default_deadline_s(cfg: LinkConfig) -> float:
    """How long a call may take before its driver is taken for hung (s): the link's own
    longest wait (a device away, ``reconnect_wait_s``, then every retransmission at
    its longest, SPEC §6.2, §6.6) and 2 s for the process."""
    return cfg.reconnect_wait_s + cfg.max_attempts * cfg.retransmit_max_ms / 1000 + 2.0


@dataclass
class _Slot:
    done: threading.Event = field(default_factory=threading.Event)
    value: Any = None
    error: LinkError | None = None


class _Child:
    """One start of a driver process: its process, its socket, its calls in flight."""

    def __init__(self, popen: "subprocess.Popen[bytes] | None", sock: socket.socket,
                 device_sock: socket.socket | None = None) -> None:
        self.popen = popen
        self.sock = sock
        self.device_sock = device_sock
        self.rfile = sock.makefile("rb")
        self.wlock = threading.Lock()
        self.pending: dict[int, _Slot] = {}
        self.alive = True
        self.why = ""
        self.reader: threading.Thread | None = None

    def wait(self, timeout: float | None = None) -> int | None:
        """The process's exit status (None: started by systemd, not the table's to wait for)."""
        return self.popen.wait(timeout) if self.popen is not None else None

    def release(self) -> None:
        """Close this process's end of the socket (its reader is done with it)."""
        self.rfile.close()
        self.sock.close()
        if self.device_sock is not None:
            with contextlib.suppress(OSError):
                self.device_sock.shutdown(socket.SHUT_RDWR)  # its opener thread sees the end
            self.device_sock.close()

    def send(self, obj: dict[str, Any]) -> None:
        data = wire.encode_line(obj)
        with self.wlock:
            self.sock.sendall(data)

    def kill(self, why: str) -> None:
        """End this start: SIGKILL a process the table started; for one systemd started
        (connected to), close the connection, on which it ends itself."""
        if not self.why:
            self.why = why
        if self.popen is not None:
            try:
                self.popen.send_signal(signal.SIGKILL)
            except OSError:
                pass
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class ApartLink:
    """``driver.link`` of a driver in its own process (:class:`devices.contract.DriverLink`):
    ``name``, ``config`` (the table's link timings), ``events`` (the shared queue),
    ``identity`` and ``state`` as the driver process last said them (down while it is
    being started again), ``acknowledge(event)`` sent to it."""

    def __init__(self, owner: "DriverProcess", request: OpenRequest) -> None:
        self._owner = owner
        self.name = request.name
        self.config = request.link_config
        self.events = request.events
        self.identity: DeviceIdentity | None = None
        self._state = LinkState.CONNECTING
        #: frames or lines its driver dropped as corrupt (line noise), every start of it counted
        self.frame_errors = 0

    @property
    def state(self) -> LinkState:
        return self._state

    @property
    def alive(self) -> bool:
        return self._state is LinkState.UP

    def acknowledge(self, event: DeviceEvent) -> None:
        """``event`` is journaled: the driver process answers its device now (idempotent there)."""
        if event.source == self.name and event.seq >= 0:
            self._owner.send_ack(event)


class DriverProcess:
    """One device's driver in a process of its own, started again whenever it fails
    (module docstring). ``driver``: the config's name (``"spec"``, an entry point of
    ``threecard.devices``) or ``"module:attr"`` (with ``paths`` added to its
    ``sys.path``); ``request``: as :func:`devices.plugins.open_driver` takes it
    (``extras["frame_trace"]`` is called with the frames the process reports; other
    extras cannot cross a process); ``isolation``: :class:`Isolation`;
    ``call_deadline_s``: how long a call may take (None: :func:`default_deadline_s`);
    ``connect``: the path of a driver's socket systemd listens on
    (deploy/threecard-driver@.socket): each start connects to it instead of starting a
    process, and systemd starts the confined driver (deploy/threecard-driver@.service).
    """

    def __init__(self, driver: str, request: OpenRequest, *, isolation: Isolation | None = None,
                 call_deadline_s: float | None = None, open_timeout_s: float = OPEN_TIMEOUT_S,
                 paths: tuple[str, ...] = (), stderr: Any = subprocess.DEVNULL, connect: str | None = None,
                 restart_first_s: float = RESTART_FIRST_S, restart_max_s: float = RESTART_MAX_S) -> None:
        self.driver = driver
        self.restart_first_s, self.restart_max_s = restart_first_s, restart_max_s
        #: the current outage: how many times the driver failed in it (0: none), when its
        #: current start began serving (monotonic s), and each wait before a start (s)
        self.failures = 0
        self._errors_seen = self._errors_base = 0
        self.waits: list[float] = []
        self._served_since = 0.0
        self._starts_seen = threading.Condition()
        self.connect = connect
        self.request = request
        self.kind = DriverKind(request.kind)
        self.isolation = isolation or Isolation(network=True)
        self.deadline_s = call_deadline_s if call_deadline_s is not None else default_deadline_s(
            request.link_config)
        self.open_timeout_s = open_timeout_s
        self.paths = tuple(paths)
        self.stderr = stderr
        self.link = ApartLink(self, request)
        self.name = driver
        self.package = "?"
        self.version = "?"
        self.declared: Capabilities | None = None
        self.capabilities: Capabilities = FULL
        self.ops: frozenset[str] = frozenset()
        self.starts = 0
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._child: _Child | None = None
        self._children: list[_Child] = []  # every start whose reader may still run (joined at close)
        self._closing = threading.Event()
        self._restart = threading.Event()
        self._supervisor: threading.Thread | None = None

    @property
    def who(self) -> str:
        """The driver as incidents name it: ``the shoe's driver 'ascii-shoe' (threecard-ascii-shoe 1.0.0)``."""
        return f"the {self.kind}'s driver {self.name!r} ({self.package} {self.version})"

    # -- start ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the process and wait for its ``ready``. Raises :class:`DriverError` (the
        driver cannot be loaded or its options are wrong), the driver's
        :class:`LinkError` (its device cannot be opened), or :class:`DriverProcessFailed`."""
        self._start_once()
        self._supervisor = threading.Thread(target=self._supervise, name=f"apart-{self.link.name}", daemon=True)
        self._supervisor.start()

    def _spawn(self) -> _Child:
        if self.connect is not None:  # systemd starts the driver on this connection
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(self.connect)
            except OSError as exc:
                sock.close()
                raise DriverProcessFailed(f"the {self.kind}'s driver socket {self.connect}: {exc.strerror or exc}") \
                    from None
            return _Child(None, sock)
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        # its device's node is opened here and passed over: the driver needs no access to the path
        device = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET) if self.request.url.startswith("/") \
            else None
        fds = (child.fileno(),) + ((device[1].fileno(),) if device is not None else ())
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
        if os.environ.get("PYTHONPATH"):
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        try:
            # -S: no site module, so no *.pth file of an installed package runs before the process
            # confines itself (a plugin's wheel can ship one); the table's import path is given
            # as it is, the plugin's code is imported only after the confinement (host.start)
            popen = subprocess.Popen([sys.executable, "-S", "-E", "-B", "-c", _BOOT,
                                      json.dumps(_import_path()), *map(str, fds)],
                                     pass_fds=fds, close_fds=True, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self.stderr, env=env, cwd="/")
        except BaseException:
            if device is not None:
                device[0].close()
            raise
        finally:
            child.close()
            if device is not None:
                device[1].close()
        if device is not None:
            threading.Thread(target=serve_device, args=(device[0], self.request.url),
                             name=f"apart-device-{self.link.name}", daemon=True).start()
        return _Child(popen, parent, device[0] if device is not None else None)

    def _start_once(self) -> None:
        c = self._spawn()
        with self._lock:
            self._children = [k for k in self._children if k.reader is None or k.reader.is_alive()] + [c]
        req = self.request
        trace = req.extras.get("frame_trace") if req.extras else None
        try:
            c.send({"t": "hello", "v": wire.WIRE_VERSION, "kind": str(self.kind), "driver": self.driver,
                    "url": req.url, "name": req.name, "options": dict(req.options), "path": list(self.paths), "syspath": [p for p in sys.path if p], "sitedirs": _site_dirs(),
                    "link_config": wire.to_link_config(req.link_config), "ack_on_delivery": req.ack_on_delivery,
                    "queue": req.link_config.event_queue_size, "trace": trace is not None,
                    "isolation": self.isolation.to_wire()})
            ready = self._await_ready(c)
        except ConnectionError as exc:  # the process went before its ready (it could not even import the host)
            c.kill("did not start")
            code = c.wait()
            c.release()
            raise DriverProcessFailed(f"{self.who}: its process did not start (exit status {code}; "
                                      f"{exc.strerror or exc})") from None
        except BaseException:
            c.kill("did not start")
            c.wait()
            c.release()
            raise
        self.name = str(ready.get("name") or self.driver)[:80]
        self.package = str(ready.get("package") or "?")[:80]
        self.version = str(ready.get("version") or "?")[:40]
        self.declared = wire.from_capabilities(ready.get("declared"))
        self.contract_version = ready.get("contract_version") if isinstance(ready.get("contract_version"), int) else 0
        ops = ready.get("ops")
        self.ops = frozenset(o for o in ops if o in wire.CALLS) if isinstance(ops, list) else frozenset()
        previous = self.link.identity
        with self._lock:
            self._child = c
        self._errors_base, self._errors_seen = self._errors_base + self._errors_seen, 0
        self._apply_link(ready.get("link"))
        c.reader = threading.Thread(target=self._read, args=(c,), name=f"apart-read-{self.link.name}", daemon=True)
        c.reader.start()
        self._served_since = time.monotonic()
        with self._starts_seen:
            self.starts += 1
            self._starts_seen.notify_all()
        if self.starts > 1:
            self._back_up(previous)

    def _await_ready(self, c: _Child, want: str = "ready") -> dict[str, Any]:
        timer = threading.Timer(self.open_timeout_s, c.kill, args=(f"did not open within {self.open_timeout_s:g} s",))
        timer.start()
        try:
            while True:
                line = c.rfile.readline(wire.MAX_LINE + 1)
                if not line:
                    code = c.wait()
                    raise DriverProcessFailed(f"the {self.kind}'s driver {self.driver!r}: its process "
                                              f"{c.why or f'ended (exit status {code})'} before it was ready")
                msg = wire.decode_line(line)
                if msg["t"] == want:
                    return msg
                if msg["t"] == "refused":
                    err = msg.get("error") or {}
                    if err.get("type") == "DriverOptionError":
                        raise wire.from_error(err, f"the {self.kind}'s driver {self.driver!r}")
                    if err.get("type") == "DriverError":
                        raise DriverError(str(err.get("message"))[:800])
                    raise wire.from_error(err, f"the {self.kind}'s driver {self.driver!r}")
                if msg["t"] == "resume":
                    self._answer_resume(c, msg)
                # a trace or an event before ready: nothing to deliver yet
        finally:
            timer.cancel()

    # -- the reader ----------------------------------------------------------------------------

    def _apply_link(self, snap: Any) -> None:
        if not isinstance(snap, dict):
            raise wire.WireError("a link without its state")
        try:
            state = LinkState(snap.get("state"))
        except ValueError:
            raise wire.WireError(f"link state {snap.get('state')!r}") from None
        ident = wire.from_identity(snap.get("identity"))
        if ident is not None:
            if ident != self.link.identity:  # the table's log names the device as an in-process link does
                log.info("handshake", source=self.link.name, device_serial=ident.serial_number,
                         kind=str(ident.kind), firmware=ident.firmware_version,
                         protocol=f"{ident.protocol_major}.{ident.protocol_minor}", boot_id=f"{ident.boot_id:08x}",
                         driver=self.name, driver_version=self.version, apart=True)
            self.link.identity = ident
        if snap.get("caps") is not None:
            self.capabilities = wire.from_capabilities(snap["caps"])
        errors = snap.get("frame_errors", 0)
        if isinstance(errors, int) and not isinstance(errors, bool) and 0 <= errors < 2 ** 63:
            # a count of this start's driver (from 0 at each start): the link's total goes on
            self._errors_seen = max(self._errors_seen, errors)
            self.link.frame_errors = self._errors_base + errors
        self.link._state = state

    def _answer_resume(self, c: _Child, msg: dict[str, Any]) -> None:
        ident = wire.from_identity(msg.get("identity"))
        seq = None
        if ident is not None and self.request.resume is not None:
            seq = self.request.resume(ident)
        c.send({"t": "resume_reply", "id": msg.get("id"), "seq": seq})

    def _read(self, c: _Child) -> None:
        why = ""
        try:
            while True:
                line = c.rfile.readline(wire.MAX_LINE + 1)
                if not line:
                    break
                msg = wire.decode_line(line)
                t = msg["t"]
                if t == "reply":
                    slot = c.pending.pop(msg.get("id", -1), None)
                    if "link" in msg:
                        self._apply_link(msg["link"])
                    if slot is not None:
                        if "error" in msg:
                            slot.error = wire.from_error(msg["error"], self.who)
                        else:
                            slot.value = None if msg.get("value") is None else wire.from_message(msg["value"])
                        slot.done.set()
                elif t == "event":
                    self._apply_link(msg.get("link"))
                    ev = wire.from_event(msg.get("ev"), self.link.name, NOTICE_KINDS)
                    if isinstance(ev.message, Message) and not isinstance(ev.message, KIND_EVENTS[self.kind]):
                        raise wire.WireError(f"a {type(ev.message).__name__} event from the {self.kind}'s driver "
                                             f"(a {self.kind} sends {', '.join(c.__name__ for c in KIND_EVENTS[self.kind])}"
                                             f": protocols/SPEC.md §4.2, §4.3)")
                    try:
                        self.link.events.put_nowait(ev)
                    except queue.Full:  # left unanswered: the device resends it (SPEC §6.3)
                        log.warning("apart_event_queue_full", source=self.link.name)
                elif t == "link":  # the link's state changed between events
                    self._apply_link(msg.get("link"))
                elif t == "resume":
                    self._answer_resume(c, msg)
                elif t == "trace":
                    hook = self.request.extras.get("frame_trace") if self.request.extras else None
                    if hook is not None:
                        hook(str(msg.get("dir"))[:8], bytes.fromhex(str(msg.get("hex"))))
                else:
                    raise wire.WireError(f"a line of type {t!r} from a driver process")
        except (wire.WireError, ValueError) as exc:
            why = f"broke the wire ({exc})"
        except OSError:
            pass
        except Exception as exc:  # noqa: BLE001 - whatever a line made fail here ends the driver, never the reader alone
            why = f"broke the wire ({type(exc).__name__})"
        finally:
            c.kill(why or "ended")
            self._ended(c)

    def _ended(self, c: _Child) -> None:
        c.alive = False
        code = c.wait()
        if code is None:
            c.why = c.why if c.why and c.why != "ended" else "closed its connection"
        elif not c.why or c.why == "ended":
            c.why = f"ended (exit status {code})" if code >= 0 else f"was killed by signal {-code}"
        err = DriverProcessFailed(f"{self.who}: its process {c.why}")
        for slot in list(c.pending.values()):
            slot.error = err
            slot.done.set()
        c.pending.clear()
        c.release()
        with self._lock:
            current = self._child is c
            if current:
                self._child = None
        if current and not self._closing.is_set():
            self.link._state = LinkState.DOWN
            if self.failures and time.monotonic() - self._served_since >= STABLE_S:
                self.failures = 0  # it served long enough: this is a new outage
            self.failures += 1
            log.warning("driver_process_failed", source=self.link.name, driver=self.name, version=self.version,
                        why=c.why, failures=self.failures)
            if self.failures == 1:  # one incident per outage: its first failure is journaled, said what to do
                post_notice(self.link.events, self.link.name, "link_down",
                            f"{self.who}: its process {c.why}; the table starts it again, waiting longer (up to "
                            f"{self.restart_max_s:g} s) each time it fails again; if it keeps failing, switch the "
                            f"{self.kind} off and on, then reinstall the driver's package or call its vendor "
                            "(docs/drivers.md, \"A driver's process\")")
            self._restart.set()

    # -- supervision ---------------------------------------------------------------------------

    def restart_wait_s(self) -> float:
        """How long the supervisor waits before the next start (s): none after the first
        failure of an outage (a driver that failed once is back at once), then
        :attr:`restart_first_s` doubled at each further failure, at most :attr:`restart_max_s`."""
        if self.failures <= 1:
            return 0.0
        return min(self.restart_first_s * 2.0 ** (self.failures - 2), self.restart_max_s)

    def wait_starts(self, n: int, timeout_s: float) -> bool:
        """Wait until the driver process has been started ``n`` times (True) or ``timeout_s`` passed."""
        with self._starts_seen:
            return self._starts_seen.wait_for(lambda: self.starts >= n, timeout_s)

    def _recovered(self) -> None:
        """A call was answered: the outage, if any, is over (the next failure is a new incident)."""
        if self.failures:
            self.failures = 0

    def _supervise(self) -> None:
        wait = self.restart_first_s
        while not self._closing.is_set():
            self._restart.wait()
            if self._closing.is_set():
                return
            pause = self.restart_wait_s()
            self.waits.append(pause)
            del self.waits[:-64]  # the latest only: a driver failing for days keeps no growing list
            if pause and self._closing.wait(pause):  # backs off while it keeps failing: never a flood
                return
            try:
                self._start_once()
            except HandshakeError as exc:  # the device is refused (SPEC §6.6): nobody restarts past that
                self.link._state = LinkState.REFUSED
                post_notice(self.link.events, self.link.name, refusal_notice(exc), f"{self.who}: {exc}")
                return
            except (LinkError, DriverError, OSError) as exc:
                log.warning("driver_process_restart_failed", source=self.link.name, error=str(exc)[:200])
                if self._closing.wait(wait):  # back off while it cannot start (its device away)
                    return
                wait = min(wait * 2, self.restart_max_s)
                continue
            wait = self.restart_first_s
            self._restart.clear()

    def _back_up(self, previous: DeviceIdentity | None) -> None:
        """The restarted driver answers: its device must be the one before (SPEC §6.6)."""
        ident = self.link.identity
        if ident is None:
            return
        try:
            check_identity(self.link.name, ident, self.request.link_config, expected_kind=self.kind.device_kind,
                           previous=previous, where=self.request.url)
        except HandshakeError:
            with self._lock:
                c, self._child = self._child, None
            if c is not None:
                c.why = "refused"
                c.kill("refused")
            raise
        if self.failures > 1:  # a restart within an outage already said: logged, not journaled again
            log.info("driver_process_restarted", source=self.link.name, start=self.starts, failures=self.failures)
            return
        kind = "device_rebooted" if rebooted(previous, ident) else "link_up"
        post_notice(self.link.events, self.link.name, kind, f"{self.who} started again (start {self.starts})")

    # -- calls ---------------------------------------------------------------------------------

    def call(self, op: str, args: dict[str, Any] | None = None) -> Any:
        """Call ``op`` in the driver process and wait for its reply, at most :attr:`deadline_s`.
        Raises the driver's :class:`LinkError`, :class:`DriverRaised` or :class:`DriverProcessFailed`
        (the process is then started again)."""
        with self._lock:
            c = self._child
        if c is None or not c.alive:
            raise DriverProcessFailed(f"{self.who}: its process is being started again")
        cid = next(self._ids)
        slot = _Slot()
        c.pending[cid] = slot
        if not c.alive:  # it ended between the look and the call: its reader failed what it saw pending
            c.pending.pop(cid, None)
            raise DriverProcessFailed(f"{self.who}: its process {c.why or 'ended'}")
        try:
            c.send({"t": "call", "id": cid, "op": op, "args": args or {}})
        except OSError:
            c.pending.pop(cid, None)
            c.kill("closed its socket")
            raise DriverProcessFailed(f"{self.who}: its process closed its socket") from None
        if not slot.done.wait(self.deadline_s):
            c.pending.pop(cid, None)
            c.kill(f"hung in {op}() past its {self.deadline_s:g} s deadline and was ended")
            raise DriverProcessFailed(f"{self.who}: {op}() not answered within {self.deadline_s:g} s; "
                                      "its process is ended and started again")
        if slot.error is not None:
            if isinstance(slot.error, DriverRaised):  # outside the contract: a fresh start of the driver
                c.kill(f"raised in {op}()")
            if not isinstance(slot.error, (DriverRaised, DriverProcessFailed)):
                # a contract error (a refusal, a device away): the driver itself works; its
                # process ending under the call (_ended) is the outage going on, not over
                self._recovered()
            raise slot.error
        self._recovered()
        return slot.value

    def send_ack(self, event: DeviceEvent) -> None:
        with self._lock:
            c = self._child
        if c is not None and c.alive:
            try:
                c.send({"t": "ack", "seq": event.seq, "boot": event.boot_id})
            except OSError:  # the process is gone: its device resends, the restart's cursor dedups
                pass

    def close(self) -> None:
        """Stop supervising, ask the process to close its driver, end it."""
        self._closing.set()
        self._restart.set()
        with self._lock:
            c, self._child = self._child, None
        self.link._state = LinkState.CLOSED
        if self._supervisor is not None and self._supervisor is not threading.current_thread():
            self._supervisor.join(timeout=OPEN_TIMEOUT_S + 5)
        if c is not None:
            try:
                c.send({"t": "close"})
                c.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        with self._lock:
            children = list(self._children)
        for k in children:  # a start the supervisor made meanwhile, a failed one still being read
            k.kill("closed")
            k.wait()
            if k.reader is not None:
                k.reader.join(timeout=10)


class ApartShoe:
    """A shoe's driver in its own process, as the table calls it (module docstring)."""

    def __init__(self, process: DriverProcess) -> None:
        self.process = process
        self.link = process.link

    @property
    def capabilities(self) -> Capabilities:
        """What the driver says its device provides now (from its process)."""
        return self.process.capabilities

    @property
    def driver_name(self) -> str:
        return self.process.name

    @property
    def identity(self) -> DeviceIdentity | None:
        """The device's identity as its driver process last said it (None before its handshake)."""
        return self.link.identity

    @property
    def driver_version(self) -> str:
        return f"{self.process.package} {self.process.version}"

    def status(self) -> StatusReply:
        """The device's status. Raises :class:`LinkError` (a driver's failure included)."""
        reply = self.process.call("status")
        if not isinstance(reply, StatusReply):
            raise DriverRaised(f"{self.process.who} answered status() with a {type(reply).__name__}")
        return reply

    def close(self) -> None:
        self.process.close()


class ApartShuffler(ApartShoe):
    """A shuffler's driver in its own process: a shoe's surface and ``shuffle()``, and
    ``open_shuffle()`` when its driver has it (the table looks for it, SPEC §4.2.1)."""

    def shuffle(self) -> None:
        """Start a shuffle. Raises :class:`LinkError` (:class:`RequestRefused` with its NAK code)."""
        self.process.call("shuffle")

    def __getattr__(self, name: str) -> Any:
        if name == "open_shuffle" and "open_shuffle" in self.process.ops:
            return self._open_shuffle
        raise AttributeError(name)

    def _open_shuffle(self, commitment: bytes) -> ShuffleOpening:
        reply = self.process.call("open_shuffle", {"commitment": bytes(commitment).hex()})
        if not isinstance(reply, ShuffleOpening):
            raise DriverRaised(f"{self.process.who} answered open_shuffle() with a {type(reply).__name__}")
        return reply


def check_apart(driver: str, kind: DriverKind | str, options: dict[str, Any], *, paths: tuple[str, ...] = (),
                timeout_s: float = OPEN_TIMEOUT_S) -> dict[str, Any]:
    """What :func:`devices.plugins.prepare` checks (the driver loads, is for this contract
    version and this kind, takes these options, declares what the table needs), done in a
    driver process, so that checking a table's config never imports a plugin's code into
    the table. Returns ``name``, ``package``, ``version``, ``capabilities``
    (:class:`Capabilities`). Raises :class:`DriverError` (:class:`DriverOptionError` for an
    option, its key ``devices.KIND.KEY``) or :class:`DriverProcessFailed`."""
    kind = DriverKind(kind)
    request = OpenRequest(kind, "", str(kind), queue.Queue(1), options=dict(options))
    process = DriverProcess(driver, request, paths=paths, open_timeout_s=timeout_s)
    c = process._spawn()
    try:
        c.send({"t": "hello", "v": wire.WIRE_VERSION, "kind": str(kind), "driver": driver, "url": "",
                "name": str(kind), "options": dict(options), "path": list(paths), "check": True,
                "syspath": [p for p in sys.path if p], "sitedirs": _site_dirs(),
                "isolation": Isolation(network=True).to_wire()})
        msg = process._await_ready(c, want="checked")
    finally:
        c.kill("checked")
        c.wait()
        c.release()
    return {"name": str(msg.get("name"))[:80], "package": str(msg.get("package"))[:80],
            "version": str(msg.get("version"))[:40], "capabilities": wire.from_capabilities(msg.get("declared"))}


def open_apart(driver: str, request: OpenRequest, *, isolation: Isolation | None = None,
               call_deadline_s: float | None = None, paths: tuple[str, ...] = (),
               open_timeout_s: float = OPEN_TIMEOUT_S, connect: str | None = None,
               restart_first_s: float = RESTART_FIRST_S, restart_max_s: float = RESTART_MAX_S) -> ApartShoe | ApartShuffler:
    """Driver ``driver`` for ``request.kind`` in a process of its own: what
    :func:`devices.plugins.open_driver` returns, apart (module docstring). ``isolation``:
    None for a bench's (descriptors, core, dumpable); :meth:`Isolation.service` in
    service mode; ``connect``: a systemd driver socket; ``restart_first_s``,
    ``restart_max_s``: the restart back-off (:class:`DriverProcess`). Raises
    :class:`DriverError` (load, version, options, isolation), the
    driver's :class:`LinkError` (cannot open, no answer, refused) or
    :class:`DriverProcessFailed`."""
    process = DriverProcess(driver, request, isolation=isolation, call_deadline_s=call_deadline_s, paths=paths,
                            open_timeout_s=open_timeout_s, connect=connect, restart_first_s=restart_first_s,
                            restart_max_s=restart_max_s)
    process.start()
    kind = DriverKind(request.kind)
    return ApartShuffler(process) if kind is DriverKind.SHUFFLER else ApartShoe(process)


__all__ = ["APART_CHOICES", "APART_SETTING", "ApartLink", "ApartShoe", "ApartShuffler", "DriverProcess", "check_apart",
           "DriverProcessFailed", "DriverRaised", "open_apart", "runs_apart"]
