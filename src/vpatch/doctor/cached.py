"""What doctor reads of a hub id from the local Hugging Face cache: the
files hf_hub_download put there whole, and the safetensors headers doctor
read by range requests, which it keeps beside them. Offline (`--offline`,
HF_HUB_OFFLINE) this is all it reads; online, a header kept is not asked
for again.

A drafter's safetensors file is read on the hub by range requests (its
first 16 KiB), never whole, so huggingface_hub holds no copy of it:
`--offline` after an online run found no header, and advised downloading
the whole weights. Doctor keeps the 8 + N bytes it read as a file of its
own, <repo folder>/.vpatch-headers/<commit>/<file>: beside the snapshots,
never in them (vLLM would take a header without its data for a weights
file); at a commit, whose files never change; deleted with the repo
(`hf cache delete`); huggingface_hub's scan of the cache skips a folder it
does not know. A read that fails takes them back with the rest (tidy.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from . import weights

CONFIG = "config.json"
TOKENIZER = "tokenizer_config.json"
HEADERS = ".vpatch-headers"


def kept_path(cache: Path, repo: str, commit: str, name: str) -> Path:
    """Where the header of file `name` of `repo` at `commit` is kept."""
    return cache / ("models--" + repo.replace("/", "--")) / HEADERS / commit / name


def keep(path: Path, raw: bytes) -> None:
    """A header's 8 + N bytes at `path`, whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(raw)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def kept(cache: Path, repo: str, commit: str, name: str) -> dict[str, weights.Tensor] | None:
    """The tensors of the header kept for that file, or None."""
    path = kept_path(cache, repo, commit, name)
    return weights.header(path, name) if path.is_file() else None


def read(
    repo: str, revision: str | None, drafter: bool, cache: Path
) -> tuple[Path, list[str], weights.Weights | None]:
    """The snapshot folder of `repo` at `revision` in the cache, what was
    read of it, and a drafter's tensors; ConfigError naming what is missing
    and how to fetch just that."""
    from huggingface_hub import try_to_load_from_cache

    def lookup(name: str) -> Any:
        return try_to_load_from_cache(repo, name, cache_dir=cache, revision=revision)

    at = f" at revision {revision}" if revision else ""
    rev = f" --revision {revision}" if revision else ""

    def missing(names: list[str]) -> ConfigError:
        return ConfigError(
            f"{repo}: {', '.join(names)} not in the local Hugging Face cache ({cache}){at}, "
            f"and doctor is offline (--offline or HF_HUB_OFFLINE); fetch just that, online: "
            f"`hf download {repo} {' '.join(names)}{rev}`"
        )

    config = lookup(CONFIG)
    if not isinstance(config, str):
        raise missing([CONFIG] if drafter else [CONFIG, TOKENIZER])
    snap = Path(config).parent
    read = [CONFIG]
    if not drafter:
        tok = lookup(TOKENIZER)
        if tok is None:  # neither cached nor known to be absent
            raise missing([TOKENIZER])
        if isinstance(tok, str):
            read.append(TOKENIZER)
        return snap, read, None
    here = [p.name for p in snap.iterdir() if p.is_file()]
    headers = kept_path(cache, repo, snap.name, "")
    seen = [str(p.relative_to(headers)) for p in headers.rglob("*") if p.is_file()]
    if weights.INDEX in here:
        files = weights.shards(snap / weights.INDEX)
        read.append(weights.INDEX)
    else:
        files = weights.singles(here + seen, str(snap))
    if not files and weights.pickled(here):
        raise ConfigError(
            f"{repo}: the drafter's weights in the cache are pickled only "
            f"({', '.join(weights.pickled(here))}), and doctor reads tensor shapes from "
            "safetensors headers, never a pickled file; give the drafter as safetensors"
        )
    tensors: dict[str, weights.Tensor] = {}
    absent = []
    for f in files:
        if (snap / f).is_file():
            tensors.update(weights.header(snap / f, f))
            read.append(f"{f} header")
        elif (got := kept(cache, repo, snap.name, f)) is not None:
            tensors.update(got)
            read.append(f"{f} header (kept from an online run)")
        else:
            absent.append(f)
    if absent or not files:
        what = absent or ["*.safetensors"]
        include = " ".join(f'--include "{n}"' if "*" in n else n for n in what)
        raise ConfigError(
            f"{repo}: the safetensors headers of {', '.join(what)} not in the local Hugging "
            f"Face cache ({cache}){at}, and doctor is offline (--offline or HF_HUB_OFFLINE): "
            "run doctor online once (it reads the headers, a few KB, and keeps them for "
            f"--offline), or fetch the whole files: `hf download {repo} {include}{rev}`"
        )
    return snap, read, weights.Weights(tensors, tuple(files), weights.pickled(here))
