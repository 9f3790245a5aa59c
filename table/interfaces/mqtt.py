"""Floor telemetry: the table's public events to an MQTT broker (paho-mqtt, optional extra ``mqtt``).

Topics (``{floor}`` and ``{table}`` are the config's ``mqtt.floor`` and ``table.id``)::

    threecard/{floor}/{table}/events   every public event (table.events), QoS 1, not retained
    threecard/{floor}/{table}/status   the table's status, QoS 1, retained

Every message is **signed with the table key** (Ed25519, :mod:`table.keys`), so a
subscriber can reject a message that did not come from the table (a forged
``round_settled``, a retained ``online: true`` published by someone else). The
MQTT payload is an envelope (``docs/schemas/signed-v2.schema.json``)::

    {"schema": "threecard.signed/2", "key_id": "3f2a9c0d1e5b7a68",
     "payload": "{\"schema\":\"threecard.events/1\",\"seq\":17,...}",
     "sig": "<base64 of the Ed25519 signature>"}

``payload`` is the message's JSON text, exactly as signed; the signature is
over ``b"threecard.signed/2\n" + table_id + b"/" + kind + b"\n" + payload``
(UTF-8): what is signed names the table and the message's kind (``events``,
``status``, ``checkpoint``: the topic's last segment), never the broker's topic,
so a message that crossed a bridge adding a prefix (``site-a/threecard/...``)
still verifies, while one moved to another table's topic, or from ``events`` to
``status``, does not. The message inside names its table too (``table_id``,
checked) and carries its own order (an event's ``seq``, a status's ``ts``, a
checkpoint's ``seq``). :func:`verify_message` (and the standalone recipe in
``docs/integration.md``) checks it and returns the message. Envelopes of schema
``threecard.signed/1`` (signed over the whole topic: tables of an earlier
release) are still accepted on an unprefixed ``threecard/FLOOR/TABLE/KIND``
topic. The floor keeps each table's public key (``tablectl audit keygen``
writes ``FILE.pub``).

The status is published again every ``status_interval_s`` with a fresh
``ts``, so a subscriber can refuse a stale ``online: true`` replayed from an
earlier capture. Every connection to the broker has its own ``session`` (random,
made just before each connect and reconnect), carried by each status sent on it.
The Last Will is signed just before the connect too, so its ``ts`` is the connect
time, older than the statuses sent on that connection; it says what it is
(``"will": true`` with the connection's ``session``). :func:`order_status` is the
one rule every subscriber (the floor, the pit view) orders statuses by: a will
of the current connection marks the table offline (never a replay), a status of
a connection whose will was taken is a replay, and the table's next connect (a
new session, a newer ``ts``) brings it back. A will is known to no one but the
broker until the connection dies (it travels in the CONNECT packet), so it cannot
be captured and replayed against a live connection. Credentials: ``username`` with
``password``/``password_file``; TLS with ``ca_file`` and an optional client
certificate. ``deploy/mosquitto-threecard.acl`` lets each table's account
publish only its own topics.

Status payload (``docs/schemas/status-v1.schema.json``)::

    {"schema": "threecard.status/1", "table_id": "pit2-tcp-07", "floor": "pit2",
     "online": true, "ts": "...", "head_seq": 57,
     "table": {"rounds_played": 41, "round": {"number": 42, "state": "dealing"},
               "waiting_for": "the dealer to draw the next card from the shoe",
               "alarms": [{"kind": "held", "text": "..."}],
               "links": {"shuffler": {"up": true, "state": "up"}, "shoe": {...}}}}

``receipt`` (schema 1.3, with ``receipt_source``): the latest floor receipt the journal
holds (:mod:`table.floor_anchor`), presented for the floor to compare with its database.
``table`` (schema 1.1) is :func:`table.interfaces.status_view.floor_status` of the
controller's status, when the publisher is given a ``status_source``: the pit
view shows the step, alarms and link health from it. An ``online: true`` status
is published again as soon as that summary changes (at most every
:data:`STATUS_MIN_INTERVAL_S`), so the floor sees a device go down or a round
held without waiting for ``status_interval_s``.

It is published retained on every connect with ``online: true``; the
connection's Last Will is the same topic, retained, with ``online: false``,
``"will": true`` and the connection's ``session``, so the broker marks the table
offline when the controller dies or its link does: at once when the process is
killed (the kernel closes its TCP connection), within 1.5 x ``keepalive_s`` when
the machine or the network goes away silently (MQTT 3.1.1 section 3.1.2.10); a clean
:meth:`MqttPublisher.close` publishes ``online: false`` itself.

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

import base64
import binascii
import datetime as _dt
import json
import os
import re
import secrets
import ssl
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import structlog
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from table.anchors import refused_anchor
from table.config import MqttSettings
from table.events import EventLog, EventStreamError
from table.files import UnsafeFile, read_regular, write_atomic
from table.keys import TableKey, key_id as key_id_of, verify_signature

log = structlog.get_logger("table.mqtt")

STATUS_SCHEMA = "threecard.status/1"
#: a changed table summary is published at most this often (s)
STATUS_MIN_INTERVAL_S = 0.5
SIGNED_SCHEMA = "threecard.signed/2"
#: the envelope of tables of an earlier release: signed over the whole topic
SIGNED_SCHEMA_V1 = "threecard.signed/1"
_SEGMENT = re.compile(r"^[A-Za-z0-9._-]{1,64}\Z")


class MqttUnavailable(RuntimeError):
    """paho-mqtt is not installed: ``pip install 'threecard-table[mqtt]'``."""


class MqttSetupError(ValueError):
    """The MQTT settings cannot be used: no table key to sign with, an unreadable or
    unsafe password file, unusable TLS files. The message says what to do."""


class ForgedMessage(ValueError):
    """An MQTT message whose signature does not check out (or that is not a signed
    envelope at all): it did not come from the table. The message says why."""


_KEY_IDS: dict[int, tuple[Ed25519PublicKey, str]] = {}


def _key_id(public: Ed25519PublicKey) -> str:
    """:func:`table.keys.key_id` of ``public``, remembered per key object (a floor verifies
    hundreds of messages a second against the same few hundred keys; bounded)."""
    got = _KEY_IDS.get(id(public))
    if got is not None and got[0] is public:
        return got[1]
    if len(_KEY_IDS) >= 4096:
        _KEY_IDS.clear()
    kid = key_id_of(public)
    _KEY_IDS[id(public)] = (public, kid)  # the object is kept: its id is not reused while cached
    return kid


def topic_subject(topic: str) -> tuple[str, str]:
    """``(table_id, kind)`` of a table topic ``[PREFIX/]threecard/FLOOR/TABLE/KIND``: its
    last two segments, whatever prefix a bridge put before them. Raises
    :class:`ForgedMessage` when the topic has no such segments."""
    parts = topic.split("/")
    if len(parts) < 4 or not _SEGMENT.match(parts[-1]) or not _SEGMENT.match(parts[-2]):
        raise ForgedMessage("not a table topic ([PREFIX/]threecard/FLOOR/TABLE/KIND)")
    return parts[-2], parts[-1]


def signing_input(table_id: str, kind: str, payload: str) -> bytes:
    """The bytes a table signs for ``payload``, its message of ``kind`` (``events``,
    ``status``, ``checkpoint``) as table ``table_id``: the table and the message, not the
    broker's topic (a bridge may prefix it)."""
    return SIGNED_SCHEMA.encode() + b"\n" + f"{table_id}/{kind}".encode() + b"\n" + payload.encode()


