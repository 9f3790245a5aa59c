"""A driver process: ``python -m devices.apart.host --fd N`` (started by the table, :mod:`devices.apart.proxy`),
or ``--listen-fd 3`` (started by systemd on the table's connection, deploy/threecard-driver@.service).

It reads the table's ``hello`` from the socket at descriptor ``N``, confines itself
(:mod:`devices.apart.isolation`) before any driver code is imported, loads the driver
(the built-in ``spec``, an entry point of ``threecard.devices`` by name, or
``module:attr``), checks its options and capabilities as the in-process loader does
(:func:`devices.plugins.prepare`), opens the device and answers ``ready`` with the
driver's name, package, version and declared capabilities. Then it serves the wire
(:mod:`devices.apart.wire`): calls run one at a time on a worker thread, events go to the
table as the driver delivers them, the table's acknowledgements go to the driver's link.
A call's reply goes to the table after every event the driver delivered before the call
returned (one writer, in the driver's order): a shoe's count never reaches the table
ahead of the card events it counts (the table takes those in before it declares a card
lost, ``table/procedure/intake.py``).

Whatever the driver raises is sent back as an error (a contract error by name; any
other by its type's name only), never a crash of this loop. The table's socket
closing ends the process.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import queue
import socket
import sys
import threading
from importlib.metadata import PackageNotFoundError, version as dist_version
from typing import Any

from . import wire
from .isolation import Isolation, IsolationError, apply



#: the modules :meth:`Host.start` imports before the process confines itself
PRELOAD = ("encodings.idna", "encodings.ascii", "encodings.latin_1", "devices.plugins", "devices.drivers",
           "firmware_bridge.transport", "importlib.metadata", "email.parser", "email.feedparser")
#: imported with :data:`PRELOAD` for a device at a ``usb://`` selector or a plugin (the built-in
#: driver over a serial port, a pty or TCP never loads pyusb)
PRELOAD_USB = "firmware_bridge.usb"


class _Refused(Exception):
    """The driver process's loader refuses the driver, in its own words (no driver code's
    text): sent to the table as a :class:`~devices.contract.DriverError`."""

class DeviceOpener:
    """Its device's node, opened by the table and passed over (docs/drivers.md, "What a
    driver can reach"): the privilege separation of OpenSSH's monitor. ``sock``: a
    ``SOCK_SEQPACKET`` socket to the table; ``url``: the one path it answers for. Each
    call asks the table once; the table opens that node (a character device only) and
    sends its descriptor (SCM_RIGHTS), or its errno. Called with any other path it
    raises ``PermissionError``; the table gone: ``OSError`` (EIO)."""

    def __init__(self, sock: socket.socket, url: str) -> None:
        self.sock = sock
        self.url = url
        self._lock = threading.Lock()

    def __call__(self, path: str) -> int:
        if path != self.url:
            raise PermissionError(errno.EACCES, f"a driver process opens only its own device ({self.url})")
        with self._lock:
            self.sock.sendall(b"o")
            msg, fds, _flags, _addr = socket.recv_fds(self.sock, 32, 1)
        if fds:
            for extra in fds[1:]:
                os.close(extra)
            return fds[0]
        if not msg:
            raise OSError(errno.EIO, "the table closed its device opener")
        try:
            code = int(msg[1:].decode("ascii"))
        except ValueError:
            code = errno.EIO
        raise OSError(code, os.strerror(code))


class _Reply:
    """A call's reply, queued behind the events the driver delivered before it (:meth:`Host.work`)."""

    def __init__(self, out: dict[str, Any]) -> None:
        self.out = out


