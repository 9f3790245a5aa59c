"""Table config: the example file, every kind of validation error, and `tablectl config`."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from protocols.cards import BackColour
from table.cli import main
from table.config import (
    DEFAULT_JOURNAL,
    ConfigError,
    TableConfig,
    check_device_url,
    load_config,
    parse_config,
)

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "deploy" / "table.example.toml"

MINIMAL = """\
[table]
id = "t1"
seats = 3

[devices.shuffler]
url = "/dev/threecard/shuffler"

[devices.shoe]
url = "/dev/threecard/shoe"
"""


def problems(text: str, source: str = "table.toml") -> list:
    with pytest.raises(ConfigError) as ei:
        parse_config(textwrap.dedent(text), source)
    return ei.value.problems


def only(text: str):
    ps = problems(text)
    assert len(ps) == 1, ps
    return ps[0]


# -- valid files ---------------------------------------------------------------------------


def test_example_config_is_valid_and_complete():
    cfg = load_config(EXAMPLE)
    assert cfg.table.id == "pit2-tcp-07" and cfg.table.seats == 6
    assert cfg.deck_colours() == (BackColour.RED, BackColour.BLUE)
    assert cfg.devices.shoe.url == "/dev/threecard/shoe"
    assert cfg.journal.path == DEFAULT_JOURNAL
    tables = cfg.load_tables()
    assert tables.ante_bonus.name == "pa-649a12b-1" and tables.pair_plus.name == "example-pp-649a12d"


def test_minimal_config_takes_defaults():
    cfg = parse_config(MINIMAL)
    assert [(d.id, d.back_colour) for d in cfg.decks] == [("A", BackColour.RED), ("B", BackColour.BLUE)]
    assert cfg.paytables.ante_bonus == "pa-649a12b-1" and cfg.paytables.pair_plus is None
    assert cfg.link.retransmit_initial_ms == 50 and cfg.link.shuffle_timeout_s == 180.0
    assert cfg.journal.path == Path("/var/lib/threecard/journal.sqlite3")
    assert (cfg.log.format, cfg.log.level) == ("json", "info")


def test_the_two_person_rule_is_on_unless_the_config_turns_it_off():
    assert parse_config(MINIMAL).console.two_person_void is True
    assert parse_config(MINIMAL + "[console]\ntwo_person_void = false\n").console.two_person_void is False
    p = only(MINIMAL + '[console]\ntwo_person_void = "no"\n')
    assert p.key == "console.two_person_void" and "expected true or false" in p.message


def test_link_section_feeds_link_config_and_table_timing():
    cfg = parse_config(MINIMAL + "[link]\nretransmit_initial_ms = 40\nmax_attempts = 3\nevent_timeout_s = 2\n")
    lc = cfg.link.link_config()
    assert (lc.retransmit_initial_ms, lc.max_attempts) == (40, 3)
    assert cfg.link.table_timing().event_timeout_s == 2.0


def test_device_serial_number_pins_the_link_and_heartbeat_keys_reach_it():
    cfg = parse_config(MINIMAL.replace('url = "/dev/threecard/shoe"', 'url = "/dev/threecard/shoe"\nserial_number = "SHOE-0042"')
                       + "[link]\nheartbeat_interval_ms = 750\nheartbeat_misses = 4\n")
    shoe, shuffler = cfg.link.link_config(cfg.devices.shoe), cfg.link.link_config(cfg.devices.shuffler)
    assert (shoe.pinned_serial, shuffler.pinned_serial) == ("SHOE-0042", None)
    assert (shoe.heartbeat_interval_ms, shoe.heartbeat_misses) == (750, 4)


def test_show_output_reads_back_to_the_same_config():
    cfg = load_config(EXAMPLE)
    assert parse_config(cfg.to_toml(), EXAMPLE) == cfg


def test_relative_paytable_path_is_resolved_against_the_config_file(tmp_path):
    shipped = REPO / "table" / "rules" / "paytables" / "pa-649a12b-2.toml"
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "ours.toml").write_text(shipped.read_text())
    f = tmp_path / "table.toml"
    f.write_text(MINIMAL + '[paytables]\nante_bonus = "tables/ours.toml"\n')
    assert load_config(f).load_tables().ante_bonus.name == "pa-649a12b-2"


@pytest.mark.parametrize("url", [
    "/dev/threecard/shoe", "/dev/ttyUSB0", "usb://1209:0002", "usb://1209:0002/SHOE-SIM-0001",
    "socket://127.0.0.1:7000", "rfc2217://bench-3:2217", "loop://",
])
def test_device_url_forms_accepted(url):
    assert check_device_url(url) == url


# -- each kind of error names the key, the allowed values and the line ------------------------------


def test_toml_syntax_error_gives_file_and_line():
    p = only("[table]\nid = \"t1\"\nseats = \n")
    assert p.line == 3 and "not valid TOML" in p.message
    assert p.render("table.toml").startswith("table.toml:3: ")


def test_unknown_key_suggests_and_lists_allowed():
    p = only(MINIMAL.replace("seats = 3", "seats = 3\nsaets = 4"))
    assert p.key == "table.saets" and p.line == 4
    assert "did you mean 'seats'" in p.message and "allowed in [table]: id, seats" in p.message


def test_unknown_section_is_an_unknown_top_level_key():
    p = only(MINIMAL + "[logging]\nlevel = 'info'\n")
    assert p.key == "logging" and "journal" in p.message and "log" in p.message


def test_missing_required_keys():
    ps = problems('[table]\nid = "t1"\n')
    assert {p.key for p in ps} == {"table.seats", "devices"}
    assert all(p.message == "missing required key" for p in ps)


@pytest.mark.parametrize("line, key, expect", [
    ('seats = "3"', "table.seats", "expected an integer, got a string '3'"),
    ("seats = 3.0", "table.seats", "expected an integer, got a float 3.0"),
    ("seats = true", "table.seats", "expected an integer, got a boolean True"),
    ("id = 7", "table.id", "expected a string, got an integer 7"),
])
def test_wrong_type(line, key, expect):
    text = MINIMAL.replace('seats = 3', line) if line.startswith("seats") else MINIMAL.replace('id = "t1"', line)
    p = only(text)
    assert p.key == key and expect in p.message


def test_table_and_array_of_wrong_type():
    ps = problems('decks = "AB"\n[table]\nid = "t1"\nseats = 3\n'
                  '[devices]\nshoe = "/dev/ttyUSB1"\nshuffler = { url = "/dev/ttyUSB0" }\n')
    got = {p.key: p.message for p in ps}
    assert got["decks"].startswith("expected an array of tables ([[decks]]), got a string")
    assert got["devices.shoe"].startswith("expected a table ([devices.shoe]), got a string")


@pytest.mark.parametrize("extra, key, allowed", [
    ("[link]\nmax_attempts = 0\n", "link.max_attempts", "allowed: 1..100"),
    ("[link]\nevent_timeout_s = 7200\n", "link.event_timeout_s", "allowed: 0.1..3600"),
    ("[link]\nretransmit_initial_ms = 500\nretransmit_max_ms = 100\n", "link.retransmit_max_ms",
     "allowed: retransmit_initial_ms..5000"),
])
def test_out_of_range(extra, key, allowed):
    p = only(MINIMAL + extra)
    assert p.key == key and allowed in p.message and p.line is not None


def test_seats_out_of_range_names_range_and_line():
    p = only(MINIMAL.replace("seats = 3", "seats = 8"))
    assert (p.key, p.line) == ("table.seats", 3) and "allowed: 1..7" in p.message


def test_unknown_colour_lists_colours():
    p = only(MINIMAL + '[[decks]]\nid = "A"\nback_colour = "pink"\n[[decks]]\nid = "B"\nback_colour = "blue"\n')
    assert p.key == "decks[0].back_colour" and p.line == 12
    assert "allowed: red, blue, green, black, grey, purple, orange, brown" in p.message


def test_decks_need_two_different_colours_and_ids():
    ps = problems(MINIMAL + '[[decks]]\nid = "A"\nback_colour = "red"\n[[decks]]\nid = "A"\nback_colour = "red"\n')
    assert {p.key for p in ps} == {"decks[1].id", "decks[1].back_colour"}
    assert any("649a.3(b)" in p.message for p in ps)
    p = only(MINIMAL + '[[decks]]\nid = "A"\nback_colour = "red"\n')
    assert p.key == "decks" and "exactly two" in p.message


def test_unknown_paytable_lists_the_shipped_ones_of_that_kind():
    p = only(MINIMAL + '[paytables]\nante_bonus = "pa-649a12b-9"\n')
    assert p.key == "paytables.ante_bonus" and p.line == 11
    assert "pa-649a12b-1" in p.message and "pa-649b4b-1" in p.message and "example-pp" not in p.message


def test_a_paytable_path_that_is_no_toml_file_is_refused_naming_the_key():
    """One rule for every paytable named by a path (a config's, a round file's): its name
    ends in .toml, so a typo or a file that is no paytable is refused, not read."""
    p = only(MINIMAL + '[paytables]\nante_bonus = "/etc/passwd"\n')
    assert p.key == "paytables.ante_bonus" and p.line == 11
    assert "a paytable file's name ends in .toml" in p.message and "/etc/passwd" in p.message


def test_paytable_of_the_wrong_kind():
    p = only(MINIMAL + '[paytables]\npair_plus = "pa-649a12b-1"\n')
    assert p.key == "paytables.pair_plus" and "is a ante_bonus paytable, not pair_plus" in p.message
    assert "allowed: example-pp-649a12d" in p.message


def test_bad_device_url_lists_the_forms():
    p = only(MINIMAL.replace('url = "/dev/threecard/shoe"', 'url = "usb://12345:1"'))
    assert (p.key, p.line) == ("devices.shoe.url", 9)
    assert "usb://VID:PID[/SERIAL]" in p.message and "socket://HOST:PORT" in p.message


def test_bad_log_format_and_level():
    ps = problems(MINIMAL + '[log]\nformat = "xml"\nlevel = "loud"\n')
    assert [(p.key, p.line) for p in ps] == [("log.format", 11), ("log.level", 12)]
    assert "allowed: json, console" in ps[0].message and "allowed: debug, info, warning, error" in ps[1].message


def test_journal_path_must_be_absolute():
    p = only(MINIMAL + '[journal]\npath = "journal.sqlite3"\n')
    assert p.key == "journal.path" and "absolute" in p.message


def test_every_problem_is_reported_at_once(tmp_path):
    f = tmp_path / "t.toml"
    f.write_text(MINIMAL.replace("seats = 3", "seats = 0").replace('"/dev/threecard/shoe"', '"ftp://x"')
                 + '[log]\nlevel = "loud"\n')
    with pytest.raises(ConfigError) as ei:
        load_config(f)
    lines = str(ei.value).splitlines()
    assert [l.split(": ")[0] for l in lines] == [f"{f}:3", f"{f}:9", f"{f}:11"]


def test_unreadable_file():
    with pytest.raises(ConfigError, match="cannot read the config: No such file"):
        load_config("/nonexistent/table.toml")


# -- tablectl config -----------------------------------------------------------------------------


def test_cli_check_valid_example_exits_0():
    r = CliRunner().invoke(main, ["config", "check", str(EXAMPLE)])
    assert r.exit_code == 0, r.output
    assert "valid" in r.output and "pit2-tcp-07" in r.output


def test_cli_check_invalid_exits_1_with_the_problems(tmp_path):
    f = tmp_path / "t.toml"
    f.write_text(MINIMAL.replace("seats = 3", "seats = 9"))
    r = CliRunner().invoke(main, ["config", "check", str(f)])
    assert r.exit_code == 1
    assert f"{f}:3: table.seats: 9 is out of range; allowed: 1..7" in r.output


def test_cli_show_prints_effective_config_as_toml_and_json(tmp_path):
    f = tmp_path / "t.toml"
    f.write_text(MINIMAL)
    r = CliRunner().invoke(main, ["config", "show", str(f)])
    assert r.exit_code == 0, r.output
    assert parse_config(r.output) == parse_config(MINIMAL)
    assert 'path = "/var/lib/threecard/journal.sqlite3"' in r.output
    r = CliRunner().invoke(main, ["config", "show", "--json", str(f)])
    assert json.loads(r.output)["decks"] == [{"id": "A", "back_colour": "red"}, {"id": "B", "back_colour": "blue"}]


def test_config_is_a_frozen_dataclass_tree():
    cfg = parse_config(MINIMAL)
    assert isinstance(cfg, TableConfig)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.table.seats = 5  # type: ignore[misc]


def test_firmware_allowlist_per_device_reaches_the_link_and_reads_back():
    cfg = parse_config(MINIMAL.replace('url = "/dev/threecard/shoe"',
                                       'url = "/dev/threecard/shoe"\nfirmware_allowlist = ["1.0.*", "1.1.2"]'))
    shoe, shuffler = cfg.link.link_config(cfg.devices.shoe), cfg.link.link_config(cfg.devices.shuffler)
    assert (shoe.firmware_allowlist, shuffler.firmware_allowlist) == (("1.0.*", "1.1.2"), ())
    assert parse_config(cfg.to_toml()) == cfg


@pytest.mark.parametrize("value", ['"1.0.*"', "[1, 2]", '[""]'])
def test_a_bad_firmware_allowlist_names_the_key(value):
    with pytest.raises(ConfigError) as info:
        parse_config(MINIMAL.replace('url = "/dev/threecard/shoe"',
                                     f'url = "/dev/threecard/shoe"\nfirmware_allowlist = {value}'))
    assert "devices.shoe.firmware_allowlist" in str(info.value)


# -- [limits] (issue 23) ---------------------------------------------------------------------------


def test_limits_default_when_the_config_sets_none_and_take_the_fixed_bets():
    from table.bets import DEFAULT_LIMITS, BetBook

    lim = parse_config(MINIMAL).limits.table_limits()
    assert lim == DEFAULT_LIMITS
    book = BetBook(lim, 3)
    assert book.place(1, ante=1000, pair_plus=500, six_card=500, progressive=100) is not None


def test_the_example_config_sets_limits():
    lim = load_config(EXAMPLE).limits.table_limits()
    assert (lim.ante.minimum_cents, lim.ante.maximum_cents, lim.ante.chip_cents) == (500, 50_000, 100)
    assert lim.progressive.minimum_cents == lim.progressive.maximum_cents == 100


def test_limits_a_kind_without_its_own_chip_takes_the_tables():
    lim = parse_config(MINIMAL + "[limits]\nchip_cents = 500\n[limits.ante]\nminimum_cents = 1000\n"
                                 "maximum_cents = 20000\n[limits.progressive]\nminimum_cents = 100\n"
                                 "maximum_cents = 100\nchip_cents = 100\n").limits.table_limits()
    assert (lim.ante.chip_cents, lim.progressive.chip_cents) == (500, 100)


@pytest.mark.parametrize("body, key, line, words", [
    ("[limits.ante]\nminimum_cents = 1000\nmaximum_cents = 500\n", "limits.ante.maximum_cents", 12,
     "below minimum_cents (1000)"),
    ("[limits.ante]\nminimum_cents = 250\nmaximum_cents = 5000\n", "limits.ante.minimum_cents", 11,
     "not a multiple of chip_cents (100)"),
    ("[limits]\nchip_cents = 500\n[limits.pair_plus]\nminimum_cents = 100\nmaximum_cents = 5000\n",
     "limits.pair_plus.minimum_cents", 13, "below one chip (500 cents)"),
    ("[limits.progressive]\nminimum_cents = 100\n", "limits.progressive.maximum_cents", 10, "missing required key"),
    ("[limits.ante]\nminimum_cents = 0\nmaximum_cents = 5000\n", "limits.ante.minimum_cents", 11, "out of range"),
    ("[limits.ante]\nminimum_cents = 500\nmaximum_cents = 5.5\n", "limits.ante.maximum_cents", 12,
     "expected an integer"),
    ("[limits.antes]\nminimum_cents = 500\nmaximum_cents = 5000\n", "limits.antes", 10, "did you mean 'ante'"),
])
def test_limits_problems_name_the_file_line_and_key(body, key, line, words):
    p = only(MINIMAL + body)
    assert p.key == key and words in p.message, p
    assert p.line == line, p
    assert p.render("table.toml").startswith(f"table.toml:{line}: {key}: ")


def test_cli_check_names_a_bad_limit(tmp_path):
    f = tmp_path / "t.toml"
    f.write_text(MINIMAL + "[limits.six_card]\nminimum_cents = 500\nmaximum_cents = 250\n")
    r = CliRunner().invoke(main, ["config", "check", str(f)])
    assert r.exit_code == 1
    assert f"{f}:12: limits.six_card.maximum_cents: 250 is below minimum_cents (500)" in r.output
