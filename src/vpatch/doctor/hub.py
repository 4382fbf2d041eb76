"""Where a model lives, and what doctor reads of it.

A folder that exists is read as it is. Any other ref is a hub id, owner/name
(vLLM's `--revision`, the speculative config's "revision", or doctor's own
`--target/--drafter owner/name@revision` pick a branch, tag or commit), read
through huggingface_hub as vLLM reads it: HF_ENDPOINT, HF_TOKEN or `hf auth
login`, HF_HUB_CACHE / HF_HOME, HF_HUB_OFFLINE, HF_HUB_DOWNLOAD_TIMEOUT.

Online, doctor fetches what its checks read and nothing else, all of it at
one commit (the revision is resolved once, by the first request):
  * the repo's listing (GET /api/models/{repo}[/revision/{rev}]: the commit
    and the file names), made as HfApi.model_info makes it (_listing), without
    retries, so an unreachable endpoint fails at once;
  * config.json, and a target's tokenizer_config.json (whether the tokenizer
    is remote code), whole, with hf_hub_download: into the Hugging Face cache,
    where vLLM finds them (refs/<revision> too);
  * a drafter's safetensors headers by range requests: the first 16 KiB of
    each file, then the rest of a longer header, never tensor data (the index
    of a sharded checkpoint whole, into the cache); a server that refuses
    ranges is read from the start of a plain GET, no further
    (network/httprange.py).
    A file the cache already holds whole is read there; a header read before
    is kept (cached.py).
Offline (`--offline`, or HF_HUB_OFFLINE=1) only the cache is read (cached.py),
and what is missing is named with the `hf download` that fetches just that.

The headers are not read with huggingface_hub's get_safetensors_metadata: it
knows only model.safetensors or the index, where vLLM's loader and doctor's
reading of a folder take every top-level *.safetensors; it first asks for
both with two requests more; and it reads the whole body when a server
ignores Range (a 10 GB drafter into memory). Here the bytes of a header,
from a file or from the hub, go through the one parser in weights.py, so a
hub id and the same folder on disk get the same verdict.

All of it within one deadline for the run's hub reads, on huggingface_hub's
session with doctor's hooks (network/hubclient.py).

huggingface_hub's errors (and its HTTP library's) become ConfigError around
the reads here, and nowhere else (hub_errors.py says what each means): one
line, exit 2. A failed fetch leaves nothing in the cache but whole files
(tidy.py).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .. import jsontext, untrusted
from ..errors import ConfigError, RangeUnsupported
from ..network import deadline, httprange, hubclient
from . import cached, hub_errors, tidy, weights
from .cached import CONFIG, TOKENIZER

# owner/name, as the hub names repos (huggingface_hub's validate_repo_id): ASCII
# letters, digits, "_", "-" and "."; each part starts and ends with a letter, a
# digit or "_", and is at most 96 long; no "--" or ".." anywhere, no ".git" at the end
_PART = r"[A-Za-z0-9_](?:[\w.-]{0,94}[A-Za-z0-9_])?"
HUB_ID = re.compile(rf"^(?!.*(?:--|\.\.))(?!.*\.git$){_PART}/{_PART}$", re.ASCII)
# what git's check-ref-format refuses in a branch or tag name
_NOT_IN_REF = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//")
# the first range of a header: a drafter's header is 1-3 KB (a few dozen
# tensors); a longer one costs one request more
FIRST_READ = 16 * 1024


@dataclass(frozen=True)
class Hub:
    """How hub ids are read. None everywhere: huggingface_hub's own settings
    (HF_HUB_CACHE / HF_HOME, HF_ENDPOINT, HF_HUB_OFFLINE,
    HF_HUB_DOWNLOAD_TIMEOUT), as for vLLM."""

    cache_dir: str | Path | None = None
    endpoint: str | None = None
    offline: bool | None = None
    timeout: float | None = None
    # doctor's own: seconds for all the hub reads of a run (None: VPATCH_HUB_TIMEOUT,
    # else hubclient.DEFAULT)
    deadline: float | None = None


@dataclass(frozen=True)
class Model:
    ref: str  # as the user wrote it; what the serve command names
    path: Path  # the folder holding config.json (a cache snapshot for a hub id)
    repo: str | None = None  # the hub id (None: a local folder)
    revision: str | None = None  # as asked (None: the default branch)
    commit: str | None = None  # the commit read
    endpoint: str | None = None  # where from (None: the local cache, offline)
    read: tuple[str, ...] = ()  # the files read, and the headers
    tensors: weights.Weights | None = None  # a hub drafter's headers

    @property
    def hub(self) -> bool:
        return self.repo is not None

    def source(self) -> str:
        """What was read, from which commit (for the report's header)."""
        if not self.hub:
            return f"{self.path}"
        rev = f" ({self.revision})" if self.revision and self.revision != self.commit else ""
        where = self.endpoint or "the local Hugging Face cache (offline)"
        return f"{self.repo} at commit {self.commit}{rev} from {where}: {', '.join(self.read)}"

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.ref,
            "repo": self.repo,
            "revision": self.revision,
            "commit": self.commit,
            "from": "folder" if not self.hub else self.endpoint or "cache",
            "read": list(self.read),
        }