class Host:
    """One driver served over one socket (module docstring); ``device_sock``: the table's
    device opener (:class:`DeviceOpener`), or None (its device is opened by path)."""

    def __init__(self, sock: socket.socket, device_sock: socket.socket | None = None) -> None:
        self.sock = sock
        self.device_sock = device_sock
        self.rfile = sock.makefile("rb")
        self._wlock = threading.Lock()
        self.driver: Any = None
        self.name = "?"
        self._resumes: dict[int, "queue.Queue[Any]"] = {}
        self._next_resume = 0
        self._delivered: dict[int, Any] = {}
        self._calls: "queue.Queue[dict[str, Any] | None]" = queue.Queue()

    def send(self, obj: dict[str, Any]) -> None:
        data = wire.encode_line(obj)
        with self._wlock:
            self.sock.sendall(data)

    def read(self) -> dict[str, Any] | None:
        line = self.rfile.readline(wire.MAX_LINE + 1)
        if not line:
            return None
        return wire.decode_line(line)

    # -- start ---------------------------------------------------------------------------------

    def start(self) -> bool:
        """Read ``hello``, confine, load, open; answer ``ready`` or ``refused``."""
        hello = self.read()
        if hello is None or hello.get("t") != "hello":
            return False
        if hello.get("v") != wire.WIRE_VERSION:
            self.send({"t": "refused", "error": {"type": "DriverError", "message":
                       f"driver process speaks wire version {wire.WIRE_VERSION}, the table {hello.get('v')!r}"}})
            return False
        # what this process imports lazily later, imported before the confinement: where the
        # driver's user may not read the interpreter's folder or the table's (a table installed
        # under a private home): codecs (host names, serial text), the table's own loader and
        # drivers (never a plugin's), the metadata reader a plugin's version is read with
        for name in PRELOAD:
            importlib.import_module(name)
        if hello.get("driver") != "spec" or str(hello.get("url", "")).lower().startswith("usb://"):
            importlib.import_module(PRELOAD_USB)  # pyusb: a USB device's, or a plugin's to use

        try:
            keep = (self.sock.fileno(),) + ((self.device_sock.fileno(),) if self.device_sock is not None else ())
            apply(Isolation.from_wire(hello.get("isolation") or {}), keep=keep)
        except (IsolationError, OSError) as exc:
            self.send({"t": "refused", "error": {"type": "DriverError", "message": f"isolation: {exc}"}})
            return False
        if self.device_sock is not None and str(hello.get("url", "")).startswith("/"):
            from firmware_bridge.transport import set_device_opener

            set_device_opener(DeviceOpener(self.device_sock, str(hello["url"])))
        # the table's lines are read from now on: a driver's open asks the journal's cursor (resume)
        self._reader = threading.Thread(target=self._read_loop, name="apart-table", daemon=True)
        self._reader.start()
        try:
            self._open(hello)
        except _Refused as exc:
            self.send({"t": "refused", "error": {"type": "DriverError", "message": str(exc)}})
            return False
        except BaseException as exc:  # noqa: BLE001 - any failure of driver code goes back to the table
            self.send({"t": "refused", "error": wire.to_error(exc) if not isinstance(exc, ImportError) else
                       {"type": "DriverError", "message": f"driver failed to load: {type(exc).__name__}: {exc}"}})
            return False
        return not hello.get("check")

    def _load(self, driver: str, kind: Any, paths: list[str]) -> tuple[Any, str, str]:
        from devices import plugins  # the loader: imports the driver's code (in this process only)

        for p in reversed(paths):
            if p not in sys.path:
                sys.path.insert(0, p)
        if ":" not in driver:
            plugin = plugins.load_plugin(driver, kind)
            if driver == plugins.SPEC.name:
                return plugin, plugins.SPEC.package, _version("threecard-table")
            from importlib.metadata import entry_points

            from devices.contract import ENTRY_POINT_GROUP

            eps = list(entry_points(group=ENTRY_POINT_GROUP, name=driver))
            dist = getattr(eps[0], "dist", None) if eps else None
            return plugin, (dist.name if dist else driver), (dist.version if dist else "unknown")
        module, _, attr = driver.partition(":")
        plugin = getattr(importlib.import_module(module), attr)
        if isinstance(plugin, type):
            plugin = plugin()
        plugins.check_plugin(plugin, getattr(plugin, "name", driver), module, kind)
        top = module.split(".")[0]
        return plugin, top, str(getattr(plugin, "version", None) or getattr(sys.modules[top], "__version__",
                                                                             "unknown"))

    def _prepare(self, hello: dict[str, Any]) -> tuple[Any, Any, dict[str, Any], Any, str, str]:
        """Load the driver and check its options and capabilities as :func:`devices.plugins.prepare`.
        Returns (plugin, kind, options, declared capabilities, package, version)."""
        from devices.contract import DriverError, DriverKind, DriverOptionError

        kind = DriverKind(hello["kind"])
        import site

        for d in hello.get("sitedirs") or []:  # confined by now: their *.pth files run here, never before
            if isinstance(d, str):
                site.addsitedir(d)
        for p in hello.get("syspath") or []:  # the table's environment: where its drivers are installed
            if isinstance(p, str) and p not in sys.path:
                sys.path.append(p)
        plugin, package, version = self._load(str(hello["driver"]), kind, list(hello.get("path") or []))
        options = dict(hello.get("options") or {})
        unknown = sorted(set(options) - set(plugin.option_keys))
        if unknown:
            allowed = ", ".join(sorted(plugin.option_keys)) or "none"
            raise DriverOptionError(f"devices.{kind}.{unknown[0]}", f"not an option of driver {hello['driver']!r} "
                                    f"(its options: {allowed})")
        plugin.check_options(kind, options)
        from devices import plugins

        try:
            declared = plugins.declared(plugin, str(hello["driver"]), kind, options)
        except DriverError as exc:  # the loader's own words (the entry point, the rule): sent as they are
            raise _Refused(str(exc)) from None
        return plugin, kind, options, declared, package, version

    def _open(self, hello: dict[str, Any]) -> None:
        from devices.contract import OpenRequest

        self.name = str(hello["name"])
        plugin, kind, options, declared, package, version = self._prepare(hello)
        about = {"name": str(getattr(plugin, "name", hello["driver"])), "package": package, "version": version,
                 "contract_version": plugin.contract_version, "declared": wire.to_capabilities(declared)}
        if hello.get("check"):  # a config check: loaded and checked, nothing opened
            self.send({"t": "checked", **about})
            return
        local: "queue.Queue[Any]" = queue.Queue(maxsize=int(hello.get("queue", 256)))
        trace = self._trace if hello.get("trace") else None
        request = OpenRequest(kind, str(hello["url"]), self.name, local, options=options,
                              link_config=wire.from_link_config(hello.get("link_config") or {}),
                              ack_on_delivery=bool(hello.get("ack_on_delivery")), resume=self._resume,
                              extras={"frame_trace": trace} if trace else {})
        self.driver = plugin.open(request)
        self.local = local
        self.send({"t": "ready", **about,
                   "ops": sorted(op for op in wire.CALLS if callable(getattr(self.driver, op, None))),
                   "link": self.snapshot()})

    def snapshot(self) -> dict[str, Any]:
        """The link as the table shows it: state, identity, the driver's capabilities now."""
        link = self.driver.link
        caps = getattr(self.driver, "capabilities", None)
        errors = getattr(link, "frame_errors", 0)
        return {"state": getattr(link.state, "value", str(link.state)), "identity": wire.to_identity(link.identity),
                "caps": wire.to_capabilities(caps) if caps is not None else None,
                "frame_errors": errors if isinstance(errors, int) and not isinstance(errors, bool) else 0}

    # -- what the driver calls back ------------------------------------------------------------

    def _resume(self, ident: Any) -> int | None:
        """The table's journal cursor for ``ident`` (``OpenRequest.resume``), asked over the wire."""
        box: "queue.Queue[Any]" = queue.Queue(1)
        with self._wlock:
            self._next_resume += 1
            rid = self._next_resume
            self._resumes[rid] = box
        self.send({"t": "resume", "id": rid, "identity": wire.to_identity(ident)})
        try:
            seq = box.get(timeout=30)
        except queue.Empty:
            return None
        finally:
            self._resumes.pop(rid, None)
        return seq if isinstance(seq, int) else None

    def _trace(self, direction: str, frame: bytes) -> None:
        self.send({"t": "trace", "dir": direction, "hex": frame.hex()})

    # -- serving -------------------------------------------------------------------------------

    #: how often the link's state is compared with what the table was last told (s): a link
    #: that comes up after its notice went, or noise counted with no event after it, reaches
    #: the table within this, not only with the device's next event (docs/drivers.md)
    LINK_WATCH_S = 0.2

    def pump(self) -> None:
        """The driver's events to the table, as they come, and the calls' replies behind them;
        between them, the link's state (``link``) whenever it differs from what the table was
        last told. A driver that delivers what is no device event, or whose link cannot be
        read, ends this process's connection at once (the table starts the driver again):
        the replies go through here, so a pump ended any other way would leave every call
        to its deadline."""
        try:
            self._pump()
        except Exception:  # noqa: BLE001 - the driver's fault: its process ends, never waits
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _pump(self) -> None:
        told: dict[str, Any] | None = None
        while True:
            try:
                ev = self.local.get(timeout=self.LINK_WATCH_S)
            except queue.Empty:
                snap = self.snapshot()
                if snap != told:
                    try:
                        self.send({"t": "link", "link": snap})
                    except OSError:
                        return
                    told = snap
                continue
            if isinstance(ev, _Reply):  # after every event delivered before the call returned
                # the link as it is now, not as it was when the call returned: the events sent
                # before the reply told the table newer, and what the table was told last is
                # what the watch compares with (an older state sent last would stay the table's)
                ev.out["link"] = told = self.snapshot()
                try:
                    self.send(ev.out)
                except OSError:
                    return
                continue
            if ev.seq >= 0:
                self._delivered[ev.seq] = ev
                if len(self._delivered) > 512:
                    self._delivered.pop(next(iter(self._delivered)))
            told = self.snapshot()
            try:
                self.send({"t": "event", "ev": wire.to_event(ev), "link": told})
            except OSError:
                return

    def work(self) -> None:
        """The table's calls, one at a time."""
        while True:
            call = self._calls.get()
            if call is None:
                return
            op, cid = call.get("op"), call.get("id")
            try:
                if op not in wire.CALLS:
                    raise wire.WireError(f"no call {op!r}")
                if op == "open_shuffle":
                    value: Any = self.driver.open_shuffle(bytes.fromhex(str(call["args"]["commitment"])))
                else:
                    value = getattr(self.driver, op)()
                out = {"t": "reply", "id": cid, "value": wire.to_message(value) if value is not None else None}
            except BaseException as exc:  # noqa: BLE001 - a driver's failure is the table's device fault
                out = {"t": "reply", "id": cid, "error": wire.to_error(exc)}
            # sent by the pump (with the link as it is then), behind the events the driver
            # delivered before it returned (its queue is bounded: waited for, as the pump empties it)
            self.local.put(_Reply(out))

    def serve(self) -> None:
        """Serve the driver until the table closes the socket (or says ``close``)."""
        threading.Thread(target=self.pump, name="apart-events", daemon=True).start()
        threading.Thread(target=self.work, name="apart-calls", daemon=True).start()
        self._reader.join()
        self._calls.put(None)
        # the table is gone or ended this process: close the driver, but a driver hung in a call
        # may never let go, and the process ends anyway (the table started or will start another)
        closer = threading.Thread(target=self._close_driver, name="apart-close", daemon=True)
        closer.start()
        closer.join(timeout=2.0)

    def _close_driver(self) -> None:
        try:
            self.driver.close()
        except Exception:  # noqa: BLE001 - closing a driver that failed: nothing more to do
            pass

    def _read_loop(self) -> None:
        while True:
            try:
                msg = self.read()
            except (wire.WireError, OSError):
                msg = None
            if msg is None or msg["t"] == "close":
                break
            t = msg["t"]
            if t == "call":
                self._calls.put(msg)
            elif t == "ack":
                ev = self._delivered.get(msg.get("seq", -1))
                if ev is not None and self.driver is not None and ev.boot_id == msg.get("boot"):
                    try:
                        self.driver.link.acknowledge(ev)
                    except Exception:  # noqa: BLE001 - the device gone: it resends, the table's cursor dedups
                        pass
            elif t == "resume_reply":
                box = self._resumes.get(msg.get("id", -1))
                if box is not None:
                    box.put(msg.get("seq"))