def sign_message(key: TableKey, topic: str, message: dict[str, Any]) -> str:
    """The signed envelope (JSON text) of ``message`` for ``topic`` (``threecard/FLOOR/TABLE/KIND``:
    what is signed is its table and kind, :func:`signing_input`). Raises :class:`ForgedMessage`
    when ``topic`` is not a table topic."""
    table_id, kind = topic_subject(topic)
    payload = json.dumps(message, separators=(",", ":"))
    sig = base64.b64encode(key.sign(signing_input(table_id, kind, payload))).decode()
    return json.dumps({"schema": SIGNED_SCHEMA, "key_id": key.key_id, "payload": payload, "sig": sig},
                      separators=(",", ":"))


def verify_message(raw: bytes | str, topic: str,
                   keys: Ed25519PublicKey | Mapping[str, Ed25519PublicKey]) -> dict[str, Any]:
    """The message inside the signed envelope ``raw`` received on ``topic``, after checking
    it was signed by the key of the topic's table for the topic's kind of message.

    ``topic``: ``[PREFIX/]threecard/FLOOR/TABLE/KIND`` as received (any prefix a bridge
    added is ignored: the signature covers TABLE and KIND, :func:`signing_input`);
    ``keys``: that table's public key, or table id -> public key for a floor of tables (a
    table's key is good for its own topics only). The message must name the same table
    (``table_id``). Returns the message (a dict). Raises :class:`ForgedMessage` saying why:
    not an envelope, an unknown table, another key, a bad signature (changed, or moved to
    another table's topic or another kind), a message naming another table."""
    table, kind = topic_subject(topic)
    try:
        env = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):  # b"[" * 200_000 nests past the stack
        raise ForgedMessage("not JSON: not a signed table message") from None
    if not isinstance(env, dict) or env.get("schema") not in (SIGNED_SCHEMA, SIGNED_SCHEMA_V1) or set(env) != {
            "schema", "key_id", "payload", "sig"}:
        raise ForgedMessage(f"not a {SIGNED_SCHEMA} envelope")
    kid, payload, sig = env["key_id"], env["payload"], env["sig"]
    if not (isinstance(kid, str) and isinstance(payload, str) and isinstance(sig, str)):
        raise ForgedMessage("envelope members of the wrong type")
    if env["schema"] == SIGNED_SCHEMA:
        signed = signing_input(table, kind, payload)
    else:  # an earlier release signed the whole topic: only an unprefixed one can check out
        parts = topic.split("/")
        if len(parts) != 4 or parts[0] != "threecard":
            raise ForgedMessage(f"a {SIGNED_SCHEMA_V1} message (signed over its topic) on a prefixed topic "
                                "cannot be checked: upgrade the table")
        signed = SIGNED_SCHEMA_V1.encode() + b"\n" + topic.encode() + b"\n" + payload.encode()
    public = keys if isinstance(keys, Ed25519PublicKey) else keys.get(table)
    if public is None:
        raise ForgedMessage(f"no public key for table {table[:32]!r}: this subscriber does not know it")
    if kid != _key_id(public):
        raise ForgedMessage(f"signed with key {kid[:16]!r}, not table {table[:32]}'s key")
    try:
        signature = base64.b64decode(sig, validate=True)
    except (binascii.Error, ValueError):
        raise ForgedMessage("the signature is not base64") from None
    if len(signature) != 64 or not verify_signature(public, signature, signed):
        raise ForgedMessage("bad signature: the message did not come from the table (or was changed, or moved "
                            "from another table's topic or another kind of message)")
    try:
        message = json.loads(payload)
    except (ValueError, RecursionError):
        raise ForgedMessage("the signed payload is not JSON") from None
    if not isinstance(message, dict) or message.get("table_id") != table:
        raise ForgedMessage("the message's table_id is not the topic's table")
    return message


