"""Small objects with one job (issue 22): no class of the project over 600 lines, no
function over 80 lines unless a comment right above its ``def`` (``# long: why``)
says why it is one piece. Read from the code with ``ast``, as anyone can repeat."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("protocols", "firmware_bridge", "devices", "simulators", "table", "bench")
MAX_CLASS = 600
MAX_FUNCTION = 80


def oversized(root: Path) -> list[str]:
    """Every class over :data:`MAX_CLASS` lines, and every function over
    :data:`MAX_FUNCTION` lines with no ``# long:`` reason above it, as ``path:line name (n lines)``."""
    out = []
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            lines = path.read_text().splitlines()
            for node in ast.walk(ast.parse("\n".join(lines), str(path))):
                n = node.end_lineno - node.lineno + 1 if hasattr(node, "end_lineno") else 0
                where = f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"
                if isinstance(node, ast.ClassDef) and n > MAX_CLASS:
                    out.append(f"{where} class {node.name} ({n} lines > {MAX_CLASS})")
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and n > MAX_FUNCTION:
                    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                    above = lines[first - 2].strip() if first >= 2 else ""
                    if not above.startswith("# long:") or len(above) < len("# long: ") + 10:
                        out.append(f"{where} {node.name} ({n} lines > {MAX_FUNCTION}, no '# long:' reason above)")
    return out


def test_no_class_or_function_is_oversized():
    assert oversized(REPO) == []


def test_the_size_check_finds_a_long_function_and_takes_a_reason(tmp_path):
    (tmp_path / "table").mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION))
    (tmp_path / "table" / "a.py").write_text(f"def long_one():\n{body}\n\n# long: one table of data, read as one\n"
                                             f"def explained():\n{body}")
    found = oversized(tmp_path)
    assert len(found) == 1 and "long_one" in found[0], found


def test_the_size_check_finds_a_long_class(tmp_path):
    (tmp_path / "table").mkdir()
    methods = "".join(f"    def m{i}(self):\n        return {i}\n\n" for i in range(MAX_CLASS // 3 + 1))
    (tmp_path / "table" / "b.py").write_text(f"class Big:\n{methods}")
    assert [line for line in oversized(tmp_path) if "class Big" in line]
