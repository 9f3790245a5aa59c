"""Readers of the journal across a gaming day's close (issue 27, point 5): the day's close
renames the next day's segment in at the journal's path, and whoever follows the
journal goes on there without a gap or a repeat.

* ``tablectl events tail --journal J --follow`` (its own process, following the file as
  the controller writes it) prints the closed day's last events and the next day's
  first, numbered on; with ``--archive`` a tail from the start reads yesterday's
  events from the archive and equals what the follower printed.
* The MQTT publisher, whose state file holds the last event the broker acknowledged:
  with the broker down across the close and the table restarted on the new segment,
  it resumes from that event, in yesterday's archive, and sends every event once up to
  today's head; its state file follows on into the new day.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading

import pytest

from console_helpers import wait_until
from mqtt_broker import Broker, mosquitto_path
from table.events import EventLog
from table.interfaces.mqtt import MqttPublisher
from table.config import MqttSettings
from tests.journal_rows import reader
from tests.day_helpers import START, WallClock, day_start, day_table
from tests.test_e2e_run import tablectl


def _new_segment_first_event(path) -> int:
    """The event seq the live segment's events go on after (its first entry says)."""
    con = reader(path)
    try:
        (body,) = con.execute("SELECT body FROM entries ORDER BY seq LIMIT 1").fetchone()
    finally:
        con.close()
    return json.loads(body)["previous"]["events"]


