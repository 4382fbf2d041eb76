"""Where a model lives: local folders; hub ids read from the stand-in hub
(tests/support/hub.py) through huggingface_hub (the listing, config.json and
tokenizer_config.json whole into the cache, the drafter's safetensors
headers by range requests), or from the cache alone when offline; and every
bad answer of a hub as one ConfigError line, the cache left with nothing but
whole files."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from support import hub as standin_hub
from support import pairs as F
from support.hub import TOKEN, StandIn
from vpatch.doctor import cached, hub, weights
from vpatch.errors import ConfigError
from vpatch.network import deadline, hubclient

KIMI = "moonshotai/Kimi-K2.5"
DRAFTER = "acme/kimi-eagle3"


no_token = standin_hub.no_token


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("pair")
    t, d = F.pair(root, sparse=True)
    (t / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "TikTokenTokenizer"}))
    return t, d


@pytest.fixture(scope="module")
def standin(pair, tmp_path_factory):
    t, d = pair
    s = StandIn()
    s.add(KIMI, t, tags=("v1",))
    s.add(DRAFTER, d)
    root = tmp_path_factory.mktemp("repos")
    # a second commit on another branch: only its own files
    other = F.write_model(root / "drafter-v2", json.loads((d / "config.json").read_text()))
    F.write_header_only(other / "model.safetensors", {"fc.weight": ("BF16", [4, 12])})
    s.add(DRAFTER, other, branch="v2")
    s.add("acme/gated", t, gated=True)
    s.add("acme/private", t, private=True)
    readme = root / "no-config"
    readme.mkdir()
    (readme / "README.md").write_text("not a model\n")
    s.add("acme/no-config", readme)
    pickled = F.write_model(root / "pickled", {"model_type": "llama"})
    (pickled / "pytorch_model.bin").write_bytes(b"\x80" * 64)
    s.add("acme/pickled", pickled)
    cfg = json.loads((d / "config.json").read_text())
    sharded = F.write_model(root / "sharded", cfg, F.llama_tensors(F.KIMI_VOCAB), True, 3)
    s.add("acme/sharded", sharded)
    for name, raw in {
        "truncated": struct.pack("<Q", 5000) + b'{"fc.weight": ',
        "huge": struct.pack("<Q", weights.MAX_HEADER + 1) + b"{}",
        "not-json": struct.pack("<Q", 8) + b"{oops!!}",
    }.items():
        bad = F.write_model(root / name, {"model_type": "llama"})
        (bad / "model.safetensors").write_bytes(raw)
        s.add(f"acme/{name}", bad)
    with s.running():
        yield s


def online(standin, cache: Path, **kw) -> hub.Hub:
    return hub.Hub(cache_dir=cache, endpoint=standin.url, offline=False, **kw)


def whole_files_only(cache: Path) -> None:
    """The cache holds nothing a failed run left half done: no partial
    downloads, markers, locks, or refs to nothing."""
    for p in cache.rglob("*") if cache.exists() else ():
        assert not p.name.endswith(".incomplete"), p
        assert ".no_exist" not in p.parts and ".locks" not in p.parts, p
        if "refs" in p.parts and p.is_file():
            assert (p.parents[1] / "snapshots" / p.read_text().strip()).is_dir(), p


# -- local folders --------------------------------------------------------------


def test_local_folder(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    m = hub.resolve(str(tmp_path))
    assert m.path == tmp_path.resolve() and not m.hub and m.ref == str(tmp_path)
    assert m.to_json()["from"] == "folder" and m.tensors is None


def test_folder_without_config(tmp_path):
    with pytest.raises(ConfigError, match="no config.json"):
        hub.resolve(str(tmp_path))


def test_a_file_is_not_a_model(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(ConfigError, match="not a folder"):
        hub.resolve(str(tmp_path / "f"))


@pytest.mark.parametrize(
    "ref,phrase",
    [
        ("not a hub id", "not a hub id"),
        ("/abs/missing/dir", "no such folder"),
        ("acme/drafter@v2", "--revision v2"),  # vLLM reads no NAME@REV
        ("../x", "not a hub id"),
        ("ok/..", "not a hub id"),
        ("a--b/c", "not a hub id"),  # the hub's own rules: no -- or ..
    ],
)
def test_not_a_model(tmp_path, monkeypatch, ref, phrase):
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")  # `../x` then names nothing that exists
    with pytest.raises(ConfigError, match=phrase):
        hub.resolve(ref, hub=hub.Hub(cache_dir=tmp_path, offline=True))


@pytest.mark.parametrize("rev", ["main", "v1.0", "refs/pr/1", "feature/x", "a" * 40])
def test_a_branch_tag_or_commit_name_is_a_revision(rev):
    assert hub.check("acme/d", rev) is False  # a hub id, the revision taken


@pytest.mark.parametrize(
    "rev",
    ["", "@", "../../x", "a/../b", "/abs/x", "x/", "x.", "a//b", ".hidden", "a/x.lock", "a b",
     "a~1", "a^", "a:b", "a?", "a*", "a[b", "a\\b", "a@{1}", "a\x00b"],
)  # fmt: skip
def test_a_revision_git_would_refuse_is_refused(rev):
    """huggingface_hub writes refs/<revision> in the cache: a revision is
    what git's check-ref-format takes, or a commit, nothing else."""
    with pytest.raises(ConfigError, match="is not a branch, tag or commit name"):
        hub.check("acme/d", rev)


