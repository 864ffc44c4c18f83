"""The "examples:" section at the end of every `--help`: a few real command lines each.

Why one table, keyed by the parser's `prog` (`vtop rules check`), instead of an `epilog` on
each parser: every parser of the command line is a `OneLineParser`, which appends its
examples to the help it prints (`section`), so a sub-command's examples need no change to the
module that builds it, and a test can walk every parser, check that it has some, and parse
each example with the parser it belongs to, so an example cannot go stale. Text after two
spaces and `#` is a comment, printed but not parsed.
"""

from __future__ import annotations

EXAMPLES: dict[str, tuple[str, ...]] = {
    "vtop": (
        "vtop --url localhost:8000                          # the dashboard",
        "vtop --url http://gpu-box:8000 --once              # two polls, one JSON document",
        "vtop --url localhost:8000 --report --wait-for 2m   # a verdict, once the server is up",
        "vtop --demo memory-ceiling                         # no GPU, no vLLM: the simulator",
        "vtop --url localhost:8000 --web 0.0.0.0:6006       # in a browser (prints its URL)",
    ),
    "vtop sim": (
        "vtop sim                                        # healthy, on :8000",
        "vtop sim --scenario memory-ceiling --port 8001 --speed 5",
        "vtop sim --instances 3 --emulate-version 0.10",
        "vtop sim --scenario budget-too-small --max-num-seqs 64   # the advice, tried",
        "vtop sim --list                                 # the scenarios",
    ),
    "vtop rules": (
        "vtop rules list",
        "vtop rules check my-rules/",
        "vtop rules test",
        "vtop rules export -o vtop-alerts.yaml",
    ),
    "vtop rules list": (
        "vtop rules list",
        "vtop rules list --rules my-rules/ --no-user",
    ),
    "vtop rules check": (
        "vtop rules check                                # the whole catalog, yours included",
        "vtop rules check my-rules/                      # every *.yaml in a folder",
        "vtop rules check my-rules/kv.yaml other.yaml",
    ),
    "vtop rules test": (
        "vtop rules test                                 # the shipped rules' tests",
        "vtop rules test my-rules/                       # every *.test.yaml in a folder",
        "vtop rules test -q my-rules/kv.test.yaml",
    ),
    "vtop rules export": (
        "vtop rules export -o vtop-alerts.yaml",
        "vtop rules export --format alertmanager -o inhibit.yaml",
        "vtop rules export --rules my-rules/",
    ),
    "vtop trace": (
        "vtop trace list",
        "vtop trace info today.vtrace",
    ),
    "vtop trace info": (
        "vtop trace info today.vtrace",
        "vtop trace info memory-ceiling                  # a shipped trace, by name",
    ),
    "vtop trace list": ("vtop trace list",),
    "vtop whatif": (
        "vtop whatif --url localhost:8000 --set max_num_seqs=64",
        "vtop whatif --url localhost:8000 --duration 2m --sweep max_num_seqs=64,128,256",
        "vtop whatif --replay today.vtrace --set max_num_seqs=64",
    ),
    "vtop tune": (
        "vtop tune --url localhost:8000 --restart 'systemctl restart vllm' --flags-file flags",
        "vtop tune --yes -- vllm serve Qwen/Qwen2.5-1.5B-Instruct --max-num-seqs 16",
        "vtop tune --max-itl-ms 50 -- vtop sim --scenario budget-too-small --max-num-seqs 16",
    ),
    "vtop completion": (
        "vtop completion bash > ~/.local/share/bash-completion/completions/vtop",
        "vtop completion fish > ~/.config/fish/completions/vtop.fish",
    ),
}
"""Each parser's examples, by its `prog`; a command line's words start with `vtop`."""


def section(prog: str) -> str:
    """The help's last section for `prog`: `examples:` and its lines ("" when it has none)."""
    lines = EXAMPLES.get(prog, ())
    if not lines:
        return ""
    return "\nexamples:\n" + "".join(f"  {line}\n" for line in lines)


def command(line: str) -> str:
    """An example without its comment or shell redirection: the words `vtop` reads."""
    return line.split("  #", maxsplit=1)[0].split(" > ", maxsplit=1)[0].strip()
