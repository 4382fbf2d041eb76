"""RangeFile: a remote file read through HTTP range requests, against a
local server that counts the requests it answers."""

import io
import random
import zipfile

import pytest
from support import RangeHandler
from vpatch.errors import NetworkError, RangeUnsupported
from vpatch.sources import lazy

DATA = random.Random(1).randbytes(5 * lazy.BLOCK + 123)


@pytest.fixture
def remote(range_server):
    root, base = range_server
    (root / "f.bin").write_bytes(DATA)
    return base + "f.bin"


def test_reads_and_seeks_like_a_file(remote):
    f = lazy.RangeFile(remote, len(DATA))
    assert f.readable() and f.seekable() and f.tell() == 0
    assert f.read(10) == DATA[:10] and f.tell() == 10
    f.seek(-5, io.SEEK_END)
    assert f.read() == DATA[-5:]
    assert f.read(1) == b""  # at the end
    f.seek(lazy.BLOCK - 3)
    f.seek(1, io.SEEK_CUR)
    assert f.read(7) == DATA[lazy.BLOCK - 2 : lazy.BLOCK + 5]  # across a block boundary
    buf = bytearray(4)
    f.seek(100)
    assert f.readinto(buf) == 4 and bytes(buf) == DATA[100:104]


def test_blocks_are_fetched_once(remote):
    f = lazy.RangeFile(remote, len(DATA))
    f.read(10)
    f.seek(200)
    f.read(10)  # inside the first block: no new request
    assert RangeHandler.requests == 1 and f.fetched == lazy.BLOCK


def test_prefetch_merges_near_ranges_into_one_request(remote):
    f = lazy.RangeFile(remote, len(DATA))
    f.prefetch([(3 * lazy.BLOCK, 3 * lazy.BLOCK + 10), (0, 10), (lazy.BLOCK, lazy.BLOCK + 10)])
    assert RangeHandler.requests == 1 and f.fetched == 3 * lazy.BLOCK + 10
    f.seek(lazy.BLOCK)
    assert f.read(10) == DATA[lazy.BLOCK : lazy.BLOCK + 10]
    f.prefetch([(0, 5)])  # held already
    assert RangeHandler.requests == 1


def test_zipfile_reads_one_member_of_a_remote_zip(range_server):
    root, base = range_server
    big = random.Random(2).randbytes(2 << 20)
    with zipfile.ZipFile(root / "z.zip", "w") as zf:
        zf.writestr("big.bin", big)
        zf.writestr("small.txt", "hello\n")
    size = (root / "z.zip").stat().st_size
    remote = lazy.RangeFile(base + "z.zip", size)
    with zipfile.ZipFile(remote) as zf:
        assert zf.read("small.txt") == b"hello\n"
    assert 0 < remote.fetched < len(big) // 4  # the large member never crossed


def test_server_without_ranges_is_a_clear_error(remote):
    RangeHandler.ranges = False
    with pytest.raises(NetworkError, match="ignores range requests"):
        lazy.RangeFile(remote, len(DATA)).read(10)


def test_short_answers_and_unreachable_servers_are_network_errors(remote, range_server):
    # the index says a size the server does not have: ranges cannot be trusted
    with pytest.raises(RangeUnsupported, match="the server has .* bytes, the index said"):
        lazy.RangeFile(remote, len(DATA) + lazy.BLOCK).prefetch([(len(DATA) - 10, len(DATA) + 5)])
    with pytest.raises(NetworkError, match="missing.bin: the server refused HEAD \\(404\\)"):
        lazy.RangeFile(range_server[1] + "missing.bin", 100).read(10)
    with pytest.raises(NetworkError, match="HEAD request for x.bin failed: .*refused"):
        lazy.RangeFile("http://127.0.0.1:9/x.bin", 100).read(10)


def test_a_signed_urls_signature_is_not_in_its_name():
    """A PEP 691 file URL may be a CDN's signed one: messages name the file
    by its path, never with the query that signs it."""
    url = "https://cdn.invalid/f/vllm-1.0.whl?X-Amz-Signature=s3cr3t&X-Amz-Credential=c"
    f = lazy.RangeFile(url, 10)
    assert f.name == "vllm-1.0.whl"
    with pytest.raises(RangeUnsupported) as e:
        lazy.RangeFile(url, 0)
    assert "s3cr3t" not in str(e.value)


def test_the_client_handed_is_the_one_asked(remote):
    """As pip hands lazy_wheel its session: every request (the HEAD, the
    range) goes through the opener given, when one is."""
    import urllib.request

    from vpatch.network import session

    class Seen(urllib.request.BaseHandler):
        asked: list[str] = []

        def http_request(self, req):
            self.asked.append(req.get_method())
            return req

    f = lazy.RangeFile(remote, len(DATA), session.opener(Seen()))
    assert f.read(10) == DATA[:10]
    assert Seen.asked == ["HEAD", "GET"]
