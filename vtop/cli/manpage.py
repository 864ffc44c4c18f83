"""`man vtop`: the manual page, written from the argparse parsers vtop runs with.

A hand-kept page drifts from the command line the day a flag is added, so this one is made
from the same parsers `vtop --help` and `vtop completion` use: the monitor's (the root) and
each command of the dispatcher's table (`vtop.cli.dispatch.COMMANDS`) with its own
sub-commands, every option in its argparse group. EXIT STATUS is `vtop.exits.ExitCode` (each
member's docstring is its meaning), EXAMPLES are the ones every `--help` ends with
(`vtop.cli.examples`), and ENVIRONMENT and FILES name the variables and paths the code reads
(`VTOP_API_KEY` and the proxy variables by the constants the sources use). The page is
committed as `man/vtop.1`, installed by the wheel as `share/man/man1/vtop.1` (pyproject's
shared-data), and a unit test regenerates it and fails when it is stale:
`python -m vtop.cli.manpage -o man/vtop.1` refreshes it. Committed rather than made by a
build hook: a hook would have to import vtop, and so install its runtime dependencies, in
the isolated build environment of every `pip install` from source.

Why a generator of our own rather than argparse-manpage (4.8, maintained, handles sub-commands
and argument groups): on these parsers its page loses and mangles text. Its escaping leaves a
line that begins with `'` or `.` to roff as a request, so `--match`'s example
(`'{job="vllm",env="prod"}'`) vanished; it renders help as argparse wrapped it at the
generating terminal's width, so the page depends on $COLUMNS, usage lines keep argparse's
continuation indents, and a word broken at its hyphen comes out as "sub- folders"; the
sub-commands land under POSITIONAL ARGUMENTS; and EXIT STATUS, ENVIRONMENT and the rest could
only come in as raw roff include files. Walking the parsers (as `vtop.cli.completion` does for
shtab) takes argparse's own formatter for what it knows (a flag's metavar, `%(default)s`), and
writes in `vtop.cli.roff`'s markup (every text escaped once, no preformatted line that could
run past 80 columns), with hyphenation off (`.nh`) so a flag never breaks across lines.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata

from vtop import __version__, exits
from vtop.cli import examples, roff
from vtop.cli.exits import EXIT_OK
from vtop.cli.usage import OneLineParser

OUTPUT = "man/vtop.1"
"""Where the page is committed (pyproject installs it as share/man/man1/vtop.1)."""
REFRESH = f"python -m vtop.cli.manpage -o {OUTPUT}"
"""The command that rewrites the committed page from the parsers."""
_WIDE = 10_000
"""argparse's formatter is asked for usage text at this width: one line, which roff fills."""


@dataclass(frozen=True, slots=True)
class Node:
    """One parser of the command line: `vtop`, `vtop rules`, `vtop rules list`…"""

    parser: argparse.ArgumentParser
    help: str
    """The one line the parent's list of commands says of it ("" for the root)."""
    children: tuple[Node, ...]

    @property
    def prog(self) -> str:
        return self.parser.prog

    def walk(self) -> Iterator[Node]:
        yield self
        for child in self.children:
            yield from child.walk()


def tree() -> Node:
    """Every parser vtop runs, as the dispatcher runs them: the monitor's at the root, each
    command of `COMMANDS` under it, and their own sub-commands under those."""
    from vtop.cli.dispatch import COMMANDS
    from vtop.cli.monitor import build_parser

    commands = tuple(_node(c.parser(), c.help) for c in COMMANDS.values())
    return Node(build_parser(), "", commands)


def _node(parser: argparse.ArgumentParser, help_: str) -> Node:
    children: list[Node] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, child in action.choices.items():
                if helps.get(name) != argparse.SUPPRESS:
                    children.append(_node(child, helps.get(name, "")))
    return Node(parser, help_, tuple(children))


def shown_actions(parser: argparse.ArgumentParser, *, root: bool) -> list[argparse.Action]:
    """The arguments the page lists for `parser`: all but hidden ones, the sub-command word
    (its commands have sections of their own) and, below the root, `-h` (DESCRIPTION says
    that every command takes it)."""
    out = []
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
            continue
        if not root and isinstance(action, argparse._HelpAction):
            continue
        out.append(action)
    return out


# -- argparse's text, in roff -----------------------------------------------------------------


