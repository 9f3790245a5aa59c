"""Options shared by several ``tablectl`` subcommands."""

from __future__ import annotations

import click

#: ``--profile NAME``: the rules profile ranking the hands (docs/rules-profiles.md).
#: The choices are listed here, not read from :mod:`table.rules.profiles`, so that
#: building the option imports nothing; a test checks the two lists agree.
PROFILE_NAMES = ("california", "california-literal", "pennsylvania")

profile_option = click.option(
    "--profile",
    "profile_name",
    type=click.Choice(PROFILE_NAMES, case_sensitive=False),
    default=None,
    help="Rules profile (default: pennsylvania, or the round file's).",
)
