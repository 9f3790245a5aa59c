"""The floor's sessions live in its database (table/floor/sessions.py): a restart of the floor
keeps people signed in; the database holds no token, only its SHA-256, so a copy of it signs no
one in; a session ends at sign-out, when idle too long, at its expiry, and when its person
leaves the people file or changes role."""

from __future__ import annotations

import pytest

from table.floor.ingest import Floor
from table.floor.reports import report_routes
from table.floor.sessions import FloorSessions
from table.floor.store import open_store
from table.floor.web import FloorServer, floor_app
from table.interfaces.auth import PeopleFile
from table.keys import generate
from table.roles import Role

from console_helpers import CHEAP
from floor_helpers import call, database  # noqa: F401  (fixtures)
from test_floor_roles import PINS

FLOOR_KEY = generate()
pytestmark = pytest.mark.timeout(120)


class Floor_:
    """A floor's web side on ``database``, started and stopped as the floor is."""

    def __init__(self, tmp_path, database: str) -> None:  # noqa: F811
        self.tmp, self.database = tmp_path, database

    def __enter__(self):
        self.store = open_store(self.database)
        self.floor = Floor(self.store, {}).start()
        self.server = FloorServer(floor_app(self.floor, FLOOR_KEY, extra_routes=report_routes(
            self.floor, self.tmp / "people.toml", key=FLOOR_KEY)), "127.0.0.1", 0)
        return self.server

    def __exit__(self, *exc) -> None:
        self.server.close()
        self.floor.close()
        self.store.close()


def people(tmp_path) -> PeopleFile:
    pf = PeopleFile(tmp_path / "people.toml")
    for person, (role, pin, pits) in PINS.items():
        pf.add(person, role, pin, hasher=CHEAP, pits=pits)
    return pf


def sign_in(server, person: str) -> str:
    status, body = call(server, "/api/v1/floor/session", {"person": person, "pin": PINS[person][1]})
    assert status == 200, body
    return body["token"]


def test_a_session_survives_a_restart_of_the_floor_and_a_sign_out_too(tmp_path, database):  # noqa: F811
    people(tmp_path)
    with Floor_(tmp_path, database) as server:
        pb, fm = sign_in(server, "PB-1"), sign_in(server, "FM-1")
        assert call(server, "/api/v1/floor/session", token=pb)[1]["pits"] == ["pit1"]
    with Floor_(tmp_path, database) as server:  # a new process's floor on the same database
        status, who = call(server, "/api/v1/floor/session", token=pb)
        assert status == 200 and who["person"] == "PB-1" and who["pits"] == ["pit1"]
        assert call(server, "/api/v1/floor/pit", token=fm)[0] == 200
        assert call(server, "/api/v1/floor/session", token=pb, method="DELETE")[0] == 200
    with Floor_(tmp_path, database) as server:
        assert call(server, "/api/v1/floor/session", token=pb)[0] == 401  # signed out stays signed out
        assert call(server, "/api/v1/floor/session", token=fm)[0] == 200


def test_the_database_holds_no_token_so_a_copy_of_it_signs_no_one_in(tmp_path, database):  # noqa: F811
    """The attack: someone with a read of the floor's database (a backup, a replica) takes a
    session row and presents it. Only the token's SHA-256 is stored: refused."""
    people(tmp_path)
    with Floor_(tmp_path, database) as server:
        token = sign_in(server, "FM-1")
        store = open_store(database)
        try:
            rows = store.query("SELECT digest, person, role FROM floor_sessions")
        finally:
            store.close()
        assert [r[1:] for r in rows] == [("FM-1", "floor_manager")]
        stolen = rows[0][0]
        assert token not in {r[0] for r in rows}
        for presented in (stolen, stolen[:43]):
            assert call(server, "/api/v1/floor/session", token=presented)[0] == 401
            assert call(server, "/api/v1/floor/report", token=presented)[0] == 401
        assert call(server, "/api/v1/floor/session", token=token)[0] == 200


def test_a_person_removed_or_moved_to_another_role_is_signed_out_at_their_next_request(tmp_path, database):  # noqa: F811
    pf = people(tmp_path)
    with Floor_(tmp_path, database) as server:
        pb, fm = sign_in(server, "PB-1"), sign_in(server, "FM-1")
        pf.add("PB-1", Role.SUPERVISOR, PINS["PB-1"][1], hasher=CHEAP, replace=True)
        assert call(server, "/api/v1/floor/pit", token=pb)[0] == 401
        pf.add("PB-1", Role.PIT_BOSS, PINS["PB-1"][1], hasher=CHEAP, pits=["pit1"], replace=True)
        assert call(server, "/api/v1/floor/pit", token=pb)[0] == 401  # its sessions ended: sign in again
        pf.remove("FM-1")
        assert call(server, "/api/v1/floor/report", token=fm)[0] == 401


def test_a_session_ends_after_its_idle_time_and_at_its_expiry(tmp_path):
    store = open_store(str(tmp_path / "floor.sqlite3"))
    now = [1_000_000_000_000_000]
    try:
        sessions = FloorSessions(store, lambda: now[0], ttl_s=3600, idle_s=900)
        token = sessions.open("FM-1", "floor_manager")
        now[0] += 899_000_000
        assert sessions.get(token) is not None  # used within 15 min: alive, and touched
        now[0] += 899_000_000
        assert sessions.get(token) is not None
        now[0] += 900_000_000
        assert sessions.get(token) is None  # 15 min unused
        token = sessions.open("FM-1", "floor_manager")
        for _ in range(5):  # used every 12 min: never idle, still ends an hour after sign-in
            now[0] += 720_000_000
            alive = sessions.get(token)
        assert alive is None
        tokens = []
        for _ in range(6):  # signed in from six browsers, a second apart: the four newest stay
            now[0] += 1_000_000
            tokens.append(sessions.open("PB-1", "pit_boss"))
        assert [sessions.get(t) is not None for t in tokens] == [False, False, True, True, True, True]
    finally:
        store.close()
