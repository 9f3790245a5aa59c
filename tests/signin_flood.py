"""A sign-in flood at a paced rate (issue 24, point 8): ``python tests/signin_flood.py PORT
--rate 1000 --seconds 30 --addresses 50 --person S-17`` prints one JSON object.

The attacker holds one keep-alive HTTP connection from each of ``--addresses``
loopback addresses (127.0.0.2, 127.0.0.3, ...: origins other than the table's own
screen) and writes ``POST /api/v1/session`` with a wrong PIN for ``--person`` at
``--rate`` requests a second in all, open loop (pipelined: it does not wait for
an answer before the next), for ``--seconds``. Figures: requests sent, answers by
HTTP status, the seconds the sending took and the last answer came, connections
the server closed (reopened at once). Run in its own process so the flood does
not share an interpreter lock with whoever measures the table meanwhile.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import sys
import time

TICK_S = 0.005


def _request(person: str) -> bytes:
    body = json.dumps({"person": person, "pin": "000000"}).encode()
    return (b"POST /api/v1/session HTTP/1.1\r\nhost: table\r\ncontent-type: application/json\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


class Attacker:
    """One address's connection: writes what it is given, counts what comes back."""

    def __init__(self, port: int, source: str, answers: collections.Counter) -> None:
        self.port, self.source, self.answers = port, source, answers
        self.writer: asyncio.StreamWriter | None = None
        self.task: asyncio.Task | None = None
        self.closed_by_server = 0
        self.last_answer = 0.0

    async def open(self) -> None:
        reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port, local_addr=(self.source, 0))
        self.task = asyncio.get_running_loop().create_task(self._read(reader))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                status = await reader.readline()
                if not status:
                    break
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                await reader.readexactly(length)
                self.answers[int(status.split()[1])] += 1
                self.last_answer = time.monotonic()
        except (ConnectionError, asyncio.IncompleteReadError, ValueError, IndexError):
            pass
        self.closed_by_server += 1
        self.writer = None

    async def send(self, data: bytes) -> None:
        if self.writer is None or self.writer.is_closing():
            await self.open()
        self.writer.write(data)
        if self.writer.transport.get_write_buffer_size() > 1 << 20:
            await self.writer.drain()  # a server a megabyte behind: the flood waits for it


async def flood(port: int, rate: float, seconds: float, addresses: int, person: str) -> dict:
    """Send ``rate`` sign-ins a second for ``seconds`` over ``addresses`` connections; wait
    up to 30 s for the last answers; return the figures (module docstring)."""
    answers: collections.Counter = collections.Counter()
    attackers = [Attacker(port, f"127.0.0.{i + 2}", answers) for i in range(addresses)]
    for a in attackers:
        await a.open()
    req = _request(person)
    sent = 0
    t0 = time.monotonic()
    while (now := time.monotonic()) - t0 < seconds:
        due = int((now - t0) * rate)
        while sent < due:
            await attackers[sent % addresses].send(req)
            sent += 1
        await asyncio.sleep(TICK_S)
    sending_s = time.monotonic() - t0
    deadline = time.monotonic() + 30
    while sum(answers.values()) < sent and time.monotonic() < deadline:
        if all(a.writer is None for a in attackers):
            break
        await asyncio.sleep(0.05)
    last = max(a.last_answer for a in attackers)
    for a in attackers:
        if a.writer is not None:
            a.writer.close()
        if a.task is not None:
            a.task.cancel()
    return {"sent": sent, "sending_s": round(sending_s, 3), "answers": dict(sorted(answers.items())),
            "answered": sum(answers.values()), "last_answer_s": round(last - t0, 3) if last else None,
            "closed_by_server": sum(a.closed_by_server for a in attackers)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("port", type=int)
    p.add_argument("--rate", type=float, default=1000.0)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--addresses", type=int, default=50)
    p.add_argument("--person", default="S-17")
    args = p.parse_args()
    print(json.dumps(asyncio.run(flood(args.port, args.rate, args.seconds, args.addresses, args.person))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
