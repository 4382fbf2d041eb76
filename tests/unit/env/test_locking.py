"""env.locking: one vpatch run per environment."""

from __future__ import annotations

import threading
import time

import pytest
from vpatch.env import locking
from vpatch.errors import TreeError


def test_second_holder_fails_at_once_or_waits(tmp_path):
    folder = tmp_path / "x.dist-info"
    folder.mkdir()
    with locking.hold(folder):
        t0 = time.monotonic()
        with pytest.raises(TreeError, match="another vpatch run"), locking.hold(folder):
            pass
        assert time.monotonic() - t0 < 1
    done = threading.Event()

    def holder():
        with locking.hold(folder):
            done.set()
            time.sleep(0.3)

    t = threading.Thread(target=holder)
    t.start()
    done.wait(5)
    t0 = time.monotonic()
    with locking.hold(folder, wait=10):
        assert time.monotonic() - t0 >= 0.1
    t.join()
    with pytest.raises(TreeError, match="cannot open"), locking.hold(tmp_path / "missing"):
        pass
