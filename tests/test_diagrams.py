"""The mermaid state diagrams in docs/ are those of the machines as defined now."""

from table.diagrams import DOCS, documents


def test_diagrams_are_current():
    for name, text in documents().items():
        path = DOCS / name
        assert path.exists(), f"docs/{name} missing: run python -m table.diagrams --write"
        assert path.read_text() == text, f"docs/{name} is stale: run python -m table.diagrams --write"


def test_diagrams_show_every_transition():
    from table.custody import DECK_TRANSITIONS
    from table.round import ROUND_TRANSITIONS

    docs = documents()
    for t in DECK_TRANSITIONS:
        assert f": {t['trigger']}" in docs["deck-custody.md"] or f"| {t['trigger']}" in docs["deck-custody.md"]
    for t in ROUND_TRANSITIONS:
        assert t["trigger"] in docs["round-procedure.md"]