def split(ref: str) -> tuple[str, str | None]:
    """owner/name@revision (doctor's --target/--drafter) -> (owner/name,
    revision); a folder or a plain id is returned as it is."""
    name, at, rev = ref.rpartition("@")
    if not at or Path(ref).expanduser().exists() or not HUB_ID.match(name):
        return ref, None
    if not rev:
        raise ConfigError(
            f"{ref}: nothing after @; give {name}@REVISION (a branch, tag or commit), or {name}"
        )
    return name, rev


def check(ref: str, revision: str | None = None) -> bool:
    """Whether `ref` is a model folder (True) or a hub id (False); anything
    else is a ConfigError, before any request is made: a path that is not a
    model folder, a name the hub would refuse (`../x`, `ok/..`), and a
    revision that is not a branch, tag or commit name. huggingface_hub
    writes the revision as a path, refs/<revision>, in the cache: a `..` in
    it wrote outside HF_HOME."""
    p = Path(ref).expanduser()
    if p.is_dir():
        if not (p / CONFIG).is_file():
            raise ConfigError(f"{ref}: no config.json in this folder; is it a model folder?")
        return True
    if p.exists():
        raise ConfigError(f"{ref}: not a folder; give a model folder or a hub id (owner/name)")
    name, at, rev = ref.rpartition("@")
    if at and HUB_ID.match(name):
        given = f" with --revision {rev}" if rev else ""
        raise ConfigError(
            f"{ref}: vLLM takes no @revision in a model name; serve {name}{given} (a "
            'drafter: "revision": "REVISION" in --speculative-config)'
        )
    if not HUB_ID.match(ref):
        raise ConfigError(
            f"{ref}: no such folder, and not a hub id (owner/name: letters, digits, _ - and ., "
            "no .. or --)"
        )
    if revision is not None and (why := _not_a_ref(revision)):
        raise ConfigError(
            f"{ref}: revision {revision!r} is not a branch, tag or commit name ({why})"
        )
    return False


def _not_a_ref(rev: str) -> str:
    """Why `rev` cannot name a branch, a tag or a commit (git check-ref-format's
    rules), or "" when it can."""
    if not rev or rev == "@":
        return f"it is {rev!r}"
    if m := _NOT_IN_REF.search(rev):
        return f"it holds {m.group()!r}"
    if rev.startswith("/") or rev.endswith(("/", ".")):
        return "it starts with / or ends with / or ."
    if any(part.startswith(".") or part.endswith(".lock") for part in rev.split("/")):
        return "a part of it starts with . or ends with .lock"
    return ""


def resolve(
    ref: str, revision: str | None = None, drafter: bool = False, hub: Hub | None = None
) -> Model:
    """The model `ref` names: a folder that exists, else a hub id read at
    `revision` (the default branch when None) from the hub, or from the cache
    when offline. A drafter's safetensors headers come with it (`tensors`)."""
    hub = hub or Hub()
    if check(ref, revision):
        return Model(ref, Path(ref).expanduser().resolve())
    from huggingface_hub import constants

    # resolved, as hf_hub_download resolves it: tidy compares its paths
    cache = Path(hub.cache_dir or constants.HF_HUB_CACHE).expanduser().resolve()
    offline = constants.is_offline_mode() if hub.offline is None else hub.offline
    if offline:
        with hub_errors.translated(ref, revision, None):
            snap, read, tensors = cached.read(ref, revision, drafter, cache)
            return Model(ref, snap, ref, revision, snap.name, None, tuple(read), tensors)
    endpoint = (hub.endpoint or constants.ENDPOINT).rstrip("/")
    shown = untrusted.url(endpoint)  # HF_ENDPOINT as messages and the report name it
    timeout = hub.timeout if hub.timeout is not None else constants.HF_HUB_DOWNLOAD_TIMEOUT
    errors = hub_errors.translated(ref, revision, shown, timeout)
    with hubclient.bounded(hub.deadline, ref), errors, tidy.tidy(cache, ref):
        return replace(_fetched(ref, revision, drafter, cache, endpoint, timeout), endpoint=shown)