def _version(dist: str) -> str:
    try:
        return dist_version(dist)
    except PackageNotFoundError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    """Serve one driver on the socket at ``--fd``; 0 when the table closed it, 1 when the
    driver could not be started (the table was told why)."""
    ap = argparse.ArgumentParser(prog="python -m devices.apart.host", description=__doc__.splitlines()[0])
    how = ap.add_mutually_exclusive_group(required=True)
    how.add_argument("--fd", type=int, help="the descriptor of this process's socket to the table (the table "
                                            "started this process)")
    how.add_argument("--listen-fd", type=int, help="a listening socket (systemd's socket activation, "
                                                   "deploy/threecard-driver@.socket): serve the first table that "
                                                   "connects, then end")
    ap.add_argument("--device-fd", type=int, help="a socket to the table's device opener: the device's node is "
                                                  "opened by the table and passed over (SCM_RIGHTS)")
    a = ap.parse_args(argv)
    if a.listen_fd is not None:
        with socket.socket(fileno=a.listen_fd) as listener:
            sock, _ = listener.accept()
    else:
        sock = socket.socket(fileno=a.fd)
    device_sock = socket.socket(fileno=a.device_fd) if a.device_fd is not None else None
    host = Host(sock, device_sock)
    if not host.start():
        return 1
    host.serve()
    return 0


if __name__ == "__main__":
    os._exit(main())  # no interpreter teardown: a driver's threads may be stuck in its device
