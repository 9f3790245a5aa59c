"""`tablectl pit serve` only reads the floor's database: one that does not exist is refused as
bad usage (2), naming the file and what to start first, and no empty database is made in its
place (a wall display that made one served a page that could only say "cannot be read")."""

from __future__ import annotations

from click.testing import CliRunner

from table.cli import main


def test_a_floor_database_that_does_not_exist_is_refused_and_never_made(tmp_path):
    (tmp_path / "keys").mkdir()
    db = tmp_path / "floor.sqlite3"
    config = tmp_path / "floor.toml"
    config.write_text(f"""
[floor]
database = "{db}"
key_file = "{tmp_path / 'floor.key'}"
table_keys = "{tmp_path / 'keys'}"
listen = "127.0.0.1:0"
wall_pits = ["pit7"]
[[broker]]
url = "mqtt://127.0.0.1:1"
""")
    out = CliRunner().invoke(main, ["pit", "serve", "--config", str(config), "--web", "127.0.0.1:0"])
    assert out.exit_code == 2, out.output
    assert f"the floor's database ({db}): no such file" in out.output and "tablectl floor serve" in out.output
    assert not db.exists()