# -- online ---------------------------------------------------------------------


def _fetched(
    repo: str, revision: str | None, drafter: bool, cache: Path, endpoint: str, timeout: float
) -> Model:
    from huggingface_hub import hf_hub_download

    def listing(rev: str | None) -> tuple[str, list[str]]:
        return _listing(repo, rev, endpoint, timeout)

    def fetch(name: str, rev: str | None) -> Path:
        try:
            got = hf_hub_download(
                repo, name, revision=rev, cache_dir=cache, endpoint=endpoint, etag_timeout=timeout
            )
        except ValueError as e:  # what it refuses of an answer (a commit that is a path)
            raise ConfigError(
                f"{untrusted.url(endpoint)}: not a Hugging Face hub ({hub_errors.first(e)})"
            ) from None
        return Path(str(got))

    sha, files = listing(revision)
    if CONFIG not in files:
        raise ConfigError(f"{repo} at commit {sha}: no config.json in the repo; is it a model?")
    # at the revision as asked, so the cache maps it (refs/) as vLLM's download does
    config = fetch(CONFIG, revision)
    commit = config.parent.name
    if commit != sha:  # the branch moved between the two requests: list what was read
        _, files = listing(commit)
    read = [CONFIG]
    tensors = None
    if drafter:
        tensors = _headers(repo, commit, files, cache, endpoint, timeout, read, fetch)
    elif TOKENIZER in files:
        fetch(TOKENIZER, commit)
        read.append(TOKENIZER)
    return Model(repo, config.parent, repo, revision, commit, endpoint, tuple(read), tensors)


def _listing(
    repo: str, revision: str | None, endpoint: str, timeout: float
) -> tuple[str, list[str]]:
    """The commit `revision` names and the repo's files there: the request
    HfApi.model_info makes (/api/models/{repo}[/revision/{rev}], the fields
    sha and siblings), on huggingface_hub's session, headers and errors. Not
    through HfApi: importing hf_api costs 0.05-0.1 s of a doctor run that
    takes 0.3 s on folders (benchmarks/bench_doctor_hub.py)."""
    from urllib.parse import quote

    from huggingface_hub import get_session, hf_raise_for_status

    # public (huggingface_hub.utils), re-exported lazily, which mypy cannot see
    from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined]

    url = f"{endpoint}/api/models/{repo}"
    hub = untrusted.url(endpoint)  # as messages name it
    if revision is not None:
        url += f"/revision/{quote(revision, safe='')}"
    params = {"expand": ["sha", "siblings"]}
    headers = build_hf_headers()
    body = bytearray()
    with get_session().stream("GET", url, headers=headers, params=params, timeout=timeout) as r:
        if r.status_code >= 400:
            r.read()  # the error's message is in the body
            hf_raise_for_status(r)
        for chunk in r.iter_bytes():
            body += chunk
            if len(body) > jsontext.LIMIT:
                raise ConfigError(
                    f"{hub}: the listing of {repo} is over {jsontext.LIMIT // 2**20} MiB; "
                    "no model repo's is"
                )
    data = jsontext.loads(bytes(body), f"{hub}: not a Hugging Face hub: the listing of {repo}")
    sha = data.get("sha") if isinstance(data, dict) else None
    siblings = data.get("siblings") if isinstance(data, dict) else None
    if not isinstance(sha, str) or not isinstance(siblings, list):
        raise ConfigError(f"{hub}: not a Hugging Face hub (no sha and siblings for {repo})")
    if not hubclient.COMMIT.match(sha):
        raise ConfigError(
            f"{hub}: not a Hugging Face hub (the commit of {repo} is {sha[:80]!r}, not a commit id)"
        )
    files = [s["rfilename"] for s in siblings if isinstance(s, dict) and "rfilename" in s]
    return sha, [f for f in files if isinstance(f, str)]