@dataclass(frozen=True)
class StatusMark:
    """Where a table's status stands in its order (:func:`order_status`): its signed
    ``ts`` (aware), the ``session`` of the connection it was sent on (None from tables of
    an earlier release) and whether it is that connection's Last Will (``will``)."""

    ts: _dt.datetime
    session: str | None
    will: bool

    @classmethod
    def of(cls, status: Mapping[str, Any]) -> "StatusMark":
        """The mark of a verified status. Raises :class:`ForgedMessage` for a status without a
        signed ``ts`` with its zone (no table sends one)."""
        try:
            ts = _dt.datetime.fromisoformat(str(status.get("ts")))
        except ValueError:
            ts = None
        if ts is None or ts.tzinfo is None:
            raise ForgedMessage("a status without a signed ts with its zone")
        session = status.get("session")
        session = session[:64] if isinstance(session, str) and session else None
        return cls(ts, session, status.get("will") is True and status.get("online") is False and session is not None)


def order_status(last: StatusMark | None, status: Mapping[str, Any]) -> tuple[str, StatusMark]:
    """What a subscriber does with the verified ``status`` of a table whose last status
    taken is ``last`` (None: none yet): ``("take", mark)`` (newer: show it, remember
    ``mark``), ``("again", mark)`` (the one taken, again: the retained one after a
    restart, a QoS 1 redelivery) or ``("earlier_will", mark)`` (the Last Will of a
    connection the table has since replaced: genuine, and nothing to show). Raises
    :class:`ForgedMessage` for a replay: a status older than the last one taken, or any
    status but the will of a connection whose will was taken (its statuses all came
    before it died). The rule (module docstring):

    * a will (``online: false``, ``will: true``, its connection's ``session``, ``ts`` =
      connect time) of the connection of ``last``, or not older than ``last``, is taken:
      the table is offline, whatever statuses that connection sent after its connect;
    * a will of an older connection is ``earlier_will``;
    * any other status is taken when newer than ``last`` (so the table's next connect,
      newer, brings it back) and is a replay otherwise, or when ``last`` is the will of
      its own connection."""
    mark = StatusMark.of(status)
    if last is None:
        return "take", mark
    if mark.will:
        if last.will and last.session == mark.session:
            return "again", mark
        if last.session == mark.session or mark.ts >= last.ts:
            return "take", mark
        return "earlier_will", mark
    if last.will and mark.session is not None and mark.session == last.session:
        raise ForgedMessage("a status of a connection whose last will was taken (the table died after it): "
                            "a replay")
    if mark.ts == last.ts and mark.session == last.session:
        return "again", mark
    if mark.ts <= last.ts:
        raise ForgedMessage("a status older than the last one taken from the table: a replay")
    return "take", mark


