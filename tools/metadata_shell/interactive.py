"""The interactive loop: a prompt with line editing, history and tab completion on a terminal,
plain line-by-line reading when commands come through a pipe."""

from __future__ import annotations

import sys

from tools.metadata_shell.paths import components, lookup, sorted_names
from tools.metadata_shell.shell import COMMANDS, Shell


def interact(shell: Shell, banner: str) -> None:
    terminal = sys.stdin.isatty() and sys.stdout.isatty()
    if terminal:
        _enable_line_editing(shell)
        shell.print(banner)
    while not shell.done:
        try:
            line = input(f"[{shell.pwd}] >> " if terminal else "")
        except EOFError:
            break
        except KeyboardInterrupt:
            shell.print("")  # drop the line being typed and prompt again, as shells do
            continue
        shell.run_line(line)


def completions(shell: Shell, before: str, text: str) -> list[str]:
    """What ``text`` may complete to, given the line ``before`` it: a command name as the
    first word, a node path after that."""
    if not before.strip():
        return [name + " " for name in sorted(COMMANDS) if name.startswith(text)]
    prefix = text.rpartition("/")[2]
    base = text[:len(text) - len(prefix)]
    node = lookup(shell.root, components(shell.cwd, base or "."))
    if not isinstance(node, dict):
        return []
    return [base + name + ("/" if isinstance(node[name], dict) else " ")
            for name in sorted_names(node) if name.startswith(prefix)]


def _enable_line_editing(shell: Shell) -> None:
    try:
        import readline
    except ImportError:  # a Python built without it still gets a working prompt
        return
    matches: list[str] = []

    def complete(text: str, state: int) -> str | None:
        if state == 0:
            matches[:] = completions(shell, readline.get_line_buffer()[:readline.get_begidx()], text)
        return matches[state] if state < len(matches) else None

    readline.set_completer_delims(" \t\n")
    readline.set_completer(complete)
    if "libedit" in (readline.__doc__ or ""):
        readline.parse_and_bind("bind ^I rl_complete")
    else:
        readline.parse_and_bind("tab: complete")
