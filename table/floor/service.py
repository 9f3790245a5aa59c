"""The floor put together from its config: database, ingest, one feed per broker, the web side."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import structlog

from table.interfaces.brokers import BrokerAddress, PitSetupError, load_table_keys
from table.keys import KeyFileError

from .config import FloorConfig, FloorConfigError
from .ingest import BrokerFeed, Floor, GamingDay
from .record import RecordCheck, floor_key, raise_alarms
from .store import open_store
from .web import FloorServer, floor_app

log = structlog.get_logger("table.floor")


class FloorService:
    """``tablectl floor serve``: :meth:`start` opens the database (migrated), starts the
    writer, the web side and a feed per ``[[broker]]``, and checks the floor's own record
    (its signed notes and alarms: :mod:`table.floor.record`; each problem an alarm row, in
    :attr:`record_problems`); :meth:`close` stops them in reverse. The floor key is made
    when there is none yet (:func:`~table.floor.record.floor_key`). Raises :class:`FloorConfigError` for unusable keys or broker URLs,
    :class:`~table.floor.store.StoreError` for the database, ``OSError`` for the address."""

    def __init__(self, config: FloorConfig) -> None:
        self.config = config
        try:
            self.keys = load_table_keys(config.table_keys)
        except PitSetupError as exc:
            raise FloorConfigError(f"floor.table_keys: {exc}") from None
        try:
            # a floor with no key yet gets one (0600, never over an existing one: table.floor.record)
            self.floor_key, self.key_created = floor_key(config.key_file)
        except KeyFileError as exc:
            raise FloorConfigError(f"floor.key_file: {exc}") from None
        try:
            self.brokers = [(BrokerAddress.parse(b.url), b) for b in config.brokers]
        except PitSetupError as exc:
            raise FloorConfigError(f"broker.url: {exc}") from None
        try:
            import paho.mqtt.client  # noqa: F401  (the feeds' client: said now, not as a crash at start)
        except ImportError:
            raise FloorConfigError("the floor follows its brokers with paho-mqtt, which is not installed: "
                                   "pip install 'threecard-table[floor]'") from None
        self.store: Any = None
        self.floor: Floor | None = None
        self.server: FloorServer | None = None
        self.feeds: list[BrokerFeed] = []

    def start(self) -> "FloorService":
        self.store = open_store(self.config.database)
        try:
            self.floor = Floor(self.store, self.keys, day=GamingDay(self.config.timezone, self.config.day_starts_h),
                               key=self.floor_key)
            self.floor.start()
            routes = []
            if self.config.people_file is not None:
                from .reports import report_routes

                routes = report_routes(self.floor, self.config.people_file, key=self.floor_key,
                                       zone=self.config.display_timezone)
            if self.config.wall_pits:
                from .pit_screen import Clock, local_zone_name
                from .wall import wall_routes

                routes = wall_routes(self.floor, self.config.wall_pits,
                                     Clock(self.config.display_timezone or local_zone_name())) + routes
            host, _, port = self.config.listen.rpartition(":")
            self.server = FloorServer(floor_app(self.floor, self.floor_key, extra_routes=routes), host, int(port))
            for address, b in self.brokers:
                password = None
                if b.password_file is not None:
                    password = Path(b.password_file).read_text().strip("\r\n")
                self.feeds.append(BrokerFeed(self.floor, address, floors=b.floors, password=password,
                                             ca_file=str(b.ca_file) if b.ca_file else None).start())
        except BaseException:
            self.close()
            raise
        log.info("floor_started", database=self.store.where, url=self.url, brokers=len(self.feeds),
                 tables=len(self.keys))
        #: what the check of the floor's own record found at start (each problem an alarm row)
        self.record_problems = RecordCheck(self.floor_key.public).check(self.store)
        if self.record_problems:
            from .ingest import _now

            raise_alarms(self.store, self.record_problems, key=self.floor_key, now=_now())
        if self.keys and not self.store.query("SELECT 1 FROM notary LIMIT 1"):
            # An empty notary takes the brokers' retained checkpoints as they are, an older one an
            # insider republished too: said at every start until it holds one (docs/integration.md).
            log.warning("floor_notary_empty", database=self.store.where,
                        what="this floor holds no table's checkpoint yet: it takes the brokers' retained ones "
                             "as they are; if an older floor database exists, seed this one from it first "
                             "(tablectl floor seed --config FILE --from OLD_DATABASE)")
        if self.config.people_file is None:
            log.warning("floor_reports_off", what="no [floor] people_file: the floor page and its reports are "
                                                  "not served (404); only the notary and the table list answer")
        return self

    def wait_following(self, timeout_s: float) -> list[str]:
        """Wait up to ``timeout_s`` (s) until every broker feed has subscribed (its SUBACK:
        from then on the brokers keep the tables' messages for the floor); the brokers not
        yet followed then (``host:port``; empty: all followed). Events published before the
        floor subscribes are not kept for it (a clean session), so whoever starts tables
        with the floor waits for this."""
        import time

        deadline = time.monotonic() + timeout_s
        for feed in self.feeds:
            feed.connected.wait(max(0.0, deadline - time.monotonic()))
        return [f"{feed.broker.host}:{feed.broker.port}" for feed in self.feeds if not feed.connected.is_set()]

    @property
    def url(self) -> str:
        return self.server.url if self.server is not None else ""

    def close(self) -> None:
        for feed in self.feeds:
            feed.close()
        self.feeds = []
        if self.server is not None:
            self.server.close()
            self.server = None
        if self.floor is not None:
            self.floor.close()
        if self.store is not None:
            self.store.close()
            self.store = None
