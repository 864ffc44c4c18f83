"""Rule files -> `Rule` values, with every error as one line: file:line: rule-id: what.

Rules ship in `rules/` (inside the wheel as `vtop/_rules`); users add or replace them, by id,
from `$XDG_CONFIG_HOME/vtop/rules` and from `--rules DIR`, later sources winning. A rule that
only says `{id: X, enabled: false}` switches a shipped rule off (a knob another controller
owns). A broken rule is reported and skipped; the others still load, so one typo in a user rule
never takes the monitor down.

This module reads files and documents and keeps the catalog (which file wins, which ids are
off, which `explains` name no rule); what one rule mapping may say is `ruleparse`'s and
`condparse`'s, whose strict checks it turns into `RuleError` lines.

A file is read only if it is a regular file of at most `cost.MAX_FILE_BYTES` (a FIFO in a rules
directory would block the read forever, a 1 GB file would be parsed for minutes), with at most
`cost.MAX_RULES_PER_FILE` rules; an error line is one line of at most `cost.MAX_ERROR_CHARS`,
whatever it quotes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vtop import untrusted
from vtop.files import read_regular
from vtop.triage import cost
from vtop.triage.condparse import Bad
from vtop.triage.cost import quote
from vtop.triage.ruleparse import RuleParser
from vtop.triage.schema import Rule
from vtop.triage.yamlmarks import LineDict, YamlError, load

_ID = re.compile(r"[a-z][a-z0-9-]*\Z")  # \Z: `$` would let "id\n" through
MAX_ERROR = 2000
"""The longest rule error line: a path, a line, an id and what is wrong, with a quote."""
_ID_LINE = re.compile(r"(?:^|[\s{,-])id:\s*[\"']?([a-z][a-z0-9-]*)")


@dataclass(frozen=True, slots=True)
class RuleError:
    file: str
    line: int
    rule: str
    message: str

    def __str__(self) -> str:
        # One clean line: a YAML error quotes the file, and a file's name is anyone's to choose.
        line = cost.one_line(f"{self.file}:{self.line}: {self.rule or '-'}: {self.message}")
        return untrusted.clean(line, MAX_ERROR)


@dataclass(slots=True)
class Loaded:
    """What a set of files held: rules by id (later files win), ids switched off, errors."""

    rules: dict[str, Rule] = field(default_factory=dict)
    disabled: set[str] = field(default_factory=set)
    errors: list[RuleError] = field(default_factory=list)

    def merge(self, other: Loaded) -> None:
        for rid in other.disabled:
            self.rules.pop(rid, None)
            self.disabled.add(rid)
        for rid, rule in other.rules.items():
            self.rules[rid] = rule
            self.disabled.discard(rid)
        self.errors.extend(other.errors)


def load_text(text: str, file: str) -> Loaded:
    """Rules from one YAML document: one rule mapping, or `rules:` with a list of them."""
    out = Loaded()
    try:
        doc = load(text)
    except YamlError as exc:
        out.errors.append(RuleError(file, exc.line, _id_near(text, exc.start), str(exc)))
        return out
    if doc is None:
        return out
    if isinstance(doc, LineDict) and "rules" in doc and "id" not in doc:
        items = doc["rules"]
        if not isinstance(items, list):
            out.errors.append(RuleError(file, doc.line_of("rules"), "", "rules: expected a list"))
            return out
    else:
        items = [doc]
    if len(items) > cost.MAX_RULES_PER_FILE:
        line = doc.line_of("rules") if isinstance(doc, LineDict) else 1
        msg = f"{len(items)} rules in one file, at most {cost.MAX_RULES_PER_FILE}"
        out.errors.append(RuleError(file, line, "", msg))
        return out
    for item in items:
        if not isinstance(item, LineDict):
            out.errors.append(RuleError(file, getattr(doc, "line", 1), "", "a rule is a mapping"))
            continue
        rid = item.get("id")
        if not isinstance(rid, str) or len(rid) > 64 or not _ID.match(rid):
            msg = f"id must be lower-case words joined by '-', got {quote(rid)}"
            out.errors.append(RuleError(file, item.line_of("id"), "", msg))
            continue
        if rid in out.rules or rid in out.disabled:
            out.errors.append(RuleError(file, item.line, rid, "duplicate rule id"))
            continue
        if item.get("enabled", True) is False:
            if set(item) - {"id", "enabled"}:
                msg = "a disabled rule holds only id and enabled"
                out.errors.append(RuleError(file, item.line_of("enabled"), rid, msg))
            out.disabled.add(rid)
            continue
        try:
            out.rules[rid] = RuleParser(rid).rule(item, file)
        except Bad as exc:
            out.errors.append(RuleError(file, exc.line, rid, exc.message))
    return out


def _id_near(text: str, line: int) -> str:
    """The rule a YAML syntax error is in, read off the text (the document did not parse):
    the last `id:` at or before `line`, else the first one after it; "" if there is none."""
    ids = [
        (n, m.group(1)) for n, raw in enumerate(text.splitlines(), 1) if (m := _ID_LINE.search(raw))
    ]
    before = [rid for n, rid in ids if n <= line]
    return before[-1] if before else (ids[0][1] if ids else "")


def rule_files(paths: Iterable[Path]) -> list[Path]:
    """YAML files named by `paths` (directories are read in name order, not recursively)."""
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(
                sorted(
                    f
                    for f in p.iterdir()
                    if f.suffix in (".yaml", ".yml")
                    and not f.name.startswith(".")
                    and ".test." not in f.name
                )
            )
        else:
            files.append(p)
    return files


def read_bounded(path: Path) -> str:
    """The text of a rule (or rule test) file; OSError or ValueError, one line, for what is
    not a regular file (`files.read_regular`: a FIFO is refused rather than waited on), is
    larger than `cost.MAX_FILE_BYTES` or is not UTF-8."""
    data = read_regular(path, cost.MAX_FILE_BYTES)
    if len(data) > cost.MAX_FILE_BYTES:
        size = path.stat().st_size
        raise ValueError(f"{size} bytes, at most {cost.MAX_FILE_BYTES} (256 KiB) in a rule file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (byte {exc.start})") from None


@dataclass(slots=True)
class Budget:
    """Bytes of rule files one catalog may still read (`cost.MAX_CATALOG_BYTES`)."""

    left: int = cost.MAX_CATALOG_BYTES


def load_paths(paths: Iterable[Path], budget: Budget | None = None) -> Loaded:
    """Rules from files and directories; a later file's rule replaces an earlier one's."""
    out = Loaded()
    budget = budget if budget is not None else Budget()
    for f in rule_files(paths):
        if budget.left <= 0:
            msg = (
                f"skipped: the rule files read before it hold {cost.MAX_CATALOG_BYTES >> 20} "
                "MiB, all one catalog may read"
            )
            out.errors.append(RuleError(str(f), 0, "", msg))
            continue
        try:
            text = read_bounded(f)
            budget.left -= len(text.encode("utf-8"))
        except OSError as exc:
            out.errors.append(RuleError(str(f), 0, "", f"cannot read: {exc.strerror or exc}"))
            continue
        except ValueError as exc:
            out.errors.append(RuleError(str(f), 0, "", f"cannot read: {exc}"))
            continue
        out.merge(load_text(text, str(f)))
    return out


def shipped_dir() -> Path:
    """The rules that come with vtop: `vtop/_rules` in a wheel, `rules/` in a checkout."""
    here = Path(__file__).resolve().parent.parent
    packaged = here / "_rules"
    return packaged if packaged.is_dir() else here.parent / "rules"


def user_dir() -> Path:
    """`$XDG_CONFIG_HOME/vtop/rules` (or `~/.config/vtop/rules`)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "vtop" / "rules"


def check(loaded: Loaded) -> list[RuleError]:
    """Cross-rule errors: an `explains` naming a rule that does not exist."""
    errors = []
    for rule in loaded.rules.values():
        for other in rule.explains:
            if other not in loaded.rules and other not in loaded.disabled:
                errors.append(
                    RuleError(
                        rule.file, rule.line, rule.id, f"explains unknown rule {quote(other)}"
                    )
                )
    return errors


def load_catalog(extra: Sequence[Path] = (), *, user: bool = True, shipped: bool = True) -> Loaded:
    """Shipped rules, then the user's config directory, then `extra` (--rules), by id."""
    out = Loaded()
    budget = Budget()
    sources: list[Path] = []
    if shipped:
        sources.append(shipped_dir())
    if user and user_dir().is_dir():
        sources.append(user_dir())
    sources.extend(extra)
    for src in sources:
        if not src.exists():
            out.errors.append(RuleError(str(src), 0, "", "no such file or directory"))
            continue
        out.merge(load_paths([src], budget))
    out.errors.extend(check(out))
    return out