def _read_password(path: Path) -> str:
    try:
        st = os.lstat(path)
        if st.st_mode & (stat.S_IROTH | stat.S_IWOTH):
            raise MqttSetupError(f"MQTT password file {path} may be read by every user "
                                 f"(mode {stat.S_IMODE(st.st_mode):04o}); chmod 640 {path}")
        return read_regular(path, max_bytes=4096).decode("utf-8").strip("\r\n")
    except FileNotFoundError:
        raise MqttSetupError(f"no MQTT password file at {path}") from None
    except (UnsafeFile, OSError, UnicodeDecodeError) as exc:
        raise MqttSetupError(f"cannot read the MQTT password file {path}: {exc}") from None


def _configure(client: Any, settings: MqttSettings) -> None:
    """Credentials and TLS of ``settings`` on a paho client. Raises :class:`MqttSetupError`."""
    if settings.username:
        password = settings.password
        if password is None and settings.password_file is not None:
            password = _read_password(Path(settings.password_file))
        client.username_pw_set(settings.username, password)
    if settings.tls:
        try:
            client.tls_set(ca_certs=str(settings.ca_file) if settings.ca_file else None,
                           certfile=str(settings.cert_file) if settings.cert_file else None,
                           keyfile=str(settings.key_file) if settings.key_file else None,
                           cert_reqs=ssl.CERT_REQUIRED, tls_version=ssl.PROTOCOL_TLS_CLIENT)
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise MqttSetupError(f"MQTT TLS: {exc}") from None
        client.tls_insecure_set(False)  # the broker's name must match its certificate