def test_nothing_after_the_at(tmp_path):
    with pytest.raises(ConfigError, match="acme/d@: nothing after @; give acme/d@REVISION"):
        hub.split("acme/d@")


def test_split_takes_the_revision_off_a_hub_id(tmp_path):
    assert hub.split("acme/d@v2") == ("acme/d", "v2")
    assert hub.split("acme/d") == ("acme/d", None)
    folder = tmp_path / "model@v1"
    folder.mkdir()
    assert hub.split(str(folder)) == (str(folder), None)  # a folder is a folder


# -- from the hub -------------------------------------------------------------------


def test_target_from_the_hub_lands_in_the_cache(standin, tmp_path):
    standin.reset()
    m = hub.resolve(KIMI, hub=online(standin, tmp_path))
    commit = standin.repos[KIMI].refs["main"]
    assert m.hub and m.commit == commit and m.read == ("config.json", "tokenizer_config.json")
    snap = tmp_path / "models--moonshotai--Kimi-K2.5" / "snapshots" / commit
    assert m.path == snap and (snap / "tokenizer_config.json").is_file()
    assert (snap.parents[1] / "refs" / "main").read_text() == commit  # as vLLM's download
    assert f"at commit {commit} from {standin.url}" in m.source()
    # what went over the wire: the listing, then HEAD + GET of each file, and
    # nothing else (huggingface_hub's own fetch of its agent registry is not sent)
    asked = [(a, p) for a, p, _ in standin.log]
    assert asked == [
        ("GET", f"/api/models/{KIMI}"),
        ("HEAD", f"/{KIMI}/resolve/main/config.json"),
        ("GET", f"/{KIMI}/resolve/main/config.json"),
        ("HEAD", f"/{KIMI}/resolve/{commit}/tokenizer_config.json"),
        ("GET", f"/{KIMI}/resolve/{commit}/tokenizer_config.json"),
    ]


@pytest.mark.parametrize("rev", ["v1", "main", None])
def test_a_revision_is_a_branch_a_tag_or_a_commit(standin, tmp_path, rev):
    commit = standin.repos[KIMI].refs["main"]
    m = hub.resolve(KIMI, rev or commit, hub=online(standin, tmp_path))
    assert m.commit == commit and m.revision == (rev or commit)


def test_drafter_headers_by_range_requests(standin, pair, tmp_path):
    standin.reset()
    m = hub.resolve(DRAFTER, drafter=True, hub=online(standin, tmp_path))
    assert m.tensors == weights.read(pair[1])  # what the folder on disk says
    ranges = [(p, r) for a, p, r in standin.log if r]
    file = f"{m.commit}/model.safetensors"
    first = f"bytes=0-{hub.FIRST_READ - 1}"
    assert ranges == [  # the hub sends an LFS file to its CDN; the range goes along
        (f"/{DRAFTER}/resolve/{file}", first),
        (f"/cdn/{DRAFTER}/{file}", first),
    ]
    assert standin.served < 50_000  # the 2 GB file's first 16 KiB and two small files
    assert not list(m.path.glob("*.safetensors"))  # headers are no whole file: not cached
    assert "model.safetensors header (" in m.source()


def test_a_drafter_on_another_branch_is_read_at_its_commit(standin, tmp_path):
    m = hub.resolve(DRAFTER, "v2", drafter=True, hub=online(standin, tmp_path))
    assert set(m.tensors.tensors) == {"fc.weight"} and m.commit == standin.repos[DRAFTER].refs["v2"]


