"""Floor telemetry: the table's public events to an MQTT broker (paho-mqtt, optional extra ``mqtt``).

Topics (``{floor}`` and ``{table}`` are the config's ``mqtt.floor`` and ``table.id``)::

    threecard/{floor}/{table}/events   every public event (table.events), QoS 1, not retained
    threecard/{floor}/{table}/status   the table's status, QoS 1, retained
    threecard/{floor}/{table}/checkpoint  the latest signed journal checkpoint, QoS 1, retained (an anchor)

Status payload (``docs/schemas/status-v1.schema.json``)::

    {"schema": "threecard.status/1", "table_id": "pit2-tcp-07", "floor": "pit2",
     "online": true, "ts": "...", "head_seq": 57}

It is published retained on every connect with ``online: true``; the
connection's Last Will is the same topic, retained, with ``online: false``,
so the broker marks the table offline when the controller dies or its link
does; a clean :meth:`MqttPublisher.close` publishes ``online: false`` itself.

Store and forward: events are read from the journal (:class:`table.events.EventLog`),
never kept only in memory. The publisher persists the highest seq up to which
the broker has acknowledged every event (PUBACK, QoS 1) in ``state_path``; while
the broker is unreachable nothing is sent, and once it is back (or after the
controller restarts) publishing resumes from that seq. At most ``window``
events are in flight; paho re-sends those after a reconnect. An event can
therefore reach a subscriber twice (QoS 1 is at-least-once): subscribers
de-duplicate by ``seq``, which is unique and consecutive per table.

Sealing is that of the table-wide stream (58 Pa. Code 816a.1): no card face in
``card_dealt``; seat cards from ``decisions_final``, dealer cards from
``dealer_revealed`` on.
"""

from __future__ import annotations

import datetime as _dt
import json
import threading
from pathlib import Path
from typing import Any

import structlog

from table.config import MqttSettings
from table.events import EventLog
from table.files import write_atomic

log = structlog.get_logger("table.mqtt")

STATUS_SCHEMA = "threecard.status/1"


class MqttUnavailable(RuntimeError):
    """paho-mqtt is not installed: ``pip install 'threecard-table[mqtt]'``."""


def checkpoint_topic(floor: str, table_id: str) -> str:
    """The retained topic holding a table's latest signed journal checkpoint (docs/journal.md)."""
    return f"threecard/{floor}/{table_id}/checkpoint"


def topics(floor: str, table_id: str) -> tuple[str, str]:
    """The (events, status) topics of a table."""
    base = f"threecard/{floor}/{table_id}"
    return f"{base}/events", f"{base}/status"


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


