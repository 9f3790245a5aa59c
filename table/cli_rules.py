"""Rules-engine subcommands of ``tablectl`` (hand, settle, paytable)."""

from __future__ import annotations

import click


def register(group: click.Group) -> None:
    """Add the rules-engine subcommands to the ``tablectl`` group."""
