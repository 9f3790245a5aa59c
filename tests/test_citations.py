"""Every reference in the product resolves inside the repository.

Product code and docs cite a regulation section, a section of
``protocols/SPEC.md``, or a document in the repository (``docs/``, and the
decision records in ``docs/decisions/``). A reader who has only the repository
must find the rule, decision or pitfall a comment points at, and so must an
auditor reading a journal entry. So this test fails on:

- an "issue N" (a tracker that is not in the repository), and
- a mention of a ``.md`` document that does not exist in the repository
  (resolved against the citing file's folder, the repository root, ``docs/``,
  and ``protocols/`` for ``SPEC.md``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from protocols.cards import BackColour
from table.custody import CITATIONS, CustodyViolation, DeckCustody, Rule

REPO = Path(__file__).resolve().parent.parent
#: what ships: the packages, their data, the docs and the build/deploy files
PRODUCT = ("protocols", "firmware_bridge", "devices", "simulators", "table", "udev", "scripts", "bench",
           "examples", "deploy", "docs", "README.md", "pyproject.toml")
#: generated or vendored trees, never written by hand
SKIP_PARTS = {"__pycache__", ".venv", "node_modules", "build", "dist", ".pytest_cache", ".mypy_cache"}
TEXT_SUFFIXES = {".py", ".md", ".toml", ".txt", ".rules", ".service", ".conf", ".json", ".html", ".js", ".css",
                 ".svg", ".cfg", ".ini", ".yml", ".yaml", ".sh", ".acl", ""}

#: a regulation section, or a section of the link protocol's SPEC
SOURCE = re.compile(r"58 Pa\. Code \d|COMAR \d|CA TCP standards|K\.A\.R\. \d|protocols/SPEC\.md|SPEC §")
ISSUE = re.compile(r"\bissues?\s*#?\d+", re.IGNORECASE)
MD_MENTION = re.compile(r"[\w./-]+\.md\b")


def product_files() -> list[Path]:
    """Every hand-written text file of the product, sorted."""
    out = []
    for name in PRODUCT:
        top = REPO / name
        paths = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        for path in paths:
            rel = path.relative_to(REPO)
            if SKIP_PARTS & set(rel.parts) or any(part.endswith(".egg-info") for part in rel.parts):
                continue
            if path.suffix not in TEXT_SUFFIXES:
                continue
            try:
                out.append((rel, path.read_text(encoding="utf-8")))
            except UnicodeDecodeError:
                continue
    return out


FILES = product_files()


def resolves(mention: str, cited_from: Path) -> bool:
    """True if the ``.md`` document ``mention`` exists in the repository, read from ``cited_from``."""
    mention = mention.lstrip("./") if not mention.startswith("../") else mention
    bases = [(REPO / cited_from).parent, REPO, REPO / "docs", REPO / "protocols"]
    for base in bases:
        target = (base / mention).resolve()
        if target.is_file() and REPO in target.parents:
            return True
    return False


def test_the_product_has_files_to_check():
    """The scan reads the product (a scan of nothing would pass anything)."""
    names = {str(rel) for rel, _ in FILES}
    assert "table/custody.py" in names and "docs/journal.md" in names and "README.md" in names


def test_no_issue_tracker_citations():
    """No "issue N": the tracker is not in the repository; decisions live in docs/decisions/."""
    found = [f"{rel}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
             for rel, text in FILES for m in ISSUE.finditer(text)]
    assert not found, "cites an issue tracker the repository does not ship:\n" + "\n".join(found)


def test_every_cited_document_is_in_the_repository():
    """Every ``.md`` a file mentions exists in the repository (no DESIGN.md, no ../shared)."""
    missing = [f"{rel}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
               for rel, text in FILES for m in MD_MENTION.finditer(text) if not resolves(m.group(0), rel)]
    assert not missing, "cites a document that is not in the repository:\n" + "\n".join(missing)


def test_no_citation_leaves_the_repository():
    """Nothing points at a folder beside the repository (``../shared``)."""
    found = [f"{rel}:{text.count(chr(10), 0, m.start()) + 1}"
             for rel, text in FILES for m in re.finditer(r"\.\./shared\b", text)]
    assert not found, "cites a path outside the repository:\n" + "\n".join(found)


def self_contained(citation: str) -> bool:
    """True if ``citation`` names a regulation section or SPEC section, and every document it
    names is in the repository."""
    docs = MD_MENTION.findall(citation)
    return bool(SOURCE.search(citation)) and all(resolves(d, Path("table/custody.py")) for d in docs)


@pytest.mark.parametrize("rule", list(Rule))
def test_every_custody_rule_cites_a_source_the_repository_holds(rule):
    """The citation a violation carries into the journal names a regulation or SPEC section,
    and any document it names ships with the product (an auditor has only the repository)."""
    assert self_contained(CITATIONS[rule]), f"{rule.value}: {CITATIONS[rule]!r}"


def test_a_deck_step_out_of_order_carries_a_citation_an_auditor_can_follow():
    """A shuffle started on a deck never put into the shuffler is out of order; the
    violation the journal records cites 649a.3(b) and the custody page that ships."""
    custody = DeckCustody([("A", BackColour.RED), ("B", BackColour.BLUE)])
    with pytest.raises(CustodyViolation) as e:
        custody.on_shuffle_started(BackColour.RED)
    assert e.value.rule is Rule.OUT_OF_ORDER
    assert self_contained(e.value.citation)
    assert "649a.3(b)" in e.value.citation and "docs/deck-custody.md" in e.value.citation


@pytest.mark.parametrize("citation, ok", [
    ("deck custody procedure (DESIGN.md)", False),
    ("COMAR 36.05.03.27 C (a deck with a wrong count is removed)", True),
    ("protocols/SPEC.md 4.5 (events by device kind)", True),
    ("58 Pa. Code 649a.3(b) (docs/no-such-page.md)", False),
])
def test_self_contained_rule(citation, ok):
    """The citation check refuses a citation of nothing or of a document that is not shipped."""
    assert self_contained(citation) is ok


def test_no_citation_of_the_design_brief():
    """The design brief the project started from is not shipped: a rule it carried is cited by its
    regulation section or written into docs/ (a reading of a provision: docs/decisions/)."""
    found = [f"{rel}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
             for rel, text in FILES for m in re.finditer(r"\b(?:project|design) brief\b", text, re.IGNORECASE)]
    assert not found, "cites the design brief, which the repository does not ship:\n" + "\n".join(found)


def test_every_numbered_reference_is_listed_in_docs_sources():
    """A "reference NNN" (a published text the rules were read from) is listed in docs/sources.md,
    so a reader with only the repository knows which text it is."""
    sources = (REPO / "docs" / "sources.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| (\d{3}) \|", sources, re.MULTILINE))
    cited = {(f"{rel}:{text.count(chr(10), 0, m.start()) + 1}", m.group(1))
             for rel, text in FILES for m in re.finditer(r"\breferences? (\d{3})\b", text)}
    assert cited, "the scan found no numbered reference (the paytables cite some)"
    missing = sorted(f"{where}: reference {n}" for where, n in cited if n not in listed)
    assert not missing, "a numbered reference docs/sources.md does not list:\n" + "\n".join(missing)


@pytest.mark.parametrize("text, cited_from, ok", [
    ("DESIGN.md", "table/custody.py", False),
    ("SPEC.md", "table/custody.py", True),
    ("protocols/SPEC.md", "table/custody.py", True),
    ("docs/journal.md", "table/custody.py", True),
    ("journal.md", "docs/drivers.md", True),
    ("../protocols/SPEC.md", "docs/drivers.md", True),
    ("../../shared/DESIGN.md", "docs/drivers.md", False),
])
def test_resolution_rule(text, cited_from, ok):
    """The resolver finds documents that exist and refuses those that do not."""
    assert resolves(text, Path(cited_from)) is ok