def test_sharded_drafter_reads_the_index_and_each_header(standin, tmp_path):
    standin.reset()
    m = hub.resolve("acme/sharded", drafter=True, hub=online(standin, tmp_path))
    assert len(m.tensors.files) == 3 and "fc.weight" in m.tensors.tensors
    assert (m.path / weights.INDEX).is_file()  # a whole file: into the cache
    assert sum(1 for _, p, r in standin.log if r and p.startswith("/cdn/")) == 3


def test_a_long_header_takes_a_second_range(standin, tmp_path, monkeypatch):
    monkeypatch.setattr(hub, "FIRST_READ", 64)
    standin.reset()
    m = hub.resolve(DRAFTER, drafter=True, hub=online(standin, tmp_path))
    ranges = [r for _, p, r in standin.log if r and p.startswith("/cdn/")]
    assert ranges[0] == "bytes=0-63" and ranges[1].startswith("bytes=64-")
    assert "fc.weight" in m.tensors.tensors


def test_a_safetensors_file_the_cache_holds_whole_is_read_there(standin, pair, tmp_path):
    first = hub.resolve(DRAFTER, drafter=True, hub=online(standin, tmp_path))
    blob = first.path / "model.safetensors"
    F.write_header_only(
        blob, F.llama_tensors(F.KIMI_VOCAB), sparse=True
    )  # as `hf download` leaves it
    standin.reset()
    m = hub.resolve(DRAFTER, drafter=True, hub=online(standin, tmp_path))
    assert not [r for _, _, r in standin.log if r]
    assert m.tensors == weights.read(pair[1]) and "(from the cache)" in m.source()


def test_a_header_read_is_kept_and_not_asked_again(standin, tmp_path):
    """For --offline after an online run (it advised downloading the whole
    weights): the header's bytes are kept beside the snapshots, never in them."""
    m = hub.resolve(DRAFTER, drafter=True, hub=online(standin, tmp_path))
    kept = cached.kept_path(tmp_path, DRAFTER, m.commit, "model.safetensors")
    assert kept.is_file() and kept.stat().st_size < hub.FIRST_READ
    assert not list(m.path.glob("*.safetensors"))
    standin.reset()
    again = hub.resolve(DRAFTER, drafter=True, hub=online(standin, tmp_path))
    assert not [r for _, _, r in standin.log if r] and again.tensors == m.tensors
    assert "model.safetensors header (kept from a read before)" in again.source()
    off = hub.resolve(DRAFTER, drafter=True, hub=offline(tmp_path))
    assert off.tensors == m.tensors


def test_a_failed_read_takes_its_kept_headers_back(standin, tmp_path, monkeypatch):
    real, seen = hub._remote_header, []

    def second_fails(repo, name, commit, endpoint, timeout):
        seen.append(name)
        if len(seen) == 2:
            raise ConfigError("the second shard failed")
        return real(repo, name, commit, endpoint, timeout)

    monkeypatch.setattr(hub, "_remote_header", second_fails)
    monkeypatch.setattr(deadline, "each", lambda fn, items: [fn(i) for i in items])  # in order
    with pytest.raises(ConfigError, match="the second shard failed"):
        hub.resolve("acme/sharded", drafter=True, hub=online(standin, tmp_path))
    assert not list(tmp_path.rglob(".vpatch-headers"))
    whole_files_only(tmp_path)


def test_a_server_that_ignores_range_is_read_no_further(standin, tmp_path, monkeypatch):
    from support import hub as standin_module

    monkeypatch.setattr(standin_module._Handler, "ranges", False)
    seen = []
    real = hub._range

    def spy(url, start, end, timeout):
        got = real(url, start, end, timeout)
        seen.append(len(got[0]))
        return got

    monkeypatch.setattr(hub, "_range", spy)
    standin.reset()
    m = hub.resolve(DRAFTER, drafter=True, hub=online(standin, tmp_path))
    assert seen == [hub.FIRST_READ] and "fc.weight" in m.tensors.tensors
    # the range refused (a 200, closed unread), then the start of a plain GET
    cdn = [r for _, p, r in standin.log if p.startswith("/cdn/")]
    assert cdn == [f"bytes=0-{hub.FIRST_READ - 1}", ""]
    assert standin.served < 64 << 20  # of a 2 GB file: neither answer was read whole


# -- offline: the cache only ----------------------------------------------------------