class Tail:
    """``tablectl events tail --journal J --follow`` in its own process; each line it
    prints is read by a thread into a queue."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(tablectl() + ["events", "tail", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue = queue.Queue()
        self.events: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))

    def until(self, seq: int, timeout_s: float = 60) -> list[dict]:
        """Read what it prints until an event numbered ``seq`` or more."""
        while not self.events or self.events[-1]["seq"] < seq:
            try:
                self.events.append(self.lines.get(timeout=timeout_s))
            except queue.Empty:
                raise AssertionError(f"the tail printed nothing past {self.events[-1:]} (waiting for {seq}); "
                                     f"it is {'running' if self.proc.poll() is None else 'gone'}: "
                                     f"{self.proc.stderr.read() if self.proc.poll() is not None else ''}")
        return self.events

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        self.proc.stdout.close()
        self.proc.stderr.close()


def test_events_tail_follows_the_journal_into_the_next_days_segment(tmp_path):
    clock = WallClock(START)
    path, archive = tmp_path / "journal.sqlite3", tmp_path / "archive"
    with day_table(tmp_path, clock) as ctl:
        ctl.play_round()
        tail = Tail("--journal", str(path), "--since", "0", "--follow")
        try:
            with EventLog(path, "t1") as log:
                tail.until(log.catch_up())  # it follows day 1
            ctl.play_round()
            clock.set(day_start(1))
            ctl.play_round()  # day 1 closes, archived; the next day's segment takes the journal's place
            ctl.play_round()
            with EventLog(path, "t1") as log:
                head = log.catch_up()
            printed = tail.until(head)
        finally:
            tail.stop()
    seqs = [e["seq"] for e in printed]
    assert seqs == list(range(1, head + 1)), seqs  # across the close: no gap, no repeat
    boundary = _new_segment_first_event(path)
    assert 1 < boundary < head  # events of both days were followed
    assert [e["type"] for e in printed if e["seq"] > boundary][:1] == ["checkpoint"]  # the new segment's own
    # From the start with the archive: yesterday's events read from it, the same as followed live.
    whole = subprocess.run(tablectl() + ["events", "tail", "--journal", str(path), "--archive", str(archive),
                                         "--since", "0"], capture_output=True, text=True, timeout=60)
    assert whole.returncode == 0, whole.stderr
    assert [json.loads(line) for line in whole.stdout.splitlines()] == [e for e in printed if e["seq"] > boundary]
    # "--since 0" is the live segment's start; a seq before it reads the archive
    back = subprocess.run(tablectl() + ["events", "tail", "--journal", str(path), "--archive", str(archive),
                                        "--since", "0", "--count", "3"], capture_output=True, text=True, timeout=60)
    assert [json.loads(line)["seq"] for line in back.stdout.splitlines()] == [boundary + 1, boundary + 2,
                                                                              boundary + 3]
    older = subprocess.run(tablectl() + ["events", "tail", "--journal", str(path), "--archive", str(archive),
                                         "--since", "1"], capture_output=True, text=True, timeout=60)
    assert older.returncode == 0, older.stderr
    assert [json.loads(line) for line in older.stdout.splitlines()] == printed[1:]
    refused = subprocess.run(tablectl() + ["events", "tail", "--journal", str(path), "--since", "1"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "archive" in refused.stderr, refused.stderr


@pytest.mark.skipif(mosquitto_path() is None, reason="mosquitto not installed (.ci/run installs it)")
def test_mqtt_resumes_from_its_state_file_across_the_days_close_and_a_restart(tmp_path):
    from protocols.cards import BackColour
    from simulators.table import SimulatedTable
    from table.keys import save
    from test_mqtt import KEY, Subscriber

    save(KEY, tmp_path / "table.key")  # the table signs with the key the floor's subscriber checks
    broker = Broker(tmp_path / "broker").start()
    clock = WallClock(START)
    path, archive, state = tmp_path / "journal.sqlite3", tmp_path / "archive", tmp_path / "mqtt-state.json"
    settings = MqttSettings(port=broker.port, floor="f1", state_path=state, keepalive_s=5, table_key=KEY)
    sub = Subscriber(broker.port, "threecard/f1/t1/events", client_id="day-floor")
    try:
        with SimulatedTable((BackColour.RED, BackColour.BLUE), seed=3) as sim:
            with day_table(tmp_path, clock, sim=sim) as ctl:
                with EventLog(path, "t1", journal=ctl.journal, archive=archive) as log:
                    pub = MqttPublisher(log, settings).start()
                    try:
                        ctl.play_round()
                        assert pub.wait_acked(log.catch_up(), 20)
                        acked_day1 = pub.acked_seq
                        broker.stop()  # the broker is down across the day's close: the publisher falls behind
                        wait_until(lambda: not pub.connected, 20, "the publisher to see the broker gone")
                        ctl.play_round()
                        clock.set(day_start(1))
                        ctl.play_round()  # day 1 closes; its last events were never acknowledged
                        log.catch_up()
                    finally:
                        pub.close()
                boundary = _new_segment_first_event(path)
            assert json.loads(state.read_text())["acked_seq"] == acked_day1 < boundary  # yesterday's, archived
            broker.start()
            with day_table(tmp_path, clock, sim=sim) as ctl:  # the restart, on the new segment
                ctl.play_round()
                with EventLog(path, "t1", journal=ctl.journal, archive=archive) as log:
                    head = log.catch_up()
                    pub = MqttPublisher(log, settings).start()
                    try:
                        assert pub.wait_acked(head, 30), (pub.acked_seq, head)
                    finally:
                        pub.close()
                    expected = list(log.replay(acked_day1))
        assert sub.wait(lambda: {e["seq"] for e in sub.events()} >= set(range(1, head + 1)), 30)
        got = sub.events()
    finally:
        sub.close()
        broker.stop()
    by_seq: dict[int, dict] = {}
    for e in got:
        assert by_seq.setdefault(e["seq"], e) == e  # QoS 1 may repeat: the very same event
    assert sorted(by_seq) == list(range(1, head + 1))
    assert [by_seq[e["seq"]] for e in expected] == expected  # yesterday's rest from the archive, then today's
    assert [e["seq"] for e in expected] == list(range(acked_day1 + 1, head + 1))
    assert head > boundary > acked_day1
    assert json.loads(state.read_text()) == {"table_id": "t1", "acked_seq": head}