def _text(parser: argparse.ArgumentParser, text: str) -> list[str]:
    """A description or epilog: one paragraph, or, where the parser keeps its line breaks
    (`RawDescriptionHelpFormatter`), filled paragraphs with its indented lines (commands to
    type) kept whole and indented, a `  # comment` on the line after its command."""
    kind = parser.formatter_class
    raw = isinstance(kind, type) and issubclass(kind, argparse.RawDescriptionHelpFormatter)
    return roff.paragraphs(text, raw=raw)


def _formatter(prog: str) -> argparse.HelpFormatter:
    formatter = argparse.HelpFormatter(prog, width=_WIDE)
    plain = getattr(formatter, "_set_color", None)  # Python 3.14: no ANSI colours in roff
    if callable(plain):
        plain(False)
    return formatter


def _usage(parser: argparse.ArgumentParser, actions: list[argparse.Action]) -> str:
    """argparse's usage for just `actions` (their mutually exclusive groups kept), no prog."""
    if not actions:
        return ""
    formatter = _formatter("")  # no prog: the synopsis prints it, in bold
    formatter.add_usage(None, actions, parser._mutually_exclusive_groups, prefix="")
    return formatter.format_help().strip()


def invocation(action: argparse.Action, prog: str) -> str:
    """An argument's tag as the page prints it: `\\fB\\-o\\fR, \\fB\\-\\-output\\fR \\fIFILE\\fR`
    (flags bold, the value's metavar italic, once), or a positional's metavar."""
    formatter = _formatter(prog)
    if not action.option_strings:
        if action.nargs == argparse.REMAINDER and isinstance(action.metavar, str):
            return roff.italic(action.metavar)  # argparse writes `...` for the rest of the line
        return roff.italic(formatter._format_args(action, action.dest))
    flags = ", ".join(roff.bold(flag) for flag in action.option_strings)
    if action.nargs == 0:
        return flags
    metavar = formatter._format_args(action, formatter._get_default_metavar_for_optional(action))
    return f"{flags} {roff.italic(metavar)}"


def _entry(action: argparse.Action, prog: str) -> list[str]:
    help_ = _formatter(prog)._expand_help(action) if action.help else ""
    return [".TP", invocation(action, prog), *([roff.prose(help_)] if help_ else [])]


_GROUP_TITLES = {"positional arguments": None, "options": None, "optional arguments": None}
"""argparse's own groups: listed without a heading (positionals are italic, flags bold)."""


def _groups(node: Node, *, root: bool, heading: str) -> list[str]:
    """`node`'s arguments by argparse group: its own groups untitled, each titled one under
    `heading` (`.SS`, or a line of its own where the node itself is a `.SS`)."""
    shown = shown_actions(node.parser, root=root)
    lines: list[str] = []
    for group in node.parser._action_groups:
        actions = [a for a in group._group_actions if a in shown]
        if not actions:
            continue
        title = _GROUP_TITLES.get(group.title or "", group.title)
        if title:
            title = title[0].upper() + title[1:]
            lines += (
                [f".SS {roff.quoted(title)}"]
                if heading == ".SS"
                else [".PP", roff.italic(title) + ":"]
            )
        if group.description:
            lines += [".PP", roff.prose(group.description)]
        for action in actions:
            lines += _entry(action, node.prog)
    return lines


# -- sections --------------------------------------------------------------------------------


def _synopsis(root: Node) -> list[str]:
    """One line per command line vtop accepts: the leaves of the tree, each with what it
    requires (positionals, a required choice of flags) and `[OPTION]...` for the rest."""
    lines = [".SH SYNOPSIS"]
    for node in root.walk():
        if node.children and node is not root:
            continue
        shown = shown_actions(node.parser, root=False)
        required = [a for a in shown if a.option_strings and _required(node.parser, a)]
        optional = [a for a in shown if a.option_strings and a not in required]
        positional = [a for a in shown if not a.option_strings]
        words = [
            _usage(node.parser, required),
            "[OPTION]..." if optional else "",
            _usage(node.parser, positional),
        ]
        rest = roff.escape(" ".join(w for w in words if w)).replace("[OPTION]", "[\\fIOPTION\\fR]")
        lines += [roff.bold(node.prog) + (f" {rest}" if rest else ""), ".br"]
    return lines[:-1]


def _required(parser: argparse.ArgumentParser, action: argparse.Action) -> bool:
    if action.required:
        return True
    groups = parser._mutually_exclusive_groups
    return any(g.required and action in g._group_actions for g in groups)


