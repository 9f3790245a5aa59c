"""``tablectl`` processes started warm: a test that starts the controller a hundred times
(the crash test: start, SIGKILL, start again) pays Python's start-up and the imports of
``tablectl run`` (~0.3-0.5 s of CPU apiece, numpy, cryptography, click...) once.

:class:`WarmStarter` runs one server process that imports ``tablectl``'s modules and then
only forks: for each :meth:`WarmStarter.start` a fresh child runs ``tablectl ARGS`` from
``table.cli.main``, exactly as the console script does (``sys.exit(main())``), in a process
of its own that a test can SIGKILL. Nothing of the product is replaced or skipped: the child
is a real ``tablectl`` process, its stderr a pipe the test reads, its exit status reported
as :class:`subprocess.Popen` reports it (``-9`` for a SIGKILL).

The server is single-threaded (a fork never copies a held lock); each start forks a small
keeper that forks the controller, sends its pid (and a pidfd, so a signal can never reach
a reused pid) and then its exit status over a socket of the test's own. Every process is
waited for by its parent, so the children's CPU time adds up in the test's as a
subprocess's does.
"""

from __future__ import annotations

import array
import json
import os
import signal
import socket
import subprocess
import sys
from typing import IO

#: what ``tablectl run`` imports, imported once in the server
PRELOAD = ("table.cli", "table.cli.run", "table.cli.options", "table.controller", "table.day.day_report",
           "table.interfaces.auth", "table.interfaces.control_socket", "table.interfaces.terminal",
           "table.recovery", "table.journal", "devices.drivers", "structlog", "click",
           # and what it imports as it runs (its assembly, drivers apart, front doors, remote dealer)
           "table.assembly", "devices.apart.choose", "table.hil.remote_dealer", "table.interfaces.audit_view",
           "table.interfaces.day_view", "table.interfaces.event_socket", "table.interfaces.history",
           "table.interfaces.mqtt", "table.shuffle_check", "table.day.report_cache", "simulators.standalone",
           "protocols.deck_text", "concurrent.futures.thread", "email.parser")

_SERVER = r'''
import array, importlib, json, os, signal, socket, sys

control = socket.socket(fileno=int(sys.argv[1]))
sys.path[0] = os.path.dirname(sys.executable)  # as the tablectl console script has it (not the cwd of -c)
for name in sys.argv[2:]:
    try:
        importlib.import_module(name)
    except ImportError:
        pass  # a module renamed since: the child imports what it needs itself
control.sendall(b"ready")


def receive():
    fds = array.array("i")
    msg, anc, _, _ = control.recvmsg(1 << 16, socket.CMSG_SPACE(2 * fds.itemsize))  # one start a message
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
    return msg, list(fds)


def run_child(args, err_fd):
    """In the controller's process: tablectl ARGS, stdout to /dev/null, stderr to err_fd.
    sys.stdout and sys.stderr stay the objects the interpreter made (their buffering as a
    fresh interpreter's would be); only the descriptors under them change."""
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.dup2(err_fd, 2)
    os.closerange(3, 1 << 16)
    sys.argv = ["tablectl", *args]
    from table.cli import main
    sys.exit(main())  # as the console script does: SystemExit unwinds to the interpreter's exit


def keeper(args, status, err_fd):
    """Forks the controller, sends its pid (and a pidfd), waits, sends its exit status."""
    pid = os.fork()
    if pid == 0:
        status.close()
        run_child(args, err_fd)
    os.close(err_fd)
    fds = []
    try:
        fds = [os.pidfd_open(pid)]
    except (AttributeError, OSError):
        pass
    status.sendmsg([json.dumps({"pid": pid}).encode()],
                   [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else [])
    for fd in fds:
        os.close(fd)
    _, code, usage = os.wait4(pid, 0)
    status.sendall(json.dumps({"returncode": os.waitstatus_to_exitcode(code),
                               "cpu_s": usage.ru_utime + usage.ru_stime}).encode())
    os._exit(0)


keepers = set()
while True:
    msg, fds = receive()
    for pid in list(keepers):  # reaped (and their CPU time counted, as a subprocess's is)
        if os.waitpid(pid, os.WNOHANG)[0]:
            keepers.discard(pid)
    if not msg:
        break
    args = json.loads(msg)
    err_fd, status_fd = fds
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        control.close()
        keeper(args, socket.socket(fileno=status_fd), err_fd)
    keepers.add(pid)
    os.close(err_fd)
    os.close(status_fd)
for pid in keepers:
    os.waitpid(pid, 0)
'''


