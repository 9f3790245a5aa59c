"""The effective settings of one ``tablectl`` run: the table config merged under the command line.

:func:`merge_config` reads the config file and returns the run's effective
options: a value given on the command line wins, then the config's, then the
option's default.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import click
from click.core import ParameterSource

from table.config import DEFAULT_PATH, ConfigError, TableConfig, load_config
from table.firmware import link_config_for

#: run options a config supplies (option name -> how to read it from the config).
_FROM_CONFIG = {
    "seats": lambda c: c.table.seats,
    "deck_colours": lambda c: ",".join(str(d.back_colour) for d in c.decks),
    "ante_bonus": lambda c: c.paytables.ante_bonus,
    "shuffler_url": lambda c: c.devices.shuffler.url,
    "shoe_url": lambda c: c.devices.shoe.url,
    "log_level": lambda c: c.log.level,
    "log_format": lambda c: c.log.format,
}


def given_on_command_line(ctx: click.Context, name: str) -> bool:
    """True when option ``name`` came from the command line (or its envvar), not its default."""
    return ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)


@dataclass
class RunSettings:
    """The effective settings of one run: ``config`` (``None`` without a file) and
    ``options``, the command's option values after merging (same names as the
    command's parameters)."""

    config: TableConfig | None
    options: dict[str, Any] = field(default_factory=dict)

    def link_config(self, device: str, journal: Any = None) -> Any:
        """``LinkConfig`` for ``"shuffler"`` or ``"shoe"`` from the config (``None``: defaults),
        with the firmware versions ``journal``'s updates approve (``table.firmware.link_config_for``)."""
        if self.config is None:
            return None
        return link_config_for(self.config, device, journal)

    def driver(self, device: str) -> tuple[str, dict[str, Any]]:
        """The driver named for ``"shuffler"`` or ``"shoe"`` and its own options
        (``[devices.KIND] driver``; ``("spec", {})`` without a config; docs/drivers.md)."""
        if self.config is None:
            return "spec", {}
        dev = getattr(self.config.devices, device)
        return dev.driver, dict(dev.options)

    def timing(self) -> Any:
        """The controller's ``TableTiming`` from the config (``None``: defaults)."""
        return self.config.link.table_timing() if self.config else None

    def deck_ids(self, default: tuple[str, str] = ("A", "B")) -> tuple[str, str]:
        """The two decks' ids."""
        return (self.config.decks[0].id, self.config.decks[1].id) if self.config else default

    def other_paytables(self) -> dict[str, Any]:
        """``Tables.load`` keyword arguments for the config's side wagers' tables (Pair Plus,
        Six Card Bonus, progressive: every slot but ``ante_bonus``), and the directory
        relative paths are read from."""
        if self.config is None:
            return {}
        kw = {k: v for k, v in self.config.paytables.slots().items() if k != "ante_bonus" and v}
        return {**kw, "base_dir": self.config.base_dir}


def merge_config(ctx: click.Context, config_path: str | None, service: bool) -> RunSettings:
    """Read the config (``config_path``, or :data:`DEFAULT_PATH` in service mode) and
    merge it under ``ctx``'s options. Without either, the options pass unchanged.
    Raises ``click.UsageError`` (exit 2) carrying every config problem."""
    options = dict(ctx.params)
    if not config_path and not service:
        return RunSettings(None, options)
    path = config_path or str(DEFAULT_PATH)
    try:
        cfg = load_config(path)
    except ConfigError as exc:
        raise click.UsageError(f"invalid config:\n{exc}") from None
    if service:
        unsafe = cfg.unsafe_files()
        if unsafe:  # anyone could rewrite the paytables or the key the table runs on
            raise click.UsageError("refusing to run the service on files anyone may change:\n" + "\n".join(unsafe))
    for name, read in _FROM_CONFIG.items():
        if name in options and not given_on_command_line(ctx, name):
            options[name] = read(cfg)
    return RunSettings(cfg, options)
