"""The shell's commands over the metadata tree: ls, cd, cat, find, tree, pwd, history, man/help,
refresh, exit.

Output goes to ``out`` and errors to ``err``, one ``command: path: problem`` line each, so
the same code serves the interactive loop and a single command given on the command line.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Callable, TextIO

from tools.metadata_shell.paths import NoSuchNode, expand, sorted_names, to_text
from tools.metadata_shell.tree import Dir, Node


class CommandError(Exception):
    pass


@dataclass(frozen=True)
class Command:
    usage: str
    summary: str
    run: Callable[["Shell", list[str]], None]


# Reads the source again: the new tree and the offset it reflects.
Reload = Callable[[], tuple[Dir, int]]


class Shell:
    def __init__(self, root: Dir, out: TextIO, err: TextIO, reload: Reload | None = None,
                 offset: int = -1) -> None:
        self.root = root
        self.reload = reload
        self.offset = offset
        self.out = out
        self.err = err
        self.cwd: list[str] = []
        self.history: list[str] = []
        self.done = False

    def run_line(self, line: str) -> bool:
        """Run a command line: one command, or several separated by ``;``. False if any failed
        (its error has been printed); as in a shell, the commands after a failed one still run."""
        try:
            commands = _split(line)
        except ValueError as exc:
            print(f"cannot parse {line!r}: {exc}", file=self.err)
            return False
        if not commands:
            return True
        self.history.append(line.strip())
        return all([self.run(words) for words in commands])

    def run(self, words: list[str]) -> bool:
        name, args = words[0], words[1:]
        command = COMMANDS.get(name)
        if command is None:
            print(f"{name}: unknown command; type help for the list", file=self.err)
            return False
        try:
            command.run(self, args)
        except CommandError as exc:
            print(f"{name}: {exc}", file=self.err)
            return False
        return True

    def print(self, text: str) -> None:
        print(text, file=self.out)

    def expand(self, text: str) -> list[tuple[list[str], Node]]:
        try:
            return expand(self.root, self.cwd, text)
        except NoSuchNode:
            raise CommandError(f"{text}: no such node") from None

    @property
    def pwd(self) -> str:
        return to_text(self.cwd)


def _split(line: str) -> list[list[str]]:
    """The words of each command on the line, split as a POSIX shell splits them: an unquoted
    ``;`` ends a command, a quoted one is part of a word."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";")
    lexer.whitespace_split = True
    lexer.commenters = ""
    commands: list[list[str]] = [[]]
    for word in lexer:
        if word and word.strip(";") == "":
            commands.append([])
        else:
            commands[-1].append(word)
    return [words for words in commands if words]


# --- the commands ---------------------------------------------------------------------------------

def _ls(shell: Shell, args: list[str]) -> None:
    long = "-l" in args
    args = [a for a in args if a != "-l"]
    show: Callable[[str, Node], str] = _long_entry if long else (lambda name, node: name)
    matches = [m for text in args or ["."] for m in shell.expand(text)]
    files = [(parts, node) for parts, node in matches if not isinstance(node, dict)]
    dirs = [(parts, node) for parts, node in matches if isinstance(node, dict)]
    for parts, value in files:
        shell.print(show(parts[-1] if parts else "/", value))
    for i, (parts, folder) in enumerate(dirs):
        if len(matches) > 1:
            shell.print(("\n" if i or files else "") + f"{to_text(parts)}:")
        for name in sorted_names(folder):
            shell.print(show(name, folder[name]))


def _long_entry(name: str, node: Node) -> str:
    """``ls -l``: d for a directory and how many nodes it holds, - for a value and its length
    in characters."""
    if isinstance(node, dict):
        return f"d {len(node):>8}  {name}"
    return f"- {len(node):>8}  {name}"


def _cd(shell: Shell, args: list[str]) -> None:
    if len(args) > 1:
        raise CommandError("too many arguments")
    text = args[0] if args else "/"
    matches = shell.expand(text)
    if len(matches) > 1:
        raise CommandError(f"{text}: matches {len(matches)} nodes")
    parts, node = matches[0]
    if not isinstance(node, dict):
        raise CommandError(f"{text}: not a directory")
    shell.cwd = parts


