"""Every module of vtop stays at most 500 lines: small enough to read in one sitting.

CONTRIBUTING asks for small modules with one job each. Without a ceiling that holds, a module
grows one function at a time until it does two jobs and nobody can say which; by the time the
count is noticed, the seam between them is hard to find. There is no exception list: a module
that needs more lines has more than one job, and the fix is to split it where they part.
`test_an_oversized_module_is_named` plants one, so the ceiling can fail.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "vtop"
MAX_LINES = 500


def oversized(package: Path, limit: int = MAX_LINES) -> list[str]:
    """Each module under `package` over `limit` lines, as `vtop/x/y.py (N lines)`."""
    found = []
    for path in sorted(package.rglob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            found.append(f"{path.relative_to(package.parent).as_posix()} ({lines} lines)")
    return found


def test_every_module_is_at_most_500_lines() -> None:
    assert (PACKAGE / "__init__.py").is_file(), PACKAGE
    over = oversized(PACKAGE)
    why = f"over {MAX_LINES} lines, each to split where its jobs part"
    assert not over, f"{why}: {', '.join(over)}"


def test_an_oversized_module_is_named(tmp_path: Path) -> None:
    package = tmp_path / "vtop"
    (package / "sub").mkdir(parents=True)
    (package / "small.py").write_text("x = 1\n" * MAX_LINES)
    (package / "sub" / "big.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert oversized(package) == ["vtop/sub/big.py (501 lines)"]