def _description(root: Node) -> list[str]:
    lines = [".SH DESCRIPTION", *_text(root.parser, root.parser.description or "")]
    lines += [
        ".PP",
        roff.escape(
            "Without a command word, vtop is the monitor: the dashboard, --once, --report and "
            "the rest of OPTIONS below. A first word that names a command runs that command, "
            "with its own options (each in its section below):"
        ),
    ]
    for command in root.children:
        lines += [".TP", roff.bold(command.prog.split()[-1]), roff.prose(command.help)]
    lines += [
        ".PP",
        roff.escape(
            "Every command takes -h, --help: its options and examples. A usage error is one "
            "line on stderr naming the argument."
        ),
    ]
    return lines


def _options(root: Node) -> list[str]:
    return [".SH OPTIONS", *_groups(root, root=True, heading=".SS")]


def _command(node: Node, *, level: int) -> list[str]:
    """A command's section (`.SH "VTOP RULES"`), or a sub-command's (`.SS "vtop rules list"`)
    within it: what it does, its arguments, its epilog, then its own sub-commands."""
    parser = node.parser
    lines = [
        f".SH {roff.quoted(node.prog.upper())}" if level == 1 else f".SS {roff.quoted(node.prog)}"
    ]
    if parser.description:
        lines += _text(parser, parser.description)
    elif node.help:
        lines += [".PP", roff.prose(node.help)]
    lines += _groups(node, root=False, heading=".SS" if level == 1 else ".PP")
    if parser.epilog:
        lines += _text(parser, parser.epilog)
    for child in node.children:
        lines += _command(child, level=level + 1)
    return lines


