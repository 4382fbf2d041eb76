"""gitutil, the one package that runs git: its modules' names are its own
(the package is the interface every caller imports), and nothing else of
it is; each module's tests: tests/unit/gitutil/."""

from vpatch import gitutil
from vpatch.gitutil import merge, repo, run


def test_the_package_is_its_modules_names():
    named = [n for m in (run, repo, merge) for n in m.__all__]
    assert len(named) == len(set(named))  # each name in one module
    for n in named:
        assert getattr(gitutil, n) is getattr(
            next(m for m in (run, repo, merge) if n in m.__all__), n
        )
    public = {n for n in vars(gitutil) if not n.startswith("_")} - {"annotations", "TYPE_CHECKING"}
    assert public - {"merge", "repo", "run"} == set(named)
    assert gitutil.Repo.__name__ == "Repo"  # GitPython's, imported on first use
