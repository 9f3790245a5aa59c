"""A table as tests build it: its config file (``tablectl run --config``: the two decks of
the procedure, A red and B blue, the devices' URLs, and whatever sections a test adds),
the table assembled on a simulated table as every table is, and a vendor's driver package
installed on the path."""

from __future__ import annotations

from pathlib import Path


def table_toml(table_id: str, seats: int, shuffler_url: str | Path, shoe_url: str | Path, extra: str = "",
               *, shuffler: str = "") -> str:
    """The TOML text: ``[table]``, the two ``[[decks]]``, ``[devices.shuffler]`` (its url, then
    ``shuffler``: more of its keys, as TOML lines) and ``[devices.shoe]``, then ``extra`` (more
    of the shoe's keys and more sections, as TOML text)."""
    return f"""[table]
id = "{table_id}"
seats = {seats}
[[decks]]
id = "A"
back_colour = "red"
[[decks]]
id = "B"
back_colour = "blue"
[devices.shuffler]
url = "{shuffler_url}"
{shuffler.strip() + chr(10) if shuffler.strip() else ""}[devices.shoe]
url = "{shoe_url}"
{extra.strip()}
"""


def assembled(sim, journal, *, dealer=None, console=None, auto_dealer=True, decide=None, players=None, **spec):
    """The table on simulated table ``sim``'s emulators, assembled as every table is
    (``table.assembly.assemble``: the built-in drivers, decks A red and B blue, the
    PA ante bonus paytable unless ``tables=`` says otherwise), with ``journal``; ``spec``:
    more of :class:`~table.assembly.TableSpec` (``seats``, ``timing``, ``limits`` ...).
    A context manager: the :class:`~table.assembly.AssembledTable`, closed in reverse."""
    from devices.contract import DriverKind
    from protocols.cards import BackColour
    from table.assembly import DeviceSpec, People, TableSpec, assemble
    from table.rules.settlement import Tables
    from table.rules.strategy import q64_player

    spec.setdefault("tables", Tables.load("pa-649a12b-1"))
    # the in-process form, chosen explicitly: cheaper for the many tables the tests build
    # (tests/test_drivers_apart*.py deal with the drivers apart, as a table does by default)
    table = TableSpec(shuffler=DeviceSpec(DriverKind.SHUFFLER, sim.shuffler_url, apart="none"),
                      shoe=DeviceSpec(DriverKind.SHOE, sim.shoe_url, apart="none"),
                      decks=(("A", BackColour.RED), ("B", BackColour.BLUE)), **spec)
    return assemble(table, People(dealer or sim.dealer, decide or q64_player, console, auto_dealer, players),
                    journal=journal)


def install_drivers(folder: Path, monkeypatch, package: str, version: str, modules: dict[str, str],
                    drivers: dict[str, str]) -> Path:
    """A vendor's driver package as pip installs it, on ``sys.path`` for the test
    (``monkeypatch``): each of ``modules`` (module name -> its source) in ``folder``, and
    ``package``'s dist-info there with ``version`` and the ``threecard.devices`` entry
    points ``drivers`` (driver name -> ``module:ATTR``). Returns ``folder``."""
    for name, source in modules.items():
        (folder / f"{name}.py").write_text(source)
    info = folder / f"{package.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text("[threecard.devices]\n" +
                                           "".join(f"{n} = {target}\n" for n, target in drivers.items()))
    monkeypatch.syspath_prepend(str(folder))
    return folder
