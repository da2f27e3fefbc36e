"""`evertalk "message"`: the app opens and sends the message, as other agents' commands do.

A word of the command line that is neither an option, an option's value nor a command's name is
the message. It is taken out before the parser sees the rest, which has a command in that place.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

PRINT_FLAGS = frozenset({"-p", "--print"})


class MessageError(Exception):
    """A message given in a way that cannot be read: one line for the user."""


def split_message(
    parser: argparse.ArgumentParser, words: Sequence[str]
) -> tuple[list[str], str | None]:
    """The words without the message, and the message (None when there is none: a command
    follows, or `-p` takes the message itself)."""
    if PRINT_FLAGS & set(words):
        return list(words), None
    commands = _commands(parser)
    valued = _valued_options(parser)
    at, found = 0, None
    while at < len(words):
        word = words[at]
        if word == "--":
            found = at + 1 if at + 1 < len(words) else None
            break
        if word.startswith("-") and word != "-":
            at += 2 if word in valued else 1
            continue
        if word in commands:
            return list(words), None
        found = at
        break
    if found is None:
        return list(words), None
    rest = [*words[:found], *words[found + 1 :]]
    if found != at:  # after `--`: the message is the one word left
        rest = rest[:at] + rest[at + 1 :]
    if _positionals(rest[at:], valued):
        raise MessageError("the message goes as one argument: put it in quotes")
    if found == at:  # not after `--`, which says it is a message whatever it reads like
        _refuse_a_command_name(parser, words[found])
    return rest, words[found]


def _refuse_a_command_name(parser: argparse.ArgumentParser, word: str) -> None:
    """A lone word that is (or is close to) a command's name is a command mistyped, not a
    paid message: say which command it may be, and how to send it all the same."""
    if not word or " " in word.strip():
        return
    import difflib  # for a lone word alone: not for every command line

    names = _command_paths(parser)
    guess = names.get(word) or next(
        (names[close] for close in difflib.get_close_matches(word, list(names), 1, 0.75)), None
    )
    if guess is not None:
        raise MessageError(
            f"did you mean `evertalk {guess}`? Send it as a message with `evertalk -- {word}`"
        )


def _command_paths(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Every command's name and subcommand's name, to the words that run it (`browse`:
    `memory browse`); a top-level name wins over a subcommand of the same name."""
    paths: dict[str, str] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                for inner in _commands(sub):
                    paths.setdefault(inner, f"{name} {inner}")
    for name in _commands(parser):
        paths[name] = name
    return paths


def _commands(parser: argparse.ArgumentParser) -> set[str]:
    names: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            names.update(action.choices)
    return names


def _valued_options(parser: argparse.ArgumentParser) -> set[str]:
    """The options that take the word after them as their value (`--home DIR`)."""
    return {
        flag
        for action in parser._actions
        if action.option_strings and action.nargs not in (0, "?")
        for flag in action.option_strings
    }


def _positionals(words: Sequence[str], valued: set[str]) -> bool:
    at = 0
    while at < len(words):
        word = words[at]
        if word.startswith("-") and word != "-":
            at += 2 if word in valued else 1
            continue
        return True
    return False
