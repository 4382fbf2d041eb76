"""The tier's checks, one definition each (vllm_tier.registry: what a check
is), in a module per theme. This package is the one place that imports the
themes, and so fills ``CHECKS``: the order of its imports, then of the
definitions in each module, is the order of CHECKS, which is the plan's,
the builds' and runs' and the report's (tests/unit/test_tier.py holds it).

    suite         the inner suite on the release's series (the main runs, and a
                  file of it run apart: DeepSeek-V3.2 at tensor parallel 2)
    served        vLLM's engine serving EAGLE-3 (``Served``: one run per mode
                  and install) and the served releases of the default set
    engines       an inner file of its own that starts its engines and says
                  what each install must do: every test passes (the series
                  cut short, doctor against the engine's layers, MLA
                  drafters served)
    other_series  series other than the selected releases' own: a fix none of
                  them carries, and two series broken on purpose that the
                  tests must catch
    vllm_tests    vLLM's own tests: the series' and the model registry's
    server        vLLM's OpenAI server (``vllm serve``) and doctor reading it

A module may import the modules above it, never those below (its checks
would be registered before theirs). Add a check to the module of its theme,
after the check it should follow; CONTRIBUTING.md ("Add a tier check").
"""

from __future__ import annotations

from ..registry import CHECKS

# isort: off
# the themes, in the order of CHECKS (importing one registers its checks)
from . import suite
from . import served
from . import engines
from . import other_series
from . import vllm_tests
from . import server

# isort: on

__all__ = ["CHECKS", "engines", "other_series", "served", "server", "suite", "vllm_tests"]
