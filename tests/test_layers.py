"""The layer rule of docs/architecture.md, read from the code's imports with ``ast``.

Imports point down only: ``protocols`` imports nothing of the project;
``simulators`` imports ``protocols``; ``firmware_bridge`` imports
``protocols``; ``devices`` imports ``firmware_bridge`` and ``protocols``;
nothing below ``table`` imports ``table``. Inside ``table`` the rooms stand
cli > (service, hil, floor) > interfaces > core: the core (``table/*.py`` and
``table/rules/``) never imports a room above it. No module takes part in an
import circle. Every import counts, at module level or inside a function.

A device driver package (``examples/*/``, and any vendor's) imports only the
published driver contract ``devices.contract`` and ``protocols`` of the project
(its tests: ``devices`` and ``protocols``), never the table's core
(docs/drivers.md).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("protocols", "firmware_bridge", "devices", "simulators", "table")
ROOMS = ("cli", "interfaces", "service", "hil", "floor")

#: what each layer may import, besides itself
LAYER_MAY_IMPORT = {
    "protocols": set(),
    "simulators": {"protocols"},
    "firmware_bridge": {"protocols"},
    "devices": {"firmware_bridge", "protocols"},
    "table": {"protocols", "firmware_bridge", "devices", "simulators"},
}
#: which rooms inside ``table`` each room may import ("core" = table's top and rules/)
ROOM_MAY_IMPORT = {
    "core": {"core"},
    "interfaces": {"core", "interfaces"},
    "service": {"core", "interfaces", "service"},
    "hil": {"core", "interfaces", "hil"},
    # the floor service: reads what tables signed (core journal/keys, interfaces' MQTT checks), never the procedure
    "floor": {"core", "interfaces", "floor"},
    "cli": {"core", "interfaces", "service", "hil", "floor", "cli"},
}


#: core modules the floor never imports: it reads what tables signed, never runs their procedure
FLOOR_MAY_NOT = ("table.controller", "table.procedure", "table.round", "table.recovery", "table.console",
                 "table.custody")


def modules(root: Path) -> dict[str, Path]:
    """Module name -> file, for every ``.py`` of the project's packages under ``root``."""
    out = {}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules ``name`` (at ``path``) imports, resolved to module names."""
    tree = ast.parse(path.read_text(), str(path))
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:  # "table.rules.settlement.Tables" -> the module it names
                t = t.rpartition(".")[0]
            if t and t.split(".")[0] in PACKAGES and t != name:
                found.add(t)
    return found


def room(module: str) -> str:
    """The room of a ``table`` module: ``cli``, ``interfaces``, ``service``, ``hil``, ``floor`` or ``core``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ROOMS else "core"


def violations(root: Path) -> list[str]:
    """Every import that breaks the layer rule or the room rule, as readable lines."""
    mods = modules(root)
    known = set(mods)
    out = []
    for name, path in mods.items():
        layer = name.split(".")[0]
        for target in sorted(imports(name, path, known)):
            tlayer = target.split(".")[0]
            if tlayer != layer and tlayer not in LAYER_MAY_IMPORT[layer]:
                out.append(f"{name} imports {target}: {layer} may import only {sorted(LAYER_MAY_IMPORT[layer])}")
            elif layer == tlayer == "table" and room(target) not in ROOM_MAY_IMPORT[room(name)]:
                out.append(f"{name} ({room(name)}) imports {target} ({room(target)}): "
                           f"{room(name)} may import only {sorted(ROOM_MAY_IMPORT[room(name)])}")
            elif layer == "table" and room(name) == "floor" and any(
                    target == f or target.startswith(f + ".") for f in FLOOR_MAY_NOT):
                out.append(f"{name} (floor) imports {target}: the floor reads what tables signed, never the "
                           "table's procedure")
    return out


