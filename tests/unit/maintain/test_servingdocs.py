"""maintain/servingdocs.py: the families' docs follow serving.toml: a row a
run of releases alike, ROCm's file named where it differs, the releases that
serve each family with EAGLE-3."""

from __future__ import annotations

from support import releases as R
from vpatch import lock
from vpatch.maintain import docs, servingdocs

PINS = lock.load()


def test_each_family_s_rows_cover_the_releases_that_register_it_once():
    rows = servingdocs.families_rows(PINS)
    for fam in PINS.serving.families.values():
        arch = fam.architectures[0]
        registered = [v for v in R.covered() if PINS.serving.served(arch, v, "cuda").registered]
        spans = [r[1] for r in rows if r[0] == fam.name]
        said = [v for v in R.covered() if any(_in(v, s) for s in spans)]
        assert said == registered, fam.name


def _in(v: str, span: str) -> bool:
    first, _, last = span.partition("-")
    pinned = R.covered()
    return pinned.index(first) <= pinned.index(v) <= pinned.index(last or first)


def test_rocm_s_file_is_named_where_it_differs():
    """V3.2's ROCm module where its id 0 is a TypeError (bites: a ROCm column
    that compares the facts and not the file says "same")."""
    rows = [r for r in servingdocs.families_rows(PINS) if r[0] == "DeepSeek-V3.2"]
    assert any("amd/model.py: id 0 TypeError" in r[-1] for r in rows)
    assert all(r[-1] == "same" or "/" in r[-1] or r[-1].endswith("rules)") for r in rows)


def test_the_readme_list_names_the_releases_that_serve_with_eagle3():
    listed = docs.families_list(PINS)
    for name, archs, serves in servingdocs.families_serving(PINS):
        assert f"- {name} ({', '.join(f'`{a}`' for a in archs)}): EAGLE-3 on" in listed
        for v in serves:
            s = PINS.serving.served(archs[0], v, "cuda")
            assert s.registered and (s.code is None or s.code.eagle3)
