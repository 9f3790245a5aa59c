"""A table's config file for tests that run ``tablectl run --config``: the two decks of
the procedure (A red, B blue), the devices' URLs, and whatever sections a test adds."""

from __future__ import annotations

from pathlib import Path


def table_toml(table_id: str, seats: int, shuffler_url: str | Path, shoe_url: str | Path, extra: str = "") -> str:
    """The TOML text: ``[table]``, the two ``[[decks]]``, ``[devices.shuffler]`` and
    ``[devices.shoe]``, then ``extra`` (more sections, as TOML text)."""
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
[devices.shoe]
url = "{shoe_url}"
{extra.strip()}
"""
