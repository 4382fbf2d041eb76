"""The `vpatch` command: argparse, one small function per subcommand that
parses, calls one command and prints. Errors are caught once, in main():
one line `vpatch: error: ...` and the error's exit code (errors.py).

Each cmd_* imports its command module when it runs (as pip loads its
commands): `vpatch install` in an image should not pay for the wheel code,
the matrix or GitPython."""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from . import gitutil, lock
from .errors import ConfigError, PatchError, VpatchError, WheelError, disk_error

INTERNAL = 70  # EX_SOFTWARE: a bug in vpatch
INTERRUPTED = 130  # 128 + SIGINT, as shells report it


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def _source_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--source",
        default="auto",
        metavar="|".join(lock.SOURCES) + "|PATH",
        help="where the release's source comes from (default: auto = sdist, else the wheel)",
    )
    p.add_argument("--remote", help=f"git remote for --source git (default {lock.VLLM_REMOTE})")
    p.add_argument("--offline", action="store_true", help="use the cache only")


# -- fetch / apply / status / unapply ----------------------------------------


def cmd_fetch(args: argparse.Namespace) -> int:
    from .commands import apply

    release, where, what = apply.fetch(
        args.version, args.source, _path(args.dest), args.offline, args.remote, say
    )
    print(f"vLLM {release.version} from {what} -> {where}" if args.dest else where)
    return 0


def cmd_apply(args: argparse.Namespace) -> int:
    from .commands import apply

    result = apply.apply(
        args.version,
        dest=_path(args.dest),
        source=args.source,
        series_dir=_path(args.series),
        offline=args.offline,
        remote=args.remote,
        say=say,
    )
    if not result.applied and result.already:
        print(f"{result.dest}: already patched ({len(result.already)} patches); nothing to do")
    else:
        print(f"{result.dest}: vLLM {result.version}, applied {len(result.applied)} patches")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from .commands import apply

    st = apply.status(Path(args.dest), _path(args.series))
    print(f"{st.dest}: vLLM {st.version}")
    for p in st.patches:
        print(f"  {'applied' if p.applied else 'not applied':11}  {p.name}")
    for e in st.extra:
        print(f"  {'unknown':11}  {e}")
    if st.dirty:
        print(f"  uncommitted changes in {len(st.dirty)} paths")
    return 0


def cmd_unapply(args: argparse.Namespace) -> int:
    from .commands import apply

    version, n = apply.unapply(Path(args.dest))
    print(f"{args.dest}: back to the vLLM {version} baseline ({n} commits removed)")
    return 0


# -- lock --------------------------------------------------------------------


def cmd_lock(args: argparse.Namespace) -> int:
    from .sources.refresh import refresh

    pins = lock.load()
    if args.refresh:
        pins = refresh(pins, say)
        lock.save(pins)
        print(f"{pins.path.name}: {len(pins.releases)} releases refreshed")
        return 0
    default = pins.default().version
    for v in pins.versions():
        r = pins.releases[v]
        mark = "  (default)" if v == default else ""
        print(f"{v:8} {r.status:12} {r.tag:9} {r.commit:10} {', '.join(r.artifacts)}{mark}")
    return 0


# -- matrix / port / export / lint / pr ----------------------------------------


def cmd_matrix(args: argparse.Namespace) -> int:
    from .commands import matrix

    m = matrix.build(args.versions, offline=args.offline, jobs=args.jobs, say=say)
    if args.format == "json":
        print(json.dumps(m.to_json(), indent=2))
    else:
        print(m.to_markdown(), end="")
    return 0