class MqttPublisher:
    """Publishes ``events`` (an :class:`EventLog`) to the broker in ``settings``.

    :meth:`start` returns at once: the connection is made (and remade, with
    backoff 1..30 s) in the background, so a broker that is down at start-up
    delays publication, not the table. Raises :class:`MqttUnavailable` without
    paho-mqtt. ``acked_seq``: every event up to it is acknowledged by the
    broker; ``connected``: the link to the broker is up.
    """

    def __init__(self, events: EventLog, settings: MqttSettings) -> None:
        try:
            import paho.mqtt.client as mqtt
        except ImportError as exc:  # pragma: no cover - the extra is installed in tests
            raise MqttUnavailable("MQTT needs paho-mqtt: pip install 'threecard-table[mqtt]'") from exc
        self._mqtt = mqtt
        self.events = events
        self.settings = settings
        self.table_id = events.table_id
        self.events_topic, self.status_topic = topics(settings.floor, self.table_id)
        self.checkpoint_topic = checkpoint_topic(settings.floor, self.table_id)
        self.state_path = Path(settings.state_path)
        self.acked_seq = self._load_state()
        self.connected = False
        self.published = 0  # PUBLISH packets handed to paho (including after reconnects)
        self._sent = self.acked_seq  # highest seq handed to paho
        self._inflight: dict[int, int] = {}  # mid -> seq
        self._acked: set[int] = set()
        self._early: set[int] = set()  # event mids acknowledged before publish() returned
        self._status_mids: set[int] = set()
        self._cv = threading.Condition()
        self._stop = threading.Event()
        self._dirty = False
        self._thread: threading.Thread | None = None
        cid = settings.client_id or f"threecard-{self.table_id}"
        self._client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=cid, clean_session=True)
        self._client.max_inflight_messages_set(settings.window)
        self._client.reconnect_delay_set(1, 30)
        if settings.username:
            self._client.username_pw_set(settings.username, settings.password)
        self._client.will_set(self.status_topic, self._status(False), qos=1, retain=True)
        self._client.on_connect = self._on_connect
        self._client.on_disconnect = self._on_disconnect
        self._client.on_publish = self._on_publish

    # -- state -----------------------------------------------------------------------------

    def _load_state(self) -> int:
        try:
            data = json.loads(self.state_path.read_text())
        except FileNotFoundError:
            return 0
        except (OSError, ValueError) as exc:
            log.warning("mqtt_state_unreadable", path=str(self.state_path), error=str(exc))
            return 0
        if data.get("table_id") != self.table_id:
            return 0
        return min(int(data.get("acked_seq", 0)), self.events.head)

    def _save_state(self) -> None:
        """Write the acknowledged seq (atomically: temp file + rename)."""
        with self._cv:
            if not self._dirty:
                return
            data = {"table_id": self.table_id, "acked_seq": self.acked_seq}
            self._dirty = False
        # 0600, through an O_EXCL|O_NOFOLLOW temporary: a symlink planted beside it is refused.
        write_atomic(self.state_path, json.dumps(data).encode(), mode=0o600)

    def _status(self, online: bool) -> str:
        return json.dumps({"schema": STATUS_SCHEMA, "table_id": self.table_id, "floor": self.settings.floor,
                           "online": online, "ts": _now(), "head_seq": self.events.head})

    # -- paho callbacks (paho's network thread) ----------------------------------------------

    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any = None) -> None:
        if reason.is_failure:
            log.warning("mqtt_connect_refused", reason=str(reason))
            return
        info = client.publish(self.status_topic, self._status(True), qos=1, retain=True)
        with self._cv:  # its PUBACK is handled later in this same thread: register it first
            self._status_mids.add(info.mid)
            self.connected = True
            self._cv.notify_all()
        log.info("mqtt_connected", host=self.settings.host, port=self.settings.port, acked_seq=self.acked_seq)

    def _on_disconnect(self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any = None) -> None:
        with self._cv:
            self.connected = False
        if not self._stop.is_set():
            log.warning("mqtt_disconnected", reason=str(reason), acked_seq=self.acked_seq)

    def _on_publish(self, client: Any, userdata: Any, mid: int, reason: Any = None, props: Any = None) -> None:
        with self._cv:
            if mid in self._status_mids:
                self._status_mids.discard(mid)
                return
            seq = self._inflight.pop(mid, None)
            if seq is None:  # an event's PUBACK before its publish() returned
                self._early.add(mid)
                return
            self._ack(seq)

    def _ack(self, seq: int) -> None:
        """Record the broker's PUBACK of ``seq`` (caller holds ``_cv``)."""
        self._acked.add(seq)
        while self.acked_seq + 1 in self._acked:
            self.acked_seq += 1
            self._acked.discard(self.acked_seq)
            self._dirty = True
        self._cv.notify_all()

    # -- the forwarding loop ------------------------------------------------------------------

    def start(self) -> "MqttPublisher":
        """Connect in the background and start forwarding from ``acked_seq``."""
        self._client.connect_async(self.settings.host, self.settings.port, keepalive=self.settings.keepalive_s)
        self._client.loop_start()
        self.events.add_listener(self._wake)
        self._thread = threading.Thread(target=self._forward, name="mqtt-forward", daemon=True)
        self._thread.start()
        return self

    def _wake(self, _derived: Any = None) -> None:
        with self._cv:
            self._cv.notify_all()

    def _forward(self) -> None:
        last_save = 0.0
        import time

        while not self._stop.is_set():
            with self._cv:
                room = self.settings.window - len(self._inflight)
                ready = self.connected and room > 0 and self._sent < self.events.head
                if not ready:
                    self._cv.wait(0.2)
                after = self._sent
            if time.monotonic() - last_save > 0.5:
                self._save_state()
                last_save = time.monotonic()
            if not ready:
                continue
            for ev in self.events.replay(after, after + room):
                if self._stop.is_set() or not self.connected:
                    break
                payload = json.dumps(ev, separators=(",", ":"))
                if ev["type"] == "checkpoint":  # the table's latest signed checkpoint: an anchor the floor keeps
                    self._client.publish(self.checkpoint_topic, json.dumps(ev["data"], separators=(",", ":")),
                                         qos=1, retain=True)
                # Not under self._cv: paho calls on_publish holding its own message lock.
                info = self._client.publish(self.events_topic, payload, qos=1)
                if info.rc != self._mqtt.MQTT_ERR_SUCCESS and info.rc != self._mqtt.MQTT_ERR_NO_CONN:
                    log.warning("mqtt_publish_failed", seq=ev["seq"], rc=info.rc)
                    break
                with self._cv:
                    self._sent = ev["seq"]
                    self.published += 1
                    if info.mid in self._early:  # acknowledged before publish() returned
                        self._early.discard(info.mid)
                        self._ack(ev["seq"])
                    else:
                        self._inflight[info.mid] = ev["seq"]
        self._save_state()

    def wait_acked(self, seq: int, timeout_s: float) -> bool:
        """Wait until the broker has acknowledged every event up to ``seq``."""
        import time

        deadline = time.monotonic() + timeout_s
        with self._cv:
            while self.acked_seq < seq:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(min(left, 0.2))
        return True

    def close(self, timeout_s: float = 5.0) -> None:
        """Give the broker up to ``timeout_s`` to acknowledge every event the journal
        holds (when connected; what is left goes out after the next start), publish
        the retained ``online: false`` status, disconnect, stop the threads and save
        the acknowledged seq."""
        if self.connected:
            try:
                self.wait_acked(self.events.catch_up(timeout_s), timeout_s)
            except TimeoutError:
                pass
        self.events.remove_listener(self._wake)
        self._stop.set()
        self._wake()
        if self._thread is not None:
            self._thread.join(timeout_s)
        if self.connected:
            try:
                info = self._client.publish(self.status_topic, self._status(False), qos=1, retain=True)
                info.wait_for_publish(timeout_s)
            except (RuntimeError, ValueError) as exc:
                log.warning("mqtt_offline_status_failed", error=str(exc))
        self._client.disconnect()
        self._client.loop_stop()
        # paho closes its wake-up socketpair only when the client is garbage-collected:
        # close it now, so a stopped publisher holds no descriptor.
        reset = getattr(self._client, "_reset_sockets", None)
        if reset is not None:
            reset()
        with self._cv:
            self._dirty = True
        self._save_state()
