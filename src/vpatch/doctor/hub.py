"""Where a model lives: a local folder, or a Hugging Face hub id resolved
from the local cache with huggingface_hub's cache API (offline: nothing is
ever downloaded; a model that is not in the cache is bad input)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError

CONFIG = "config.json"
# owner/name[@revision]: what `vllm serve` and huggingface_hub accept as a hub id
HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+(@[\w./-]+)?$")


@dataclass(frozen=True)
class Model:
    ref: str  # as the user wrote it; what the serve command names
    path: Path  # the folder holding config.json
    hub: bool  # resolved from the Hugging Face cache


def resolve(ref: str, cache_dir: str | Path | None = None) -> Model:
    """A folder that exists is used as it is; otherwise `ref` must be a hub
    id (owner/name, optionally @revision) whose config.json the local cache
    holds (huggingface_hub.try_to_load_from_cache; HF_HUB_CACHE / HF_HOME
    decide where the cache is, as they do for vLLM)."""
    p = Path(ref).expanduser()
    if p.is_dir():
        if not (p / CONFIG).is_file():
            raise ConfigError(f"{ref}: no config.json in this folder; is it a model folder?")
        return Model(ref, p.resolve(), False)
    if p.exists():
        raise ConfigError(f"{ref}: not a folder; give a model folder or a hub id (owner/name)")
    if not HUB_ID.match(ref):
        raise ConfigError(f"{ref}: no such folder, and not a hub id (owner/name[@revision])")
    repo, _, revision = ref.partition("@")
    from huggingface_hub import try_to_load_from_cache
    from huggingface_hub.errors import HFValidationError

    try:
        found = try_to_load_from_cache(repo, CONFIG, cache_dir=cache_dir, revision=revision or None)
    except HFValidationError as e:
        raise ConfigError(f"{ref}: not a valid hub id ({e})") from None
    if not isinstance(found, str):
        where = f" at revision {revision}" if revision else ""
        raise ConfigError(
            f"{ref}: not in the local Hugging Face cache{where} (doctor never downloads); "
            f"run `hf download {repo}` first or give the model folder"
        )
    return Model(ref, Path(found).parent, True)