def cmd_port(args: argparse.Namespace) -> int:
    from .commands import port

    work, into = _path(args.work), _path(args.into)
    if args.resume:
        r = port.resume(args.from_version, args.to_version, work=work, into=into, keep=args.keep)
    else:
        r = port.port(
            args.from_version,
            args.to_version,
            work=work,
            into=into,
            keep=args.keep,
            from_source=args.source,
            to_source=args.source,
            offline=args.offline,
            say=say,
        )
    for name, status in r.status.items():
        print(f"  {status:8}  {name}")
    for slug, what in r.variants.items():
        print(f"  {what:9}  {slug}")
    if r.conflict:
        again = "".join(f" --{k} {v}" for k in ("work", "into") if (v := getattr(args, k)))
        raise PatchError(
            f"{r.conflict} conflicts with vLLM {r.to_version} in {', '.join(r.unresolved)}; "
            f"resolve it in {r.work}, `git add` it, `git am --continue`, then run "
            f"`vpatch port {r.from_version} {r.to_version}{again} --continue`"
        )
    print(f"{r.into}: {len(r.names)} patches for vLLM {r.to_version}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from .commands import export

    done = export.export(Path(args.dir), _path(args.into))
    for slug, what in done.variants.items():
        print(f"  {what:9}  {slug}")
    print(
        f"{done.dir}: {len(done.names)} patches for vLLM {done.version} "
        f"({len(done.written)} files written, {len(done.removed)} removed)"
    )
    return 0


def cmd_series(args: argparse.Namespace) -> int:
    from .commands import export

    done = export.render(args.version, Path(args.out))
    print(f"{done.dir}: {len(done.names)} patches for vLLM {done.version} (series)")
    return 0


def cmd_lint(args: argparse.Namespace) -> int:
    from .commands import lint

    result = lint.lint(offline=args.offline, say=say)
    for note in result.skipped:
        say(f"skipped: {note}")
    for problem in result.problems:
        print(problem)
    if result.problems:
        raise PatchError(f"lint found {len(result.problems)} problems (listed above)")
    print("lint: every series is consistent and up to date")
    return 0


def cmd_pr(args: argparse.Namespace) -> int:
    from .commands import pr

    out, signoff = _path(args.out), args.signoff
    if args.resume:
        d = pr.resume(args.onto, out=out, signoff=signoff, offline=args.offline, say=say)
    else:
        d = pr.draft(
            args.onto,
            out=out,
            signoff=signoff,
            source=args.source,
            offline=args.offline,
            only=tuple(args.patch or ()),
            say=say,
        )
    print("\n".join(d.report()))
    if d.conflict:
        again = "".join(f" --{k} {v!r}" for k in ("out", "signoff") if (v := getattr(args, k)))
        raise PatchError(
            f"{d.conflict.patch.name} conflicts with {d.target} in {', '.join(d.unresolved)}; "
            f"resolve it in {d.tree} (branch {d.branch}), `git add` it, `git am --continue`, "
            f"then run `vpatch pr --onto {args.onto}{again} --continue`"
        )
    if not d.sent:
        print(f"nothing to send: {d.target} has every patch already; no branch was made")
        return 0
    n = len(d.sent)
    where = d.out or Path("pr")
    print(f"{d.tree}: branch {d.branch}, {n} commit{'s' * (n != 1)} on {d.target}")
    print(f"{where / 'PR_BODY.md'}, {where / 'series'}/: {d.title}")
    print("nothing was pushed; to open the pull request:")
    print("\n".join(f"  {c}" for c in d.commands))
    return 0


# -- wheels ------------------------------------------------------------------


def cmd_wheel(args: argparse.Namespace) -> int:
    from .commands import wheel

    built = wheel.build(
        args.version,
        variant=args.variant,
        mode=args.mode,
        out=Path(args.out),
        series_dir=_path(args.series),
        dry_run=args.dry_run,
        offline=args.offline,
        say=say,
    )
    from .wheel.build import BuildPlan, format_plan

    print(format_plan(built) if isinstance(built, BuildPlan) else built)
    return 0


def cmd_verify_wheel(args: argparse.Namespace) -> int:
    from .commands import verify

    res = verify.verify_wheel(
        Path(args.wheel), arch=args.arch, tree=_path(args.tree), offline=args.offline
    )
    from .wheel.verify import format_verify

    print(format_verify(res))
    if not res.ok:
        n = len(res.problems)
        raise WheelError(f"verify-wheel found {n} problem{'s' * (n != 1)} (listed above)")
    return 0


# -- install / uninstall / check (one Python environment) ---------------------


def cmd_install(args: argparse.Namespace) -> int:
    from .commands import install

    res = install.install(args.python, _path(args.series), dry_run=args.dry_run, say=say)
    _print_env_result(res, "replace", "")
    return 0


def cmd_uninstall(args: argparse.Namespace) -> int:
    from .commands import install

    res = install.uninstall(args.python, dry_run=args.dry_run, say=say)
    _print_env_result(res, "restore", "uninstalled ")
    return 0


def _print_env_result(res: Any, verb: str, done: str) -> None:
    """install's and uninstall's report: what changed (or, dry, would)."""
    where = f"{res.dist.name} {res.dist.version} at {res.dist.root}"
    if res.action == "nothing":
        print(f"{where}: {res.message}; nothing to do")
    elif res.action == "dry-run":
        print(f"{where}: {res.message} (dry run: nothing changed)")
        for f in res.files:
            print(f"  {verb}  {f}")
        for f, what in res.bytecode.items():
            print(f"  {what:24} {f}")
    else:
        print(f"{where}: {done or res.action + ' '}{res.message}")


def cmd_check(args: argparse.Namespace) -> int:
    """Exit 0 when EAGLE-3 is ready, 1 when not (the report says why)."""
    from .commands import check

    report = check.check(args.python)
    if args.format == "json":
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(check.format_text(report))
    return 0 if report.eagle3_ready else 1


def cmd_doctor(args: argparse.Namespace) -> int:
    """Exit 0 when the pair is ok, 1 when doctor found an error, 2 for bad input."""
    from .commands import doctor
    from .commands.doctor import Request

    req = Request(
        command=tuple(args.command),
        target=args.target,
        drafter=args.drafter,
        python=args.python,
        tensor_parallel_size=args.tensor_parallel_size,
        pipeline_parallel_size=args.pipeline_parallel_size,
        num_speculative_tokens=args.num_speculative_tokens,
    )
    report = doctor.doctor(req)
    print(json.dumps(report.to_json(), indent=2) if args.format == "json" else report.to_text())
    return 0 if report.ok else 1


# ----------------------------------------------------------------------------


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error said like any other: one line, exit 2
    (ConfigError's code, and argparse's)."""

    def error(self, message: str) -> NoReturn:
        print(f"vpatch: error: {message} (see `{self.prog} --help`)", file=sys.stderr)
        sys.exit(ConfigError.exit_code)


def parser() -> argparse.ArgumentParser:
    ap = Parser(
        prog="vpatch",
        description="EAGLE-3 for DeepSeek-V3 / Kimi-K2.5 targets on vLLM: the patches and tools.",
    )
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, func: Callable[[argparse.Namespace], int], help: str) -> Parser:
        p = sub.add_parser(name, help=help)
        p.set_defaults(func=func)
        return p

    p = add("fetch", cmd_fetch, "download a pinned release's source into the cache")
    p.add_argument("version", nargs="?", help="release (default: newest patched)")
    p.add_argument(
        "--dest",
        help="also write the unpatched tree into this empty folder "
        "(`vpatch apply` with the same --dest and --source patches it there)",
    )
    _source_args(p)

    p = add("apply", cmd_apply, "make a patched vLLM tree (git, one commit per patch)")
    p.add_argument("version", nargs="?", help="release (default: newest patched)")
    p.add_argument("--dest", help="tree folder (default: build/vllm-<release>)")
    p.add_argument("--series", help="apply the series in this folder instead")
    _source_args(p)

    p = add("status", cmd_status, "list each patch as applied or not")
    p.add_argument("dest")
    p.add_argument("--series", help="compare with the series in this folder")

    p = add("unapply", cmd_unapply, "return a patched tree to its baseline")
    p.add_argument("dest")

    p = add("lock", cmd_lock, "list the pinned releases, or --refresh their hashes")
    p.add_argument("--refresh", action="store_true", help="rewrite hashes from the index")

    p = add("matrix", cmd_matrix, "how each patch of the newest series fares on each release")
    p.add_argument(
        "--versions", nargs="+", metavar="V", help="these releases (default: the lock's)"
    )
    p.add_argument("--format", choices=("md", "json"), default="md")
    p.add_argument("--jobs", type=int, help="worker processes (default: one per core)")
    p.add_argument("--offline", action="store_true", help="use the cache only")

    p = add("port", cmd_port, "carry a release's series to another release (3-way)")
    p.add_argument("from_version", metavar="FROM")
    p.add_argument("to_version", metavar="TO")
    p.add_argument(
        "--continue",
        dest="resume",
        action="store_true",
        help="export a port whose conflicts you resolved",
    )
    p.add_argument("--work", help="work tree (default: build/port-TO)")
    p.add_argument("--into", help="write a plain series folder here (default: the patch set)")
    p.add_argument("--keep", action="store_true", help="keep the work tree after a clean port")
    p.add_argument("--source", default="auto", metavar="auto|sdist|wheel|cpu-wheel|git")
    p.add_argument("--offline", action="store_true", help="use the cache only")

    p = add("export", cmd_export, "write a patched tree's commits into the patch set")
    p.add_argument("dir", help="a vpatch tree (vpatch apply, then your commits)")
    p.add_argument("--into", help="write a plain series folder here instead")

    p = add("series", cmd_series, "write a release's series as plain files (git am, patch -p1)")
    p.add_argument("version", nargs="?", help="release (default: newest patched)")
    p.add_argument("--out", required=True, help="folder for NNNN-<slug>.patch and `series`")

    p = add("lint", cmd_lint, "check the patch set: files, DEP-3, every release up to date")
    p.add_argument("--offline", action="store_true", help="skip releases not in the cache")

    p = add("pr", cmd_pr, "draft the vLLM pull request of what upstream still lacks")
    p.add_argument("--onto", required=True, metavar="VERSION|PATH", help="a release or a checkout")
    p.add_argument("--out", help="PR_BODY.md and series/ go here (default: pr); a release too")
    p.add_argument("--signoff", metavar="'NAME <EMAIL>'", help="default: git's user.name/email")
    p.add_argument("--continue", dest="resume", action="store_true", help="after a conflict")
    p.add_argument(
        "--patch",
        action="append",
        metavar="SLUG",
        help="send this patch alone (again for more); default: every one upstream lacks",
    )
    p.add_argument("--source", default="auto", metavar="auto|sdist|wheel|cpu-wheel|git")
    p.add_argument("--offline", action="store_true", help="use the cache only")

    p = add("wheel", cmd_wheel, "an installable wheel of a patched release")
    p.add_argument("version", nargs="?", help="release (default: newest patched)")
    p.add_argument("--variant", choices=("cuda", "cpu"), default="cuda")
    p.add_argument(
        "--mode",
        choices=("overlay", "source"),
        default="overlay",
        help="overlay: patch the official wheel's Python files (seconds); "
        "source: build from the patched tree with TORCH_CUDA_ARCH_LIST=10.0 (hours)",
    )
    p.add_argument("--out", default="dist", help="output folder (default: dist)")
    p.add_argument("--series", help="use the series in this folder instead")
    p.add_argument("--dry-run", action="store_true", help="source mode: print, don't build")
    p.add_argument("--offline", action="store_true", help="use the cache only")

    p = add("verify-wheel", cmd_verify_wheel, "CUDA archs in a wheel's extensions; patched files")
    p.add_argument("wheel")
    p.add_argument("--arch", help="required arch, e.g. sm_100 (default for CUDA wheels)")
    p.add_argument("--tree", help="patched tree to compare the wheel's Python files with")
    p.add_argument("--offline", action="store_true", help="use the cache only")

    py_help = "the environment's interpreter (default: python3 on PATH, the active venv)"
    p = add("install", cmd_install, "patch the vLLM installed in a Python environment")
    p.add_argument("--python", metavar="PY", help=py_help)
    p.add_argument("--series", help="install the series in this folder instead")
    p.add_argument("--dry-run", action="store_true", help="say what would change; change nothing")

    p = add("uninstall", cmd_uninstall, "restore the vLLM files vpatch install replaced")
    p.add_argument("--python", metavar="PY", help=py_help)
    p.add_argument("--dry-run", action="store_true", help="say what would change; change nothing")

    p = add("check", cmd_check, "each patch in an environment's vLLM; EAGLE-3 ready or not")
    p.add_argument("--python", metavar="PY", help=py_help)
    p.add_argument("--format", choices=("text", "json"), default="text")

    p = add("doctor", cmd_doctor, "check an EAGLE-3 drafter, its target and vLLM before serving")
    p.add_argument(
        "command",
        nargs="*",
        metavar="-- vllm serve MODEL ...",
        help="the serve command you will run, after `--` (--speculative-config included)",
    )
    p.add_argument("--target", help="target model folder or hub id (local cache)")
    p.add_argument("--drafter", help="EAGLE-3 drafter folder or hub id")
    p.add_argument("--python", default="python3", metavar="PY", help=py_help)
    p.add_argument("--tensor-parallel-size", type=int, default=1, metavar="N")
    p.add_argument("--pipeline-parallel-size", type=int, default=1, metavar="N")
    p.add_argument("--num-speculative-tokens", type=int, default=3, metavar="K")
    p.add_argument("--format", choices=("text", "json"), default="text")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    gitutil.scrub_environ()
    try:
        code: int = args.func(args)
        return code
    except VpatchError as e:
        return _fail(str(e), e.exit_code)
    except KeyboardInterrupt:
        return _fail("interrupted; nothing was left half done", INTERRUPTED)
    except OSError as e:  # a file-system error no command converted itself
        err = disk_error(e)
        return _fail(str(err), err.exit_code)
    except Exception as e:  # a bug: still one line, the traceback on request
        if os.environ.get("VPATCH_DEBUG"):
            traceback.print_exc()
        return _fail(
            f"internal error: {type(e).__name__}: {e} (VPATCH_DEBUG=1 shows the traceback)",
            INTERNAL,
        )


def _fail(message: str, code: int) -> int:
    first = message.strip().splitlines()[0] if message.strip() else "failed"
    print(f"vpatch: error: {first}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