def cached_repo(cache, repo, files, rev="0123abcd" * 5, ref="main"):
    base = cache / f"models--{repo.replace('/', '--')}"
    snap = base / "snapshots" / rev
    snap.mkdir(parents=True)
    for name, text in files.items():
        (snap / name).write_text(text)
    (base / "refs").mkdir(exist_ok=True)
    (base / "refs" / ref).write_text(rev)
    return snap


def offline(cache: Path) -> hub.Hub:
    return hub.Hub(cache_dir=cache, offline=True)


def test_offline_target_from_the_cache(tmp_path):
    files = {"config.json": "{}", "tokenizer_config.json": "{}"}
    snap = cached_repo(tmp_path, KIMI, files)
    m = hub.resolve(KIMI, hub=offline(tmp_path))
    assert m.hub and m.path == snap and m.commit == snap.name and m.endpoint is None
    assert "from the local Hugging Face cache (offline)" in m.source()


def test_offline_revision(tmp_path):
    files = {"config.json": "{}", "tokenizer_config.json": "{}"}
    snap = cached_repo(tmp_path, KIMI, files, rev="feedbeef" * 5, ref="v2")
    assert hub.resolve(KIMI, "v2", hub=offline(tmp_path)).path == snap
    with pytest.raises(ConfigError, match=r"at revision main.*--revision main"):
        hub.resolve(KIMI, "main", hub=offline(tmp_path))


def test_offline_names_the_files_to_download_never_the_repo(tmp_path):
    with pytest.raises(ConfigError) as e:
        hub.resolve(KIMI, hub=offline(tmp_path))
    assert f"`hf download {KIMI} config.json tokenizer_config.json`" in str(e.value)
    cached_repo(tmp_path, KIMI, {"config.json": "{}"})
    with pytest.raises(ConfigError, match=f"`hf download {KIMI} tokenizer_config.json`"):
        hub.resolve(KIMI, hub=offline(tmp_path))


def test_offline_a_repo_known_to_have_no_tokenizer_config(tmp_path):
    snap = cached_repo(tmp_path, KIMI, {"config.json": "{}"})
    marker = snap.parents[1] / ".no_exist" / snap.name / "tokenizer_config.json"
    marker.parent.mkdir(parents=True)
    marker.touch()  # what huggingface_hub leaves after a 404
    assert hub.resolve(KIMI, hub=offline(tmp_path)).read == ("config.json",)


def test_offline_drafter_reads_the_cached_checkpoint(tmp_path, pair):
    snap = cached_repo(tmp_path, DRAFTER, {"config.json": (pair[1] / "config.json").read_text()})
    F.write_header_only(snap / "model.safetensors", F.llama_tensors(F.KIMI_VOCAB))
    m = hub.resolve(DRAFTER, drafter=True, hub=offline(tmp_path))
    assert m.tensors == weights.read(pair[1])


def test_offline_drafter_without_its_weights(tmp_path):
    snap = cached_repo(tmp_path, DRAFTER, {"config.json": "{}"})
    with pytest.raises(ConfigError, match=r'--include "\*.safetensors"'):
        hub.resolve(DRAFTER, drafter=True, hub=offline(tmp_path))
    index = {"weight_map": {"fc.weight": "model-00001-of-00002.safetensors"}}
    (snap / weights.INDEX).write_text(json.dumps(index))
    with pytest.raises(ConfigError, match=f"hf download {DRAFTER} model-00001-of-00002"):
        hub.resolve(DRAFTER, drafter=True, hub=offline(tmp_path))
    (snap / weights.INDEX).unlink()
    (snap / "pytorch_model.bin").write_bytes(b"\x80")
    with pytest.raises(ConfigError, match="pickled only"):
        hub.resolve(DRAFTER, drafter=True, hub=offline(tmp_path))


# -- bad input: one line each, the cache left with whole files only ---------------------


@pytest.mark.parametrize(
    "repo,drafter,token,phrase",
    [
        (
            "acme/gated",
            False,
            None,
            r"gated .* no token was sent: accept its terms .*hf auth login",
        ),
        ("acme/gated", False, "hf_other", "gated .* your token is not granted it"),
        ("acme/private", False, None, "no such repo .* or it is private and no token was sent"),
        ("acme/nowhere", False, None, "no such repo on http"),
        ("acme/nowhere", False, TOKEN, "or your token cannot read it"),
        ("acme/no-config", False, None, "no config.json in the repo"),
        ("acme/pickled", True, None, r"pickled only \(pytorch_model.bin\)"),
        ("acme/truncated", True, None, r"not a safetensors file \(header length 5000, file 22"),
        ("acme/huge", True, None, "header length 100000001"),
        ("acme/not-json", True, None, "safetensors header: not valid JSON"),
    ],
)
def test_bad_answers(standin, tmp_path, monkeypatch, repo, drafter, token, phrase):
    if token:
        monkeypatch.setenv("HF_TOKEN", token)
    standin.reset()
    with pytest.raises(ConfigError, match=phrase) as e:
        hub.resolve(repo, drafter=drafter, hub=online(standin, tmp_path))
    assert "\n" not in str(e.value)
    whole_files_only(tmp_path)
    assert standin.served < 100_000  # a header that claims 100 MB is not fetched


