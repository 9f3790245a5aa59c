"""``tablectl hand CARDS... [--vs] [--profile NAME] [--json]``: a hand's category and ranking key;
with ``--vs`` the six cards are two hands and the verdict."""

from __future__ import annotations

import json

import click

from protocols.cards import parse_cards
from table.rules.hands import dealer_qualifies, evaluate
from table.rules.profiles import get_profile
from table.rules.settlement import hand_to_dict

from .exits import exit_codes
from .options import profile_option as _profile_option


def _cards(tokens: tuple[str, ...]):
    text = " ".join(tokens).replace(",", " ")
    try:
        return parse_cards(text)
    except ValueError as e:
        raise click.ClickException(str(e)) from None


@exit_codes({
    0: "the hand (or the verdict) is on stdout",
    1: "a card cannot be read, or the same card appears twice",
    2: "bad usage, including the wrong number of cards (three, or six with --vs)",
})
@click.command("hand")
@click.argument("cards", nargs=-1, required=True)
@click.option("--vs", "versus", is_flag=True,
              help="Compare: CARDS are six cards, the first hand's three then the second's (dealer) three.")
@_profile_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def hand_cmd(cards: tuple[str, ...], versus: bool, profile_name: str | None, as_json: bool) -> None:
    """Print a hand's category and ranking key; with --vs, which of two hands wins.

    \b
    Examples:
      tablectl hand As Kd Qh
      tablectl hand Qc 6d 4h --vs Qh 6s 3c
    """
    profile = get_profile(profile_name or "pennsylvania")
    cs = _cards(cards)
    want = 6 if versus else 3
    if len(cs) != want:
        raise click.UsageError(f"expected {want} cards{' (three per hand)' if versus else ''}, got {len(cs)}")
    if len(set(cs)) != len(cs):
        raise click.ClickException("the same card appears twice")
    a = evaluate(cs[:3], profile)
    out: dict = {"profile": profile.name, "hand": hand_to_dict(a)}
    if versus:
        b = evaluate(cs[3:], profile)
        verdict = "first hand wins" if a > b else "second hand wins" if b > a else "tie"
        out["vs"] = {**hand_to_dict(b), "qualifies_as_dealer": dealer_qualifies(b)}
        out["result"] = verdict
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return

    def show(label: str, v) -> None:
        click.echo(f"{label}: {' '.join(str(c) for c in v.cards)}  {v.category.label}  ({v.describe()})")
        click.echo(f"  key: {tuple(int(x) for x in v.key)}")

    click.echo(f"profile: {profile.name}")
    show("hand", a)
    if versus:
        show("vs", b)
        click.echo(f"  as the dealer's hand it {'qualifies' if dealer_qualifies(b) else 'does not qualify'}")
        click.echo(f"result: {verdict}")
