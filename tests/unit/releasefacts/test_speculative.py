"""releasefacts/speculative.py: the probes of the serve command's speculative
config and of who reads a draft's use_mla, on snippets in the shapes the
releases write them in (every pinned release:
tests/integration/doctor/test_releases_real.py)."""

from __future__ import annotations

from vpatch.releasefacts import facts

F = facts.FILES


SPECULATIVE = """
RejectionSampleMethod = Literal["standard", "synthetic", "block"]
_DRAFT_VLLM_CONFIG_OVERRIDES = (
    ("moe_backend", "kernel_config", "moe_backend"),
    # Only when set, so the draft keeps a KV cache layout the target shares.
    ("attention_backend", "attention_config", "backend"),
    ("kv_cache_dtype", "cache_config", "cache_dtype"),
)
@config
class SpeculativeConfig:
    _registry: ClassVar[dict] = {}
    enforce_eager: bool | None = None
    model: str | None = None
    custom_method: str | None = field(default=None, init=False)
    rejection_sample_method: RejectionSampleMethod = "standard"
    draft_sample_method: Literal["greedy", "probabilistic"] = "greedy"
"""
CONFIG_UTILS = """
def config(cls): ...
def config(cls=None, *, config=None):
    merged_config = ConfigDict(extra="forbid")
"""
ARG_UTILS = """
class EngineArgs:
    def add_cli_args(parser):
        vllm_group.add_argument("--spec-method", **speculative_kwargs["method"])
    def create_speculative_config(self):
        self.speculative_config = {
            k.replace("-", "_"): v for k, v in self.speculative_config.items()
        }
"""
LOADER = """
def load_eagle_model(target_model, vllm_config):
    vllm_config = speculative_config.apply_draft_overrides(vllm_config)
"""
PROPOSER = """
class SpecDecodeBaseProposer:
    def _create_draft_vllm_config(self):
        spec_cfg = self.speculative_config
        base = replace(base, attention_config=replace(backend=spec_cfg.attention_backend))
        if spec_cfg.kv_cache_dtype is not None:
            pass
"""
BACKENDS = '''
class AttentionBackendEnum(Enum, metaclass=_AttentionBackendEnumMeta):
    """The backends."""
    FLASH_ATTN = "vllm.v1.attention.backends.flash_attn.FlashAttentionBackend"
    B12X = "vllm.v1.attention.backends.b12x.B12XBackend"
    def get_path(self): ...
'''
NIXL = "vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py"
FACTORY = """
KVConnectorFactory.register_connector(
    "NixlConnector",
    "vllm.distributed.kv_transfer.kv_connector.v1.nixl",
    "NixlConnector",
)
KVConnectorFactory.register_connector(
    "MooncakeConnector",
    "vllm.distributed.kv_transfer.kv_connector.v1.mooncake.mooncake_connector",
    "MooncakeConnector",
)
"""
READS = """
    def _resolve_head_sharded_draft_kv_heads(self):
        draft_config = spec_config.draft_model_config if spec_config else None
        if draft_config is None or draft_config.use_mla:
            return None
"""


def test_the_speculative_config_read_from_code():
    files = {
        F["speculative"]: SPECULATIVE,
        F["config_utils"]: CONFIG_UTILS,
        F["arg_utils"]: ARG_UTILS,
        F["v2_loader"]: LOADER,
        "vllm/v1/spec_decode/llm_base_proposer.py": PROPOSER,
        F["backends"]: BACKENDS,
        F["worker"]: f"class Worker:\n    {facts.V1_MODULE} x\n",
    }
    got = facts.read(files).values
    # init fields only: no ClassVar, no field(init=False)
    assert got["spec_fields"] == {
        "enforce_eager",
        "model",
        "rejection_sample_method",
        "draft_sample_method",
    }
    assert got["spec_extra"] == "forbid" and got["spec_flags"] and got["spec_dashed"]
    assert got["spec_applied"] == {
        "v1:attention_backend",
        "v1:kv_cache_dtype",
        "v2:attention_backend",
        "v2:kv_cache_dtype",
    }
    assert got["attention_backends"] == {"FLASH_ATTN", "B12X"}
    assert got["rejection_sample_methods"] == {"standard", "synthetic", "block"}
    assert got["draft_sample_methods"] == {"greedy", "probabilistic"}
    # the oldest releases' shapes: config() returns the class; no --spec-* flags, no dashes
    old = {
        **files,
        F["config_utils"]: "def config(cls):\n    return cls\n",
        F["arg_utils"]: "class EngineArgs:\n    def add_cli_args(parser):\n        pass\n",
    }
    got = facts.read(old).values
    assert (got["spec_extra"], got["spec_flags"], got["spec_dashed"]) == ("ignore", False, False)


def test_the_readers_of_a_drafts_use_mla_and_the_connectors_that_hold_them():
    files = {
        NIXL: READS,
        F["kv_factory"]: FACTORY,
        F["worker"]: "class Worker:\n    pass\n",
        "vllm/v1/worker/gpu/pcp_manager.py": "x = model_config.use_mla  # the target's\n",
        "vllm/v1/worker/gpu/spec_decode/dflash/config.py": "# draft.use_mla in a comment\n",
    }
    got = facts.read(files).values
    assert got["draft_mla_readers"] == {NIXL.removeprefix("vllm/")}
    assert got["draft_mla_connectors"] == {"NixlConnector"}
    assert facts.read({**files, NIXL: "pass\n"}).values["draft_mla_connectors"] == frozenset()