def _headers(
    repo: str,
    commit: str,
    files: list[str],
    cache: Path,
    endpoint: str,
    timeout: float,
    read: list[str],
    fetch: Any,
) -> weights.Weights:
    """The drafter's tensors, from its safetensors headers at `commit`:
    weights.read's choice of files, made from the repo's listing."""
    from huggingface_hub import try_to_load_from_cache

    where = f"{repo} at commit {commit}"
    if weights.INDEX in files:
        index = fetch(weights.INDEX, commit)
        names = weights.shards(index, f"{where}: {weights.INDEX}")
        read.append(weights.INDEX)
        listed = set(files)
        missing = [n for n in names if n not in listed]
        if missing:
            raise ConfigError(
                f"{where}: {weights.INDEX} lists {missing[0]}, which the repo has not"
            )
    else:
        names = weights.singles(files, where)
    other = weights.pickled(files)
    if not names and other:
        raise ConfigError(
            f"{where}: the drafter's weights are pickled only ({', '.join(other)}), and doctor "
            "reads tensor shapes from safetensors headers, never a pickled file; give the "
            "drafter as safetensors, or download it and give its folder"
        )

    def one(name: str) -> tuple[dict[str, weights.Tensor], str]:
        whole = try_to_load_from_cache(repo, name, cache_dir=cache, revision=commit)
        if isinstance(whole, str):
            return weights.header(Path(whole), name), f"{name} header (from the cache)"
        if (got := cached.kept(cache, repo, commit, name)) is not None:
            return got, f"{name} header (kept from a read before)"
        got, raw = _remote_header(repo, name, commit, endpoint, timeout)
        cached.keep(cached.kept_path(cache, repo, commit, name), raw)  # for --offline
        return got, f"{name} header ({len(raw)} bytes)"

    tensors: dict[str, weights.Tensor] = {}
    # the shards' headers at once: on the hub each is a request and a redirect
    for got, said in deadline.each(one, names):  # in order: the first failure is raised
        tensors.update(got)
        read.append(said)
    return weights.Weights(tensors, tuple(names), other)


def _remote_header(
    repo: str, name: str, commit: str, endpoint: str, timeout: float
) -> tuple[dict[str, weights.Tensor], bytes]:
    """The tensors one safetensors file on the hub declares, read by range
    requests, and the 8 + N bytes of its header."""
    from huggingface_hub import hf_hub_url

    url = hf_hub_url(repo, name, revision=commit, endpoint=endpoint)
    where = f"{repo}/{name} at commit {commit}"
    head, size = _range(url, 0, FIRST_READ, timeout)
    n = weights.length(head, size, where)
    raw = head[8 : 8 + n]
    if len(raw) < n:
        rest, _ = _range(url, len(head), 8 + n, timeout)
        raw += rest
    if len(raw) < n:
        raise ConfigError(
            f"{where}: safetensors header truncated (it claims {n} bytes, the file ends "
            f"after {8 + len(raw)})"
        )
    return weights.parse(raw, where, name), head[:8] + raw


def _range(url: str, start: int, end: int, timeout: float) -> tuple[bytes, int | None]:
    """Bytes [start, end) of the file at `url` (fewer where it ends) and its
    size when the server says it: one range request (httprange.read), and
    where the server refuses ranges, the start of a plain GET read no
    further than `end` (httprange.head): never the whole file."""
    from huggingface_hub import get_session, hf_raise_for_status

    # public (huggingface_hub.utils), re-exported lazily, which mypy cannot see
    from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined]

    @contextlib.contextmanager
    def get(headers: dict[str, str]) -> Iterator[httprange.Answer]:
        asked = {**build_hf_headers(), **headers}
        with get_session().stream("GET", url, headers=asked, timeout=timeout) as r:
            if r.status_code >= 400 and r.status_code != 416:
                r.read()  # the error's message is in the body
                hf_raise_for_status(r)
            yield httprange.Answer(r.status_code, r.headers, r.iter_bytes())

    name = url.split("?", 1)[0].rsplit("/", 1)[-1]
    try:
        part = httprange.read(get, name, start, end)
    except RangeUnsupported:
        try:
            part = httprange.head(get, name, start, end)
        except RangeUnsupported as e:
            shown = untrusted.url(url.split("?", 1)[0])
            raise ConfigError(f"{shown}: not a Hugging Face hub ({e})") from None
    return part.data, part.size
