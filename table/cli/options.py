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


def parse_deck_colours(text: str, option: str = "--deck-colours"):
    """``"red,blue"`` -> the two decks' :class:`~protocols.cards.BackColour`. Raises
    ``click.BadParameter`` (exit 2) naming ``option`` unless there are exactly two known
    colours and they differ (58 Pa. Code 649a.3(b))."""
    from protocols.cards import BackColour
    from protocols.errors import CardError

    parts = [p for p in text.replace(" ", "").split(",") if p]
    if len(parts) != 2:
        raise click.BadParameter("give two back colours, e.g. red,blue", param_hint=option)
    try:
        a, b = (BackColour.parse(p) for p in parts)
    except CardError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None
    if a == b:
        raise click.BadParameter("the two decks need different back colours (58 Pa. Code 649a.3(b))",
                                 param_hint=option)
    return a, b


def address_option(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[str, int] | None:
    """A click callback: ``HOST:PORT`` -> ``(host, port)`` (None stays None). Raises
    ``click.BadParameter`` (exit 2) for a malformed address."""
    from simulators.standalone import parse_address

    if value is None:
        return None
    try:
        return parse_address(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None

