"""Where the floor's brokers are, and whose signatures it believes: what every floor subscriber shares.

:class:`BrokerAddress` parses ``mqtt://[USER@]HOST[:PORT][/PREFIX]`` (``mqtts://`` for TLS; the
prefix a bridge put before ``threecard/...``), :func:`load_table_keys` reads the tables'
public keys (``TABLE_ID.pub``), :func:`broker_client` makes the paho client a subscriber
uses. The floor service (``table/floor/ingest.py``, ``BrokerFeed``) is the one subscriber:
its pages, the pit's wall page included, read its database (docs/integration.md,
"The floor service").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from table.keys import KeyFileError, load_public_key

_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}\Z")


class PitSetupError(ValueError):
    """A floor service cannot follow its brokers: a bad broker URL or keys folder; the message says why."""


@dataclass(frozen=True)
class BrokerAddress:
    """Where a floor's broker is: ``mqtt://[USER@]HOST[:PORT][/PREFIX]`` or ``mqtts://`` (TLS,
    8883). ``PREFIX`` (segments of letters, digits, ``.``, ``_``, ``-``) is put before
    ``threecard/...`` in the topics subscribed to: the prefix a bridge added."""

    host: str
    port: int
    tls: bool
    username: str | None = None
    prefix: str = ""

    @classmethod
    def parse(cls, url: str) -> "BrokerAddress":
        parts = urlsplit(url)
        if parts.scheme not in ("mqtt", "mqtts") or not parts.hostname:
            raise PitSetupError(f"{url!r} is not a broker URL; give mqtt://HOST[:PORT][/PREFIX] or mqtts://...")
        if parts.password is not None:
            raise PitSetupError("give the broker password in a file (--password-file), not in the URL")
        if "?" in url or "#" in url:
            raise PitSetupError(f"{url!r}: a broker URL takes no ?query, #fragment or MQTT wildcard")
        try:
            port = parts.port or (8883 if parts.scheme == "mqtts" else 1883)
        except ValueError:
            raise PitSetupError(f"{url!r}: the port is not a number 1-65535") from None
        segments = [unquote(x) for x in parts.path.strip("/").split("/") if x]
        if any(not _NAME.match(x) for x in segments) or len(segments) > 8:
            raise PitSetupError(f"{url!r}: the topic prefix (the URL's path) must be up to 8 segments of letters, "
                                "digits, '.', '_', '-' (no MQTT wildcards)")
        prefix = "".join(f"{x}/" for x in segments)
        return cls(parts.hostname, port, parts.scheme == "mqtts", unquote(parts.username) if parts.username else None,
                   prefix)

    @property
    def label(self) -> str:
        """``HOST:PORT[/PREFIX]``, as the page shows it (no account)."""
        return f"{self.host}:{self.port}" + (f"/{self.prefix.rstrip('/')}" if self.prefix else "")


def load_table_keys(folder: str | Path) -> dict[str, Ed25519PublicKey]:
    """Table id -> public key, from ``TABLE_ID.pub`` files in ``folder`` (what ``tablectl
    audit keygen`` writes beside a table key). Raises :class:`PitSetupError`."""
    path = Path(folder)
    if not path.is_dir():
        raise PitSetupError(f"no folder of table keys at {path}")
    keys = {}
    for f in sorted(path.glob("*.pub")):
        table_id = f.name[:-len(".pub")]
        if not _NAME.match(table_id):
            continue
        try:
            keys[table_id] = load_public_key(f)
        except KeyFileError as exc:
            raise PitSetupError(f"{f}: {exc}") from None
    if not keys:
        raise PitSetupError(f"no table keys (TABLE_ID.pub) in {path}: the floor would believe no table")
    return keys


def broker_client(mqtt: Any, broker: BrokerAddress, client_id: str, password: str | None,
                  ca_file: str | None) -> Any:
    """A paho client for a subscriber of ``broker`` (the floor's): a clean
    session under ``client_id``, reconnecting by itself (1..30 s), the broker account's
    ``password``, and TLS checked against ``ca_file`` for ``mqtts://``. ``mqtt``: the
    ``paho.mqtt.client`` module (imported by the caller, an optional extra)."""
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=True)
    client.reconnect_delay_set(1, 30)
    if broker.username:
        client.username_pw_set(broker.username, password)
    if broker.tls:
        import ssl

        client.tls_set(ca_certs=ca_file, cert_reqs=ssl.CERT_REQUIRED, tls_version=ssl.PROTOCOL_TLS_CLIENT)
    return client
