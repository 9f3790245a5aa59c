"""A card-recognition shoe speaking the ASCII line protocol (SPEC.md), as a table driver plugin.

``threecard_ascii_shoe.driver.PLUGIN`` is the entry point ``ascii-shoe`` of
group ``threecard.devices``; ``threecard_ascii_shoe.emulator`` is the shoe's
emulator (``ascii-shoe-emulator``).
"""

__version__ = "1.0.0"
