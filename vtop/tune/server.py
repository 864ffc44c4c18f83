"""The two ways `vtop tune` may restart a server, and nothing else: a command the user gave
(with the flags file it reads), or a vLLM vtop launched itself.

`CommandServer` writes the changed flags into the user's flags file and runs the user's restart
command through the shell (`systemctl restart vllm`, a container restart): vtop never guesses
how a server is run. `LaunchedServer` runs the command line after `--` in its own session
(so Ctrl-C at the terminal reaches vtop, not vLLM), its output into a log file, and restarts
it with the changed flags: SIGTERM to its process group, SIGKILL after `STOP_S`. A launched
server keeps running when vtop ends, with the best flags found; vtop says its PID and log.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from vtop import files
from vtop.knobs import KnobValue
from vtop.tune.flags import edit_file_text, with_changes

STOP_S = 60.0
"""How long a launched server gets to stop after SIGTERM (vLLM frees the GPU) before SIGKILL."""
COMMAND_S = 600.0
"""How long the user's restart command may take."""


class RestartError(Exception):
    """A restart that did not happen: the command failed, the server would not start. One
    line, naming what."""


class Server(Protocol):
    """A server vtop may restart with other flags."""

    def restart(self, changes: Mapping[str, KnobValue]) -> None:
        """Restart with `changes` (every knob changed since the start, with its value)."""

    def describe(self) -> str:
        """What runs now, in a line: the command line or the flags file and the command."""


class CommandServer:
    """The user's restart command, after writing the flags into the user's flags file."""

    def __init__(self, command: str, flags_file: str | os.PathLike[str]) -> None:
        self.command = command
        self.flags_file = Path(flags_file)
        try:
            self._original = files.read_regular(self.flags_file).decode()
        except (OSError, UnicodeDecodeError) as exc:
            raise RestartError(f"--flags-file {self.flags_file}: cannot read: {exc}") from None
        self.text = self._original

    def restart(self, changes: Mapping[str, KnobValue]) -> None:
        self.text = edit_file_text(self._original, changes)
        try:
            files.write_atomic(self.flags_file, self.text)
        except OSError as exc:
            raise RestartError(f"--flags-file {self.flags_file}: cannot write: {exc}") from None
        try:
            done = subprocess.run(  # the user's own shell command, on purpose
                self.command,
                shell=True,
                timeout=COMMAND_S,
                check=False,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
            )
        except subprocess.TimeoutExpired:
            raise RestartError(
                f"--restart {self.command!r}: still running after {COMMAND_S:.0f} s"
            ) from None
        if done.returncode != 0:
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
            raise RestartError(f"--restart {self.command!r}: exit {done.returncode}: {last[0]}")

    def describe(self) -> str:
        return f"{self.flags_file}: {' '.join(self.text.split())}"


class LaunchedServer:
    """A server vtop started from `argv`, restarted with the flags changed."""

    def __init__(self, argv: Sequence[str], log: str | os.PathLike[str]) -> None:
        if not argv:
            raise RestartError("nothing to launch: give the server's command line after --")
        self.base = list(argv)
        self.argv = list(argv)
        self.log = Path(log)
        self.process: subprocess.Popen[bytes] | None = None
        self._start()

    def _start(self) -> None:
        try:
            with self.log.open("ab") as out:
                self.process = subprocess.Popen(
                    self.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        except OSError as exc:
            raise RestartError(f"cannot start {self.argv[0]}: {exc.strerror or exc}") from None

    def stop(self) -> None:
        """SIGTERM to the server's process group; SIGKILL when it outstays `STOP_S`."""
        p = self.process
        if p is None or p.poll() is not None:
            return
        for sig, wait_s in ((signal.SIGTERM, STOP_S), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                return
            try:
                p.wait(wait_s)
                return
            except subprocess.TimeoutExpired:
                continue

    def restart(self, changes: Mapping[str, KnobValue]) -> None:
        self.stop()
        self.argv = with_changes(self.base, changes)
        self._start()

    def exited(self) -> int | None:
        """The server's exit code once it has exited (it would not start), else None."""
        return self.process.poll() if self.process is not None else None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def describe(self) -> str:
        return " ".join(self.argv)
