"""The parts the table controller conducts (``docs/architecture.md``, "The procedure").

Each module has one job and says what it may touch: :mod:`.state` (what the
parts share), :mod:`.intake` (device events), :mod:`.decks` (the deck
procedure), :mod:`.round_play` (one round, its steps in order), :mod:`.holds`
(holds and voids), :mod:`.startup` (recovery and anchors), :mod:`.table_day`
(the gaming day's procedures by people). None imports a front
door, the CLI or the bench, nor :mod:`table.controller`.
"""