def fetch_checkpoint(settings: MqttSettings, table_id: str, public: Ed25519PublicKey,
                     timeout_s: float = 3.0) -> dict[str, Any] | None:
    """The table's latest signed checkpoint as the floor's broker keeps it (the retained
    ``.../checkpoint`` message), verified with the table's ``public`` key; None when the
    broker has none, cannot be reached within ``timeout_s`` (a network deadline, at
    start-up only). A controller whose journal is
    behind it does not resume until a supervisor acknowledges. A retained
    message that does not verify is returned as :func:`table.anchors.refused_anchor`'s
    stand-in: the controller journals it as an incident and holds."""
    try:
        import paho.mqtt.client as mqtt
    except ImportError:  # pragma: no cover
        return None
    topic = checkpoint_topic(settings.floor, table_id)
    got: dict[str, Any] = {}
    done = threading.Event()
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"threecard-{table_id}-anchor",
                         clean_session=True)
    try:
        _configure(client, settings)
    except MqttSetupError:
        return None

    def on_connect(c: Any, userdata: Any, flags: Any, reason: Any, props: Any = None) -> None:
        if reason.is_failure:
            done.set()
        else:
            c.subscribe(topic, qos=1)

    def on_message(c: Any, userdata: Any, message: Any) -> None:
        try:
            got["cp"] = verify_message(message.payload, topic, public)
        except ForgedMessage as exc:
            # Passed on, not dropped: a forged anchor is an incident (table.anchors).
            log.warning("anchor_refused", topic=topic, error=str(exc)[:200])
            got["cp"] = refused_anchor(f"the broker's retained {topic}", str(exc))
        done.set()

    client.on_connect, client.on_message = on_connect, on_message
    try:
        client.connect_async(settings.host, settings.port, keepalive=max(5, int(timeout_s) + 1))
        client.loop_start()
        done.wait(timeout_s)
    except (OSError, ValueError) as exc:
        log.warning("anchor_unreachable", host=settings.host, error=str(exc)[:200])
    finally:
        stop_client(client)
    return got.get("cp")



class ReceiverLoop:
    """paho's network loop for a client that only receives (a subscriber: the pit view's, the
    floor's), in a thread of its own running ``loop_forever`` (paho's single-threaded use,
    reconnecting as ``loop_start`` does) instead of ``loop_start``.

    Why: under ``loop_start`` paho wakes its own ``select`` through a socketpair for every
    packet it queues, so each QoS 1 PUBACK costs a byte written to that pair, a second
    ``select`` and a read of the pair before the PUBACK goes out; run this way paho writes
    the PUBACK as soon as the message's callback has returned, and its thread does nothing
    but read the broker, call the callback and acknowledge (about 20 us less a message, a
    third of paho's cost: ``bench/floor_ingest.py --broker``). What is acknowledged, and
    when, does not change: after the callback returns. Nothing may publish on the client
    from another thread while it runs; :meth:`stop` (from any thread) disconnects and
    waits up to ``timeout_s`` for the thread to end."""

    def __init__(self, client: Any, name: str) -> None:
        self._client = client
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        try:
            self._client.loop_forever(retry_first_connection=True)
        except Exception as exc:  # noqa: BLE001 - logged: a subscriber that stopped hearing must say so
            log.error("mqtt_receiver_stopped", thread=self._thread.name, error=str(exc)[:300])

    def start(self) -> "ReceiverLoop":
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        self._client.disconnect()
        if hasattr(self._client, "_thread_terminate"):  # paho's own stop flag (what loop_stop sets)
            self._client._thread_terminate = True
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout_s)
        reset = getattr(self._client, "_reset_sockets", None)
        if reset is not None:
            reset()