def exit_codes() -> list[tuple[int, str, str]]:
    """`ExitCode`'s members, aliases included, as (code, name, meaning) by code: the meaning
    is the member's docstring in `vtop/exits.py`, which the enum itself does not keep."""
    meanings: dict[str, str] = {}
    module = ast.parse(inspect.getsource(exits))
    (enum,) = (n for n in module.body if isinstance(n, ast.ClassDef) and n.name == "ExitCode")
    for statement, after in zip(enum.body, enum.body[1:], strict=False):
        if (
            isinstance(statement, ast.Assign)
            and isinstance(statement.targets[0], ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            meanings[statement.targets[0].id] = " ".join(after.value.value.split())
    members = exits.ExitCode.__members__.items()
    return sorted(
        ((int(code), name, meanings.get(name, "")) for name, code in members),
        key=lambda row: row[0],
    )


def _exit_status() -> list[str]:
    lines = [
        ".SH EXIT STATUS",
        ".PP",
        roff.escape(
            "A report's verdict follows the monitoring-plugin convention (0 to 3; --fail-on "
            "critical lets warnings pass); the rest follow the usual conventions of "
            "command-line tools, so 1 and 2 mean one thing under --report and another "
            "elsewhere:"
        ),
    ]
    for code, name, meaning in exit_codes():
        lines += [".TP", f"\\fB{code}\\fR {roff.escape(name)}", roff.prose(meaning)]
    return lines


def environment() -> list[tuple[str, str]]:
    """The variables vtop reads, and what each does."""
    from vtop.sources.netconfig import PROXY_VARIABLES
    from vtop.sources.vllm import API_KEY_ENV

    http, https, every, direct = PROXY_VARIABLES
    return [
        (
            API_KEY_ENV,
            "a bearer token (Authorization: Bearer) sent to every server and to --prometheus. "
            "It is never printed, logged, recorded or shown; after a redirect it goes only to "
            "the hosts --trust-redirect names.",
        ),
        (
            "VTOP_DEBUG",
            "set to anything but 0: an error vtop did not expect ends with its traceback "
            "instead of one line and exit 3.",
        ),
        (
            f"{https}, {http}, {every}",
            "the proxy for https:// URLs, for http:// URLs, and for either, as curl reads "
            "them (the lowercase name wins over the uppercase one). Loopback is never proxied.",
        ),
        (
            direct,
            "hosts to reach directly: a comma-separated list of names (each matching its "
            "subdomains), IP addresses, CIDR ranges, host:port, or * for every host.",
        ),
        (
            "SSL_CERT_FILE, SSL_CERT_DIR",
            "replace the system's CA certificates, as for every OpenSSL program (--ca-cert "
            "adds to them instead).",
        ),
        (
            "XDG_CONFIG_HOME",
            "where your config file and rules are read from: $XDG_CONFIG_HOME/vtop/config.toml "
            "and $XDG_CONFIG_HOME/vtop/rules (default: ~/.config/vtop/).",
        ),
    ]


def _environment() -> list[str]:
    lines = [".SH ENVIRONMENT"]
    for name, meaning in environment():
        lines += [".TP", roff.bold(name), roff.prose(meaning)]
    return lines


_FILES = (
    (
        "$XDG_CONFIG_HOME/vtop/config.toml",
        "defaults for what you would otherwise type on every command line (TOML: interval, "
        "headers, ca_cert, rules, [goals], [[endpoint]]), read when it exists (default "
        "~/.config/vtop/config.toml; --config FILE reads another); a flag on the command line "
        "wins.",
    ),
    (
        "$XDG_CONFIG_HOME/vtop/rules/*.yaml",
        "your rules (default ~/.config/vtop/rules), read after the shipped ones: a rule with a "
        "shipped rule's id replaces it, {id: X, enabled: false} switches one off; --rules DIR "
        "adds more, and the rules commands' --no-user leaves these out. vtop rules check "
        "validates them, vtop rules test runs their *.test.yaml tests.",
    ),
    (
        "vtop/_rules/, vtop/_rule_tests/",
        "the shipped rules and their tests, inside the installed package (vtop rules list).",
    ),
    (
        "vtop/_traces/*.vtrace, ./traces/*.vtrace",
        "the example traces vtop ships, which --replay and vtop trace info take by name "
        "(memory-ceiling), and those in the current folder's traces/ (vtop trace list).",
    ),
    (
        "*.vtrace",
        "traces written by --record (or the dashboard's r key), replayed by --replay.",
    ),
)


def _files() -> list[str]:
    lines = [".SH FILES"]
    for name, meaning in _FILES:
        lines += [".TP", roff.italic(name), roff.prose(meaning)]
    return lines


def _examples(root: Node) -> list[str]:
    """Every parser's examples (`vtop.cli.examples`), each command line once: in bold, its
    comment indented under it."""
    lines = [".SH EXAMPLES"]
    seen: set[str] = set()
    for node in root.walk():
        for example in examples.EXAMPLES.get(node.prog, ()):
            command, _, comment = example.partition("  #")
            command = command.strip()
            if command in seen:
                continue
            seen.add(command)
            lines += [".PP", *roff.shell(command, roff.INDENT, roff.bold)]
            if comment.strip():
                lines += [".RS 4", roff.prose(comment), ".RE"]
    return lines


def _see_also() -> list[str]:
    home = ""
    for entry in metadata.metadata("vtop").get_all("Project-URL") or []:
        label, _, url = entry.partition(",")
        if label.strip() == "Homepage":
            home = url.strip()
    lines = [
        ".SH SEE ALSO",
        roff.escape("vtop --help and vtop COMMAND --help (the same options, with examples); "),
        roff.escape("vtop completion bash|zsh|fish (shell completion from the same parsers)."),
    ]
    if home:
        lines += [
            ".PP",
            roff.escape(f"The README and docs/ at {home} (the rules: rules/README.md)."),
        ]
    return lines


def page() -> str:
    """The whole manual page, in roff (man macros)."""
    root = tree()
    summary = metadata.metadata("vtop")["Summary"] or ""
    lines = [
        f'.TH VTOP 1 "" {roff.quoted(f"vtop {__version__}")} "User Commands"',
        f'.\\" Generated from the argparse parsers; do not edit. Refresh: {REFRESH}',
        ".nh",
        ".ad l",
        ".SH NAME",
        roff.escape(f"vtop - {summary[:1].lower()}{summary[1:]}" if summary else "vtop"),
        *_synopsis(root),
        *_description(root),
        *_options(root),
    ]
    for command in root.children:
        lines += _command(command, level=1)
    lines += [*_exit_status(), *_environment(), *_files(), *_examples(root), *_see_also()]
    return "\n".join(lines) + "\n"


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="python -m vtop.cli.manpage",
        description=f"Write vtop's manual page (roff) from its parsers; {REFRESH} refreshes the "
        "committed one.",
    )
    parser.add_argument("-o", "--output", metavar="FILE", help="write here, not stdout")
    return parser


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(list(argv))
    text = page()
    if args.output:
        from vtop import files

        files.write_atomic(args.output, text)
    else:
        sys.stdout.write(text)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
