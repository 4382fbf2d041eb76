"""cli/options.py: every command is declared alike (a description, its
exit codes, an example the parser takes), and a shared option is one
definition whichever command takes it; `say` and `show` escape what they print."""

import json
import shlex

import pytest
from vpatch import cli
from vpatch.cli import options


def subcommands() -> dict:
    return cli.parser().commands


@pytest.mark.parametrize("name", sorted(subcommands()))
def test_every_command_has_a_description_exit_codes_and_an_example(name):
    p = subcommands()[name]
    text = p.format_help()
    assert p.description and p.description.endswith(".") and "\n" not in p.description
    codes = text.split("exit codes (", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    assert [c.split()[0] for c in codes][:2] == ["0", "2"] or name in ("check", "doctor")
    assert codes[-1].split()[0] == "130"
    example = text.split("example:\n  ", 1)[1].strip()
    assert example.startswith(f"vpatch {name}")
    # the example is a command line the parser takes
    words = shlex.split(example)[1:]
    args = cli.parser().parse_args(words)
    assert args.subcommand == name


def flags() -> dict[str, list[tuple[str, object]]]:
    """{flag: [(command, its action's shape)]} over every command."""
    out: dict[str, list[tuple[str, object]]] = {}
    for name, p in subcommands().items():
        for a in p._actions:
            for f in a.option_strings:
                shape = (a.dest, a.metavar, a.nargs, type(a).__name__, a.type)
                out.setdefault(f, []).append((name, shape))
    return out


@pytest.mark.parametrize("flag", ["--offline", "--series", "--python", "--dry-run", "--continue"])
def test_a_shared_option_has_one_shape(flag):
    shapes = {shape for _, shape in flags()[flag]}
    assert len(flags()[flag]) >= 2 and len(shapes) == 1, flags()[flag]


def test_source_says_what_lock_accepts():
    from vpatch import lock

    for name in ("fetch", "apply", "port", "pr"):
        (a,) = [a for a in subcommands()[name]._actions if "--source" in a.option_strings]
        assert "|".join(lock.SOURCES) in a.help and a.default == "auto"
    remotes = sorted(n for n, _ in flags()["--remote"])
    assert remotes == ["apply", "fetch"]


def test_cut_keeps_a_long_line_readable():
    assert options.cut("one\ntwo") == "one" and options.cut("  ") == "failed"
    blob = "x" * 500
    assert options.cut(f"bad {blob}") == f"bad {'x' * 80}…(500 characters)"


# every argument that names a folder or a file, by its dest
PATH_DESTS = {"dest", "dir", "out", "series", "into", "work", "tree", "wheel", "results", "onto"}


def test_a_path_argument_refuses_an_empty_value():
    """An empty path was the current folder (`series --out ''`, `export ''`,
    `pr --onto ''`: Path('') is '.') or, for an option with a default,
    silently the default (`apply --dest ''`, `install --series ''`). Every
    argument naming a folder or a file now refuses '' (options.a_path, given
    by the Parser to every metavar of options.PATHS): exit 2, one line."""
    seen = set()
    for name, p in subcommands().items():
        for a in p._actions:
            if a.dest in PATH_DESTS:
                assert a.type is options.a_path, (name, a.dest, a.metavar)
                seen.add(a.dest)
    assert seen == PATH_DESTS
    with pytest.raises(SystemExit) as e:
        cli.parser().parse_args(["apply", "--dest", ""])
    assert e.value.code == 2


def test_say_shows_what_it_is_given_escaped(capsys):
    """Progress names what a server or hub sent (a request's URL, a model):
    escaped, with no credential, as every line vpatch prints."""
    from vpatch.cli.options import say

    say("waiting for GET http://u:pw@h/m\x1b]0;t\x07")
    assert capsys.readouterr().err == "waiting for GET http://***@h/m\\x1b]0;t\\x07\n"


def test_show_prints_each_line_escaped_and_json_as_read(capsys):
    """A result's lines reach stdout one a line, each escaped: a newline a
    server put in a model name stays in its line (no forged `ok` line), no
    credential is shown; its JSON keeps every value as read."""
    from dataclasses import dataclass

    from vpatch.shown import Shown

    @dataclass
    class Result(Shown):
        said: list[str]

        def lines(self):
            return self.said

        def to_json(self):
            return {"model": self.said[1]}

    forged = "m\nok: 0 errors\x1b[2J http://u:pw@h/x?token=t"
    options.show(Result(["head", forged, ""]))
    assert capsys.readouterr().out == (
        "head\nm\\nok: 0 errors\\x1b[2J http://***@h/x?token=***\n\n"
    )
    options.show(Result(["head", forged]), "json")
    assert json.loads(capsys.readouterr().out) == {"model": forged}


def test_interval_takes_ascii_digits_only(capsys):
    """`--interval 1_0` was 10 and `' 1'` 1 (int()'s reading): refused now."""
    from vpatch import cli

    for bad in ("1_0", " 1", "+1", "１"):
        with pytest.raises(SystemExit) as e:
            cli.parser().parse_args(["doctor", "--server", "http://h:1", "--interval", bad])
        assert e.value.code == 2
        assert "--interval" in capsys.readouterr().err
    args = cli.parser().parse_args(["doctor", "--server", "http://h:1", "--interval", "10"])
    assert args.interval == 10