class WarmProcess:
    """One ``tablectl`` child of a :class:`WarmStarter`, with the part of
    :class:`subprocess.Popen` the tests use: ``stderr`` (text lines), ``pid``,
    ``returncode``, :meth:`poll`, :meth:`wait`, :meth:`send_signal`, :meth:`kill`."""

    def __init__(self, status: socket.socket, stderr: IO[str]) -> None:
        self._status = status  # SOCK_SEQPACKET: the pid (with a pidfd), then the exit status
        self.stderr = stderr
        self.returncode: int | None = None
        #: the CPU time (user + system, s) the child used, once it ended
        self.cpu_s: float | None = None
        self._pidfd: int | None = None
        fds = array.array("i")
        msg, anc, _, _ = status.recvmsg(4096, socket.CMSG_SPACE(fds.itemsize))
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
        if fds:
            self._pidfd = fds[0]
        if not msg:
            self.close()
            raise RuntimeError("the warm starter could not start tablectl")
        self.pid = int(json.loads(msg)["pid"])

    def _read_status(self, timeout: float | None) -> None:
        if self.returncode is not None:
            return
        self._status.settimeout(timeout)
        try:
            msg = self._status.recv(4096)
        except (TimeoutError, BlockingIOError, socket.timeout):
            return
        if not msg:
            raise RuntimeError(f"the warm starter's keeper of pid {self.pid} went away")
        end = json.loads(msg)
        self.returncode = int(end["returncode"])
        self.cpu_s = float(end["cpu_s"])
        self._close_pidfd()

    def poll(self) -> int | None:
        self._read_status(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self._read_status(timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(f"tablectl (pid {self.pid})", timeout or 0)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """``sig`` to the child while it lives (through its pidfd: never to a reused pid)."""
        if self.poll() is not None:
            return
        try:
            if self._pidfd is not None:
                signal.pidfd_send_signal(self._pidfd, sig)
            else:
                os.kill(self.pid, sig)
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _close_pidfd(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    def close(self) -> None:
        """Release the status socket (after :meth:`wait`) and the stderr pipe."""
        self._close_pidfd()
        self._status.close()
        self.stderr.close()


class WarmStarter:
    """A server process that has imported ``tablectl``'s modules (:data:`PRELOAD`);
    :meth:`start` forks a ``tablectl ARGS`` from it. A context manager: the server
    ends with it (children still running are the test's to end)."""

    def __init__(self, preload: tuple[str, ...] = PRELOAD) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._control = ours
        # numpy's OpenBLAS starts no thread pool in the server: a fork copies only the forking thread
        env = {**os.environ, "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")}
        self._server = subprocess.Popen([sys.executable, "-c", _SERVER, str(theirs.fileno()), *preload],
                                        pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, env=env)
        theirs.close()
        ready = ours.recv(16)
        if ready != b"ready":
            self.close()
            raise RuntimeError("the warm starter did not start")

    def start(self, args: list[str]) -> WarmProcess:
        """``tablectl ARGS`` in a new process: stdout to /dev/null, stderr a text pipe."""
        read_end, write_end = os.pipe()
        status_ours, status_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._control.sendmsg([json.dumps(list(args)).encode()],
                                  [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                    array.array("i", [write_end, status_theirs.fileno()]))])
        finally:
            os.close(write_end)
            status_theirs.close()
        return WarmProcess(status_ours, os.fdopen(read_end, "r"))

    def close(self) -> None:
        self._control.close()  # the server reads EOF and ends
        try:
            self._server.wait(10)
        except subprocess.TimeoutExpired:
            self._server.kill()
            self._server.wait(10)

    def __enter__(self) -> "WarmStarter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
