"""doctor/defects.py: each defect doctor knows has its fix in the patch set,
whose spans are the releases rules.toml says have the defect, up to the
release its DEP-3 names as having it upstream."""

from __future__ import annotations

from vpatch import lock
from vpatch.doctor import behaviour, defects, served

PINS = lock.load()
KNOWN = behaviour.known_releases(PINS)


# Whether release r has defect `key` (DEFECTS), by RULES
HAS = {
    "layer0": lambda r: r.upstream_eagle3,
    "forced_backend_v1": lambda r: "v1" in r.forced_backend_crash,
    "forced_backend_v2": lambda r: "v2" in r.forced_backend_crash,
    "draft_positions": lambda r: r.draft_positions_short,
    "mla_rope_theta": lambda r: r.mla_rope_without_theta,
    "mla_fc_norm": lambda r: r.fc_norm and not r.mla_fc_norm,
    "kimi_k2_mla": lambda r: r.kimi_k2_drafter_not_mla,
    "final_norm_id": lambda r: r.upstream_eagle3 and not r.final_norm_id,
    # serving.toml's defects: a release serving a family file that has it
    "v32_aux_capture": lambda r: served.has_defect(PINS, "v32_aux_capture", r.release),
    "v4_id0": lambda r: served.has_defect(PINS, "v4_id0", r.release),
    "v41_id0": lambda r: served.has_defect(PINS, "v41_id0", r.release),
}


def test_every_defect_has_its_fix_and_the_fix_serves_exactly_its_releases():
    """patches.toml gives each defect doctor knows a patch (`doctor = KEY`),
    and that patch's spans are the releases RULES says have the defect: a
    span that misses a release with the defect, or a RULES entry that
    disagrees with the patch set, fails here."""
    pins = PINS
    assert set(defects.fixes(pins)) == set(defects.DEFECTS) == set(HAS)
    for key in defects.DEFECTS:
        serving = pins.patchset.serving(defects.fix(pins, key), KNOWN)
        assert serving == [v for v in KNOWN if HAS[key](PINS.rules.at(v))], key
    layer0 = set(pins.patchset.serving(defects.fix(pins, "layer0"), pins.versions()))
    assert defects.patched_layer0(pins) == layer0
    assert not defects.patched_layer0(pins) & defects.patched_eagle3(pins)


def test_a_patch_set_without_a_fix_carries_it_nowhere(tmp_path):
    """A patch set that gives no patch a defect's key: no fix, and no
    release carries the layer-0 fix."""
    (tmp_path / "patches").mkdir()
    (tmp_path / "patches/patches.toml").write_text("")
    (tmp_path / "VERSIONS.lock").write_text(
        '[releases."9.9.1"]\ntag = "v9.9.1"\ncommit = "b"\nstatus = "upstream"\n'
    )
    pins = lock.load(tmp_path / "VERSIONS.lock")
    assert defects.fixes(pins) == {} and defects.fix(pins, "layer0") is None
    assert defects.patched_layer0(pins) == set()


def test_each_fix_is_carried_until_upstream_has_it():
    """A fix's span ends right before the release its DEP-3 names as having
    it upstream (Applied-Upstream), where RULES no longer have the defect;
    one upstream has in no release yet is carried to the newest release.
    With the test above: RULES, the spans and DEP-3 tell one story."""
    ps, pinned = PINS.patchset, PINS.versions()
    for key in defects.DEFECTS:
        slug = defects.fix(PINS, key)
        last = pinned.index(ps.variants[slug][-1].last)
        fixed = ps.upstream(slug).release
        if fixed is None:
            # carried to the newest pinned release (a carry extends it there
            # before a person writes the release's rules)
            assert last == len(pinned) - 1, key
        else:
            assert pinned[last + 1] == fixed and not HAS[key](PINS.rules.at(fixed)), key
