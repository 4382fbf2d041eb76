"""cli/docs.py: the README's command list is the parser's (synopsis)."""

from vpatch import cli
from vpatch.cli import docs


def subcommands() -> dict:
    return cli.parser().commands


def test_the_synopsis_is_the_parsers():
    """One line (wrapped) per command, in the parser's order, with every option."""
    text = docs.synopsis(cli.parser())
    starts = [ln.split()[1] for ln in text.splitlines() if ln.startswith("vpatch ")]
    assert starts == list(subcommands())
    assert all(len(ln) <= 100 for ln in text.splitlines())
    for name, p in subcommands().items():
        block = text.split(f"vpatch {name} ", 1)[1].split("\nvpatch ", 1)[0]
        for a in p._actions:
            if a.option_strings and a.dest != "help":
                assert max(a.option_strings, key=len) in block, (name, a.dest)


def test_optional_arguments_in_brackets_the_trailing_command_last():
    text = docs.synopsis(cli.parser())
    assert "\nvpatch series [VERSION] --out DIR\n" in text
    assert "vpatch unapply DIR [--series DIR] [--discard-commits]\n" in text
    doctor = text.split("vpatch doctor ", 1)[1]
    assert doctor.rstrip().endswith("[-- vllm serve MODEL ...]")


def test_the_block_is_the_readmes_commands():
    (block,) = cli.generated_here()
    assert (block.path, block.name) == ("README.md", "commands")
    assert block.text == f"```\n{docs.synopsis(cli.parser())}```"


def test_the_lock_and_the_clis_own_parts_reach_the_library(monkeypatch, capsys):
    from vpatch.maintain import docs as library

    seen = []
    monkeypatch.setattr(library, "stale", lambda **kw: seen.append(("stale", kw)) or ["a"])
    monkeypatch.setattr(library, "write", lambda **kw: seen.append(("write", kw)) or ["b"])
    assert cli.main(["docs", "--check"]) == 5
    assert capsys.readouterr().out == "stale: a\n"
    assert cli.main(["docs"]) == 0
    assert capsys.readouterr().out == "wrote b\n"
    assert [what for what, _ in seen] == ["stale", "write"]
    for _, kw in seen:
        assert kw["pins"].path.name == "VERSIONS.lock" and kw["extra"] == cli.generated_here()
