"""Shared by ``bench/heartbeat.py`` and ``bench/idle.py``: run a measuring script in a
checkout (this one, and another given with ``--baseline``) in a process of its own, and
alternate the checkouts ``--pairs`` times, so both see the same load on a shared machine."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent


def add_arguments(ap: argparse.ArgumentParser, pairs: int) -> None:
    """Add ``--pairs`` (default ``pairs``) and ``--baseline DIR`` to ``ap``."""
    ap.add_argument("--pairs", type=int, default=pairs)
    ap.add_argument("--baseline", help="another checkout to compare with (git archive <commit> | tar -x -C DIR)")


def trees(baseline: str | None) -> dict[str, Path]:
    """``{"this": this checkout}``, and ``"base"``: the ``baseline`` folder when given."""
    out = {"this": ROOT}
    if baseline:
        out["base"] = Path(baseline).resolve()
    return out


def measure(tree: Path, script: str, args: list[str], timeout_s: float) -> dict:
    """``python -c script ARGS`` run in checkout ``tree`` (its working folder, which the
    script puts first on ``sys.path``): the JSON object on its last line of stdout. Exits
    with the end of its stderr when it fails; ``subprocess.TimeoutExpired`` after
    ``timeout_s`` seconds."""
    r = subprocess.run([sys.executable, "-c", script, *args], cwd=tree, capture_output=True, text=True,
                       timeout=timeout_s)
    if r.returncode:
        raise SystemExit(f"{tree}: {r.stderr.strip()[-600:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def alternate(checkouts: dict[str, Path], pairs: int, one: Callable[[Path], dict]) -> dict[str, list[dict]]:
    """``one(tree)`` for each checkout in turn, ``pairs`` times: name -> its results in order."""
    runs: dict[str, list[dict]] = {name: [] for name in checkouts}
    for _ in range(pairs):
        for name, tree in checkouts.items():
            runs[name].append(one(tree))
    return runs
