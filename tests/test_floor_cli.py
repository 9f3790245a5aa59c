"""`tablectl floor serve` and `tablectl run`'s [floor] at the command line: bad usage is exit 2
naming the key, a database that cannot be opened exit 1, a floor that does not answer stops a
table under the default `unreachable = "refuse"` (exit 2, naming floor.url) and not under "warn"."""

from __future__ import annotations

import subprocess
import sys

from table.keys import generate, save

from console_helpers import PEOPLE, make_people, tablectl
from mqtt_broker import free_port


def test_floor_serve_refuses_a_bad_config_and_an_unusable_database(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[floor]\ndatabase = "f.sqlite3"\ncolour = "red"\n')
    done = subprocess.run(tablectl() + ["floor", "serve", "--config", str(bad)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "floor.colour: unknown key" in done.stderr and "floor.key_file" in done.stderr
    save(generate(), tmp_path / "floor.key")
    (tmp_path / "tables").mkdir()
    save(generate(), tmp_path / "t1.key")
    (tmp_path / "tables" / "pit1-tcp-01.pub").write_bytes((tmp_path / "t1.key.pub").read_bytes())
    cfg = tmp_path / "floor.toml"
    cfg.write_text(f'[floor]\ndatabase = "postgresql://floor@/floor?host={tmp_path}/nosuchdir&connect_timeout=2"\n'
                   f'key_file = "floor.key"\ntable_keys = "tables"\nlisten = "127.0.0.1:0"\n'
                   f'[[broker]]\nurl = "mqtt://127.0.0.1:{free_port()}"\n')
    done = subprocess.run(tablectl() + ["floor", "serve", "--config", str(cfg)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1 and "cannot connect to the floor database" in done.stderr


def test_floor_serve_without_paho_says_which_extra_to_install(tmp_path):
    save(generate(), tmp_path / "floor.key")
    (tmp_path / "tables").mkdir()
    save(generate(), tmp_path / "t1.key")
    (tmp_path / "tables" / "pit1-tcp-01.pub").write_bytes((tmp_path / "t1.key.pub").read_bytes())
    cfg = tmp_path / "floor.toml"
    cfg.write_text(f'[floor]\ndatabase = "f.sqlite3"\nkey_file = "floor.key"\ntable_keys = "tables"\n'
                   f'listen = "127.0.0.1:0"\n[[broker]]\nurl = "mqtt://127.0.0.1:{free_port()}"\n')
    # A machine installed with `pip install .` alone (the README's first line): no paho-mqtt.
    no_paho = "import sys; sys.modules['paho'] = None; from table.cli import main; main()"
    done = subprocess.run([sys.executable, "-c", no_paho, "floor", "serve", "--config", str(cfg)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "pip install 'threecard-table[floor]'" in done.stderr and "internal error" not in done.stderr


def _table(tmp_path, policy: str) -> str:
    if not (tmp_path / "floor.key").exists():
        save(generate(), tmp_path / "floor.key")
    path = tmp_path / f"table-{policy}.toml"
    path.write_text(f'[table]\nid = "t1"\nseats = 1\n[devices.shuffler]\nurl = "{tmp_path}/no-shuffler"\n'
                    f'[devices.shoe]\nurl = "{tmp_path}/no-shoe"\n[floor]\nurl = "http://127.0.0.1:{free_port()}"\n'
                    f'public_key = "{tmp_path / "floor.key.pub"}"\ntimeout_s = 1\nunreachable = "{policy}"\n')
    return str(path)


def test_a_table_does_not_start_when_the_floor_does_not_answer_unless_told_to_warn(tmp_path):
    refused = subprocess.run(tablectl() + ["run", "--config", _table(tmp_path, "refuse"), "--journal",
                                           str(tmp_path / "j.sqlite3"), "--rounds", "1"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2
    assert "floor.url" in refused.stderr and "cannot be reached" in refused.stderr
    warned = subprocess.run(tablectl() + ["run", "--config", _table(tmp_path, "warn"), "--journal",
                                          str(tmp_path / "j2.sqlite3"), "--rounds", "1", "--log-file",
                                          str(tmp_path / "log")], capture_output=True, text=True, timeout=60)
    assert "floor.url" not in warned.stderr  # it went on, to the devices (absent here)
    assert "no-shuffler" in warned.stderr or "shuffler" in warned.stderr
    assert "floor_notary_not_used" in (tmp_path / "log").read_text()


def test_an_unreachable_floor_under_hold_starts_the_table_held_for_a_supervisor(tmp_path):
    """[floor] unreachable = "hold": the table starts, journals an incident, and deals only
    once a supervisor acknowledges that the floor could not confirm the journal's end."""
    import time

    from console_helpers import PEOPLE, make_people
    from table.interfaces.control_socket import send
    from table.journal import Journal

    dev, dealer = tmp_path / "dev", tmp_path / "dealer.sock"
    journal, control = tmp_path / "j.sqlite3", tmp_path / "control.sock"
    cfg = _table(tmp_path, "hold")
    sim = subprocess.Popen(tablectl() + ["simulate-table", "--link-dir", str(dev), "--dealer-socket", str(dealer),
                                         "--seed", "3"], stdout=subprocess.PIPE, text=True)
    try:
        assert sim.stdout.readline().startswith("ready")
        run = tablectl() + ["run", "--config", cfg, "--shuffler-url", str(dev / "shuffler"), "--shoe-url",
                            str(dev / "shoe"), "--dealer-socket", str(dealer), "--journal", str(journal),
                            "--log-file", str(tmp_path / "log")]
        alone = subprocess.run(run + ["--rounds", "1"], capture_output=True, text=True, timeout=120)
        assert alone.returncode == 3 and "acknowledge" in alone.stderr  # nobody to ask: it does not deal
        proc = subprocess.Popen(run + ["--rounds", "1", "--control-socket", str(control),
                                       "--people-file", str(make_people(tmp_path / "people.toml"))],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while True:
            try:
                status = send(control, {"action": "status"}, timeout_s=30)
                if (status.get("waiting_for") or {}).get("action") == "acknowledge_incident":
                    break
            except OSError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        assert send(control, {"action": "acknowledge_incident", "supervisor": "S-17", "pin": PEOPLE["S-17"][1]},
                    timeout_s=30)["ok"]  # a person of the people file, proved (issue 24)
        assert proc.wait(60) == 0, proc.stderr.read()
        proc.stderr.close()
    finally:
        sim.terminate()
        sim.wait(10)
        sim.stdout.close()
    with Journal(journal, read_only=True) as j:
        incidents = [e.body["what"] for e in j.entries("incident")]
        acks = [e.body for e in j.entries("supervisor") if e.body.get("action") == "acknowledge_incident"]
    assert any("could not be checked with the floor's notary" in w for w in incidents), incidents
    assert acks and acks[-1].get("unconfirmed") is True