def circles(root: Path) -> list[list[str]]:
    """The import circles (strongly connected components of more than one module)."""
    mods = modules(root)
    known = set(mods)
    graph = {n: imports(n, p, known) for n, p in mods.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:  # Tarjan, iterative enough for this tree's depth
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_imports_point_down_only():
    assert violations(REPO) == []


def test_no_import_circle():
    assert circles(REPO) == []


#: the conductor and the vendor facade above the procedure's parts: a part never imports them
ABOVE_THE_PARTS = ("table.controller", "table.api")


def part_violations(root: Path) -> list[str]:
    """Imports by a part of ``table/procedure/`` of the conductor, the vendor facade, or
    anything outside the core (a front door, the CLI, the service, the bench): the
    parts are conducted; they never reach up (docs/architecture.md, "The procedure")."""
    mods = modules(root)
    known = set(mods) | {"bench"}
    out = []
    for name, path in mods.items():
        if not name.startswith("table.procedure"):
            continue
        for target in sorted(imports(name, path, known)):
            if target in ABOVE_THE_PARTS or (target.startswith("table.") and room(target) != "core"):
                out.append(f"{name} imports {target}: a part of the procedure imports only the core below it")
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            mod = (node.module or "") if isinstance(node, ast.ImportFrom) and not node.level else ""
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [mod]
            if any(n == "bench" or n.startswith("bench.") for n in names):
                out.append(f"{name} imports {names[0]}: a part of the procedure never imports the bench")
    return out


def test_the_procedure_parts_never_reach_up():
    assert [m for m in modules(REPO) if m.startswith("table.procedure.")], "the parts are where the docs say"
    assert part_violations(REPO) == []


@pytest.mark.parametrize(("text", "expected"), [
    ("from ..controller import TableController\n", "imports table.controller"),
    ("from table.interfaces.web import X\n", "imports table.interfaces.web"),
    ("def f():\n    from ..cli.run import run_command\n", "imports table.cli.run"),
    ("import bench.rounds\n", "never imports the bench"),
])
def test_the_part_checker_catches_a_part_reaching_up(tmp_path, text, expected):
    root = _plant(tmp_path, {"table/controller.py": "", "table/procedure/__init__.py": "",
                             "table/procedure/intake.py": text, "table/interfaces/__init__.py": "",
                             "table/interfaces/web.py": "", "table/cli/__init__.py": "", "table/cli/run.py": ""})
    found = part_violations(root)
    assert any(expected in line for line in found), found


def test_no_cli_module_in_the_core():
    assert not [p.name for p in (REPO / "table").glob("cli_*.py")]


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir(parents=True, exist_ok=True)
        (tmp_path / pkg / "__init__.py").write_text("")
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


@pytest.mark.parametrize(("files", "expected"), [
    ({"protocols/frame.py": "import table.journal\n", "table/journal.py": ""}, "protocols.frame imports table.journal"),
    ({"simulators/emu.py": "from devices.drivers import Shuffler\n", "devices/drivers.py": ""},
     "simulators.emu imports devices.drivers"),
    ({"table/controller.py": "def f():\n    from .interfaces.mqtt import X\n", "table/interfaces/__init__.py": "",
      "table/interfaces/mqtt.py": ""}, "table.controller (core) imports table.interfaces.mqtt"),
    ({"table/interfaces/web.py": "from table.cli.run import run_command\n", "table/interfaces/__init__.py": "",
      "table/cli/__init__.py": "", "table/cli/run.py": ""}, "table.interfaces.web (interfaces) imports table.cli.run"),
    ({"table/floor/ingest.py": "from table.controller import TableController\n", "table/floor/__init__.py": "",
      "table/controller.py": ""}, "table.floor.ingest (floor) imports table.controller"),
    ({"table/floor/web.py": "def f():\n    from table.procedure.state import TableState\n", "table/floor/__init__.py": "",
      "table/procedure/__init__.py": "", "table/procedure/state.py": ""}, "table.floor.web (floor) imports table.procedure"),
    ({"table/floor/ingest.py": "import table.hil.chaos\n", "table/floor/__init__.py": "",
      "table/hil/__init__.py": "", "table/hil/chaos.py": ""}, "table.floor.ingest (floor) imports table.hil.chaos"),
])
def test_the_checker_catches_a_planted_violation(tmp_path, files, expected):
    found = violations(_plant(tmp_path, files))
    assert any(line.startswith(expected) for line in found), found


def test_the_checker_catches_a_planted_circle(tmp_path):
    root = _plant(tmp_path, {"table/rules/__init__.py": "", "table/rules/bank.py": "from .settlement import A\n",
                             "table/rules/settlement.py": "from .bank import B\n"})
    assert circles(root) == [["table.rules.bank", "table.rules.settlement"]]


#: what a driver package's own modules may import of the project (docs/drivers.md)
DRIVER_MAY_IMPORT = ("devices.contract", "protocols")
#: and its tests (the conformance suite and the plugin loader are in devices/)
DRIVER_TESTS_MAY_IMPORT = ("devices", "protocols")


def driver_violations(package_dir: Path) -> list[str]:
    """Every import of the project's packages by a driver package at ``package_dir``
    (a folder with a pyproject) that is not the published contract."""
    out = []
    for path in sorted(package_dir.rglob("*.py")):
        rel = path.relative_to(package_dir)
        allowed = DRIVER_TESTS_MAY_IMPORT if rel.parts[0] == "tests" else DRIVER_MAY_IMPORT
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in PACKAGES and not any(name == a or name.startswith(a + ".") for a in allowed):
                    out.append(f"{rel} imports {name}: a driver package may import only {list(allowed)}")
    return out


def driver_packages(root: Path) -> list[Path]:
    return sorted(p.parent for p in (root / "examples").glob("*/pyproject.toml"))


def test_driver_packages_import_only_the_contract():
    packages = driver_packages(REPO)
    assert [p.name for p in packages] == ["ascii-shoe"]  # not OK on nothing found
    assert {p.name: driver_violations(p) for p in packages} == {"ascii-shoe": []}


def test_the_checker_catches_a_driver_reaching_into_the_table(tmp_path):
    pkg = tmp_path / "examples" / "acme"
    (pkg / "acme").mkdir(parents=True)
    (pkg / "pyproject.toml").write_text("")
    (pkg / "acme" / "driver.py").write_text("from devices.contract import EventLink\n"
                                            "def f():\n    from table.controller import TableController\n"
                                            "import firmware_bridge.link\n")
    assert driver_packages(tmp_path) == [pkg]
    assert driver_violations(pkg) == [
        "acme/driver.py imports firmware_bridge.link: a driver package may import only ['devices.contract', 'protocols']",
        "acme/driver.py imports table.controller: a driver package may import only ['devices.contract', 'protocols']",
    ]


#: the table's side of a driver process (devices/apart/) never loads a driver: no plugin
#: loader, no driver code; only the driver process (devices.apart.host) does (docs/drivers.md)
APART_TABLE_SIDE = ("devices.apart.proxy", "devices.apart.wire", "devices.apart.isolation")
APART_TABLE_SIDE_MAY_NOT = ("devices.plugins", "devices.drivers", "devices.apart.host")


def apart_violations(root: Path) -> list[str]:
    """Every import by the table's side of a driver process of what loads or is a driver."""
    mods = modules(root)
    known = set(mods)
    out = []
    for name in APART_TABLE_SIDE:
        if name not in mods:
            out.append(f"{name} is missing")
            continue
        for target in sorted(imports(name, mods[name], known)):
            if target in APART_TABLE_SIDE_MAY_NOT:
                out.append(f"{name} imports {target}: the table's side of a driver process never loads a driver")
    return out


def test_the_table_side_of_a_driver_process_never_loads_a_driver():
    assert apart_violations(REPO) == []


def test_the_checker_catches_the_table_side_loading_a_driver(tmp_path):
    root = _plant(tmp_path, {"devices/__init__.py": "", "devices/plugins.py": "", "devices/apart/__init__.py": "",
                             "devices/apart/proxy.py": "def f():\n    from devices.plugins import load_plugin\n",
                             "devices/apart/wire.py": "", "devices/apart/isolation.py": ""})
    assert apart_violations(root) == ["devices.apart.proxy imports devices.plugins: the table's side of a driver "
                                      "process never loads a driver"]


#: what the gaming day's room (``table/day/``) never imports: it reads and writes the record,
#: it never conducts the table (docs/architecture.md, the core's ``day/``)
DAY_MAY_NOT = ("table.procedure", "table.controller", "table.api", "table.assembly", "table.console",
               "table.recovery")


def test_the_day_room_never_reaches_into_the_procedure():
    mods = modules(REPO)
    day = [m for m in mods if m.startswith("table.day.")]
    assert {"table.day.gaming_day", "table.day.day_report", "table.day.segments", "table.day.archive_files",
            "table.day.signed_report"} <= set(day), "the day's room is where the docs say"
    known = set(mods)
    bad = [f"{name} imports {target}" for name in day for target in sorted(imports(name, mods[name], known))
           if any(target == f or target.startswith(f + ".") for f in DAY_MAY_NOT)]
    assert bad == []