def stop_client(client: Any) -> None:
    """Disconnect a paho client and stop its network thread. paho closes its wake-up
    socketpair only when the client is garbage-collected: closed now, so a stopped
    client holds no descriptor."""
    client.disconnect()
    client.loop_stop()
    reset = getattr(client, "_reset_sockets", None)
    if reset is not None:
        reset()

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
    broker; ``connected``: the link to the broker is up. ``on_receipt``: given, the
    table's ``.../receipt`` topic (the floor's signed receipts, :mod:`table.floor_anchor`)
    is followed and each message's bytes handed to it (paho's thread; it must not raise).
    ``receipt_source``: given, a callable returning the latest floor receipt the journal
    holds (or None), presented in each ``online`` status (``receipt``) for the floor to
    compare with its database. ``on_floor_notary``: given, the table's ``.../notary`` topic
    (the floor's retained statement of what its notary holds for the table) is followed
    and each message's bytes handed to it (paho's thread; it must not raise).
    """

    def __init__(self, events: EventLog, settings: MqttSettings, key: TableKey | None = None,
                 status_source: Any = None, on_receipt: Any = None, receipt_source: Any = None,
                 on_floor_notary: Any = None) -> None:
        try:
            import paho.mqtt.client as mqtt
        except ImportError as exc:  # pragma: no cover - the extra is installed in tests
            raise MqttUnavailable("MQTT needs paho-mqtt: pip install 'threecard-table[mqtt]'") from exc
        self._mqtt = mqtt
        self.key = key or settings.table_key
        if not isinstance(self.key, TableKey):
            raise MqttSetupError("every MQTT message is signed with the table key: give one (tablectl run "
                                 "--table-key FILE, the systemd credential threecard-table-key, or "
                                 "MqttSettings(table_key=table.keys.load_table_key(...)))")
        self.events = events
        self.settings = settings
        #: a callable returning the controller's status (table.interfaces.status_view), or None
        self.status_source = status_source
        self._summary: Any = None
        self.table_id = events.table_id
        self.events_topic, self.status_topic = topics(settings.floor, self.table_id)
        self.checkpoint_topic = checkpoint_topic(settings.floor, self.table_id)
        self.receipt_topic = f"threecard/{settings.floor}/{self.table_id}/receipt"
        self.on_receipt = on_receipt
        self.receipt_source = receipt_source
        self.notary_topic = f"threecard/{settings.floor}/{self.table_id}/notary"
        self.on_floor_notary = on_floor_notary
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
        _configure(self._client, settings)
        self._last_status = 0.0
        #: this connection's id, carried by its statuses and its Last Will (new before every (re)connect)
        self.session = ""
        self._new_session(self._client)
        self._client.on_pre_connect = lambda client, userdata: self._new_session(client)
        self._client.on_connect = self._on_connect
        self._client.on_disconnect = self._on_disconnect
        self._client.on_publish = self._on_publish
        self._client.on_message = self._on_message

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
        """Write the acknowledged seq (atomically: table.files.write_atomic)."""
        with self._cv:
            if not self._dirty:
                return
            data = {"table_id": self.table_id, "acked_seq": self.acked_seq}
            self._dirty = False
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            write_atomic(self.state_path, json.dumps(data).encode(), mode=0o600, durable=False)
        except OSError as exc:
            log.warning("mqtt_state_not_saved", path=str(self.state_path), error=str(exc)[:200])

    def _table_summary(self) -> Any:
        """The floor's summary of the controller's status, or None (no source, or it failed)."""
        if self.status_source is None:
            return None
        from table.interfaces.status_view import floor_status

        try:
            return floor_status(self.status_source())
        except Exception as exc:  # noqa: BLE001 - telemetry must not stop publishing
            log.warning("mqtt_status_source_failed", error=f"{type(exc).__name__}: {str(exc)[:200]}")
            return None

    def _status(self, online: bool, summary: Any = None, *, will: bool = False) -> str:
        message = {"schema": STATUS_SCHEMA, "table_id": self.table_id, "floor": self.settings.floor,
                   "online": online, "ts": _now(), "head_seq": self.events.head, "session": self.session}
        if will:
            message["will"] = True
        if online and summary is not None:
            message["table"] = summary
        if online and self.receipt_source is not None:
            try:
                receipt = self.receipt_source()
            except Exception as exc:  # noqa: BLE001 - telemetry must not stop publishing
                log.warning("mqtt_receipt_source_failed", error=f"{type(exc).__name__}: {str(exc)[:200]}")
                receipt = None
            if receipt is not None:
                message["receipt"] = receipt
        return sign_message(self.key, self.status_topic, message)

    def _new_session(self, client: Any) -> None:
        """A new connection id and its Last Will, signed now: just before each connect and
        reconnect (paho's ``on_pre_connect``), so the will's ``ts`` is its connection's
        connect time and names its ``session`` (:func:`order_status`)."""
        self.session = secrets.token_hex(8)
        client.will_set(self.status_topic, self._status(False, will=True), qos=1, retain=True)

    def _publish_status(self, client: Any) -> None:
        """The retained ``online: true`` status, fresh (called on connect and every
        ``status_interval_s``)."""
        summary = self._table_summary()
        info = client.publish(self.status_topic, self._status(True, summary), qos=1, retain=True)
        with self._cv:
            self._summary = summary
            if info.mid in self._early:  # acknowledged before publish() returned (from the forward thread)
                self._early.discard(info.mid)
            else:
                self._status_mids.add(info.mid)
            self._last_status = time.monotonic()

    # -- paho callbacks (paho's network thread) ----------------------------------------------

    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any = None) -> None:
        if reason.is_failure:
            log.warning("mqtt_connect_refused", reason=str(reason))
            return
        self._publish_status(client)  # its PUBACK is handled later in this same thread: registered first
        if self.on_receipt is not None:  # the floor's receipts (retained: the latest comes at once)
            client.subscribe(self.receipt_topic, qos=1)
        if self.on_floor_notary is not None:  # what the floor's notary holds (retained: at once)
            client.subscribe(self.notary_topic, qos=1)
        with self._cv:
            self.connected = True
            self._cv.notify_all()
        log.info("mqtt_connected", host=self.settings.host, port=self.settings.port, acked_seq=self.acked_seq)

    def _on_message(self, client: Any, userdata: Any, message: Any) -> None:
        if self.on_receipt is not None and message.topic == self.receipt_topic:
            try:
                self.on_receipt(bytes(message.payload))
            except Exception:  # noqa: BLE001 - a receipt not kept must not stop the publisher
                log.exception("mqtt_receipt_failed")
        elif self.on_floor_notary is not None and message.topic == self.notary_topic and message.payload:
            try:
                self.on_floor_notary(bytes(message.payload))
            except Exception:  # noqa: BLE001 - a statement not taken must not stop the publisher
                log.exception("mqtt_floor_notary_failed")

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
        while not self._stop.is_set():
            since = time.monotonic() - self._last_status
            if self.connected and (since >= self.settings.status_interval_s or (
                    self.status_source is not None and since >= STATUS_MIN_INTERVAL_S
                    and self._table_summary() != self._summary)):
                self._publish_status(self._client)
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
            try:
                for ev in self.events.replay(after, after + room):
                    if self._stop.is_set() or not self.connected:
                        break
                    if not self._send(ev):
                        break
            except EventStreamError as exc:  # e.g. behind at the day's close with no archive to read it from
                log.error("mqtt_events_unreadable", after=after, error=str(exc)[:300])
                self._stop.wait(1.0)
        self._save_state()

    def _send(self, ev: dict[str, Any]) -> bool:
        """Hand one event to paho (and a checkpoint to its retained topic); False when
        paho refused it (the loop waits and tries again)."""
        payload = sign_message(self.key, self.events_topic, ev)
        if ev["type"] == "checkpoint":  # the latest signed journal checkpoint: an anchor the floor keeps
            self._client.publish(self.checkpoint_topic, sign_message(self.key, self.checkpoint_topic, ev["data"]),
                                 qos=1, retain=True)
        # Not under self._cv: paho calls on_publish holding its own message lock.
        info = self._client.publish(self.events_topic, payload, qos=1)
        if info.rc != self._mqtt.MQTT_ERR_SUCCESS and info.rc != self._mqtt.MQTT_ERR_NO_CONN:
            log.warning("mqtt_publish_failed", seq=ev["seq"], rc=info.rc)
            return False
        with self._cv:
            self._sent = ev["seq"]
            self.published += 1
            if info.mid in self._early:  # acknowledged before publish() returned
                self._early.discard(info.mid)
                self._ack(ev["seq"])
            else:
                self._inflight[info.mid] = ev["seq"]
        return True

    def wait_acked(self, seq: int, timeout_s: float) -> bool:
        """Wait until the broker has acknowledged every event up to ``seq``."""
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
        stop_client(self._client)
        with self._cv:
            self._dirty = True
        self._save_state()