def _cat(shell: Shell, args: list[str]) -> None:
    if not args:
        raise CommandError("which node? usage: " + COMMANDS["cat"].usage)
    problems = []
    found: list[tuple[list[str], str]] = []
    for text in args:
        try:
            matches = shell.expand(text)
        except CommandError as exc:
            problems.append(str(exc))
            continue
        for parts, node in matches:
            if isinstance(node, dict):
                problems.append(f"{to_text(parts)}: is a directory")
            else:
                found.append((parts, node))
    # As Kafka's shell: the values alone, one after the other.
    for _, value in found:
        shell.print(value)
    if problems:
        raise CommandError("; ".join(problems))


def _find(shell: Shell, args: list[str]) -> None:
    for text in args or ["."]:
        for parts, node in shell.expand(text):
            _walk(shell, parts, node)


def _walk(shell: Shell, parts: list[str], node: Node) -> None:
    shell.print(to_text(parts))
    if isinstance(node, dict):
        for name in sorted_names(node):
            _walk(shell, [*parts, name], node[name])


def _tree(shell: Shell, args: list[str]) -> None:
    for text in args or ["."]:
        for _, node in shell.expand(text):
            _print_tree(shell, node, 0)


def _print_tree(shell: Shell, node: Node, depth: int) -> None:
    """Kafka's layout: a value as it is, a directory as ``name:`` lines over its children,
    two spaces deeper each level."""
    indent = "  " * depth
    if not isinstance(node, dict):
        shell.print(indent + node)
        return
    for name in sorted_names(node):
        shell.print(f"{indent}{name}:")
        _print_tree(shell, node[name], depth + 1)


def _pwd(shell: Shell, args: list[str]) -> None:
    if args:
        raise CommandError("takes no arguments")
    shell.print(shell.pwd)


def _history(shell: Shell, args: list[str]) -> None:
    if len(args) > 1 or (args and not args[0].isdigit()):
        raise CommandError("usage: " + COMMANDS["history"].usage)
    count = int(args[0]) if args else len(shell.history)
    start = max(0, len(shell.history) - count)
    for number, line in enumerate(shell.history[start:], start + 1):
        shell.print(f"{number:5d}  {line}")


def _help(shell: Shell, args: list[str]) -> None:
    if args:
        _man(shell, args)
        return
    shell.print("Welcome to the kraftwire metadata shell: the cluster metadata as a tree of nodes.\n")
    width = max(map(len, COMMANDS))
    for name in sorted(COMMANDS):
        shell.print(f"  {name.ljust(width)}  {COMMANDS[name].summary}")
    shell.print("\nPaths are absolute or relative to the working directory, and may use * ? [...] patterns.")


def _man(shell: Shell, args: list[str]) -> None:
    if len(args) != 1:
        raise CommandError("usage: " + COMMANDS["man"].usage)
    command = COMMANDS.get(args[0])
    if command is None:
        raise CommandError(f"{args[0]}: no such command")
    shell.print(f"usage: {command.usage}\n  {command.summary}")


def _refresh(shell: Shell, args: list[str]) -> None:
    if args:
        raise CommandError("takes no arguments")
    if shell.reload is None:
        raise CommandError("this shell has no source to read again")
    before = shell.offset
    shell.root, shell.offset = shell.reload()
    # Stay where we were if that node is still there (a deleted topic takes its path with it).
    try:
        expand(shell.root, [], shell.pwd)
    except NoSuchNode:
        shell.cwd = []
    shell.print(f"read up to offset {shell.offset} (was {before})")


def _exit(shell: Shell, args: list[str]) -> None:
    shell.done = True


COMMANDS: dict[str, Command] = {
    "cat": Command("cat PATH...", "Show the contents of metadata nodes.", _cat),
    "cd": Command("cd [PATH]", "Set the current working directory (/ without a path).", _cd),
    "exit": Command("exit", "Exit the metadata shell.", _exit),
    "find": Command("find [PATH...]", "Print the paths of nodes and everything under them.", _find),
    "help": Command("help [COMMAND]", "Display this help message, or a command's.", _help),
    "history": Command("history [N]", "Print the command history (the last N commands).", _history),
    "ls": Command("ls [-l] [PATH...]", "List metadata nodes; -l: kind (d or -) and size (entries or "
                  "characters) of each.", _ls),
    "man": Command("man COMMAND", "Show the help text for a specific command.", _man),
    "pwd": Command("pwd", "Print the current working directory.", _pwd),
    "tree": Command("tree [PATH...]", "Print the nodes under each path and their values, as a tree.", _tree),
    "refresh": Command("refresh", "Read the metadata again from the source, with what was written since.",
                       _refresh),
}