@pytest.mark.parametrize("sha", ["../..", "/etc", "main", "A" * 40])
def test_a_listing_whose_commit_is_no_commit_id(standin, tmp_path, sha):
    """huggingface_hub makes snapshots/<commit>/: the listing's commit must
    be a commit id."""
    from support.hub import body

    standin.answer[r"^/api/models/"] = body(json.dumps({"sha": sha, "siblings": []}).encode())
    try:
        with pytest.raises(ConfigError, match=r"not a Hugging Face hub \(the commit of .* not a"):
            hub.resolve(KIMI, hub=online(standin, tmp_path))
    finally:
        standin.answer.clear()


def test_a_path_for_a_commit_is_refused_without_the_hooks(standin, tmp_path, monkeypatch):
    """The hook refuses an X-Repo-Commit that is no commit id
    (test_hostile_hub.py); where huggingface_hub has no client factory for
    it, hf_hub_download's own ValueError is said, not an internal error."""
    import re

    from support.hub import body

    monkeypatch.setattr(hubclient, "COMMIT", re.compile(".*"))  # the hook lets all through
    head = body(b"", {"X-Repo-Commit": "../..", "ETag": '"e"', "X-Linked-Size": "2"})
    standin.answer[r"/resolve/main/config.json$"] = head
    try:
        with pytest.raises(ConfigError, match=r"not a Hugging Face hub \(Invalid pointer path"):
            hub.resolve(KIMI, hub=online(standin, tmp_path))
    finally:
        standin.answer.clear()
    whole_files_only(tmp_path)


def test_a_listing_over_the_limit(standin, tmp_path, monkeypatch):
    from vpatch import jsontext

    monkeypatch.setattr(jsontext, "LIMIT", 100)
    with pytest.raises(ConfigError, match="the listing of moonshotai/Kimi-K2.5 is over"):
        hub.resolve(KIMI, hub=online(standin, tmp_path))


def test_the_token_opens_a_gated_repo(standin, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    assert hub.resolve("acme/gated", hub=online(standin, tmp_path)).commit


def test_a_missing_revision(standin, tmp_path):
    with pytest.raises(ConfigError, match="no revision 'v9' .branch, tag or commit"):
        hub.resolve(KIMI, "v9", hub=online(standin, tmp_path))
    assert not tmp_path.joinpath("models--moonshotai--Kimi-K2.5").exists()


def test_an_unreachable_endpoint(tmp_path):
    where = hub.Hub(cache_dir=tmp_path / "hf", endpoint="http://127.0.0.1:1", offline=False)
    with pytest.raises(ConfigError, match=r"cannot reach http://127.0.0.1:1 \(ConnectError"):
        hub.resolve(KIMI, hub=where)
    assert not (tmp_path / "hf").exists()


@pytest.mark.parametrize("stalled", [r"^/api/models/", r"^/cdn/"])
def test_a_hub_that_does_not_answer(standin, tmp_path, stalled):
    standin.stall[stalled] = 1.5
    try:
        said = r"did not answer a request within 0.3s \(HF_HUB_DOWNLOAD_TIMEOUT\), \d+\.\ds after"
        with pytest.raises(ConfigError, match=said):
            hub.resolve(DRAFTER, drafter=True, hub=online(standin, tmp_path, timeout=0.3))
    finally:
        standin.stall.clear()
    whole_files_only(tmp_path)


def test_a_failure_after_a_whole_file_keeps_that_file(standin, tmp_path):
    """The drafter's config came whole before its header failed: it stays, with
    its ref; nothing else does."""
    with pytest.raises(ConfigError):
        hub.resolve("acme/truncated", drafter=True, hub=online(standin, tmp_path))
    commit = standin.repos["acme/truncated"].refs["main"]
    base = tmp_path / "models--acme--truncated"
    assert (base / "snapshots" / commit / "config.json").is_file()
    assert (base / "refs" / "main").read_text() == commit
    whole_files_only(tmp_path)
