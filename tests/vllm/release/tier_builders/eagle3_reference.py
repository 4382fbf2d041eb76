"""An independent reference of vLLM's Llama EAGLE-3 drafter (one midlayer),
in plain torch float64 from the checkpoint files: what the drafts must be for
given target states, whatever vLLM's wiring does.

The drafter at position t takes the target's aux states at t (the inputs of
the requested decoder layers, concatenated; ``fc`` maps them to the hidden
size) and the embedding of token t+1 (the target's embedding: the fixture
drafter has none of its own), and predicts token t+2. Each further draft step
feeds the drafter's own pre-norm output and the embedding of the token it
drafted, one position on, attending over everything before (one causal
layer: recomputing the whole sequence gives the rows before unchanged).
A draft id i is the target id i + d2t[i].

``MlaEagle3Reference``: the same for vLLM's DeepSeek MLA EAGLE-3 drafter
(``Eagle3DeepseekV2ForCausalLM``, model_executor/models/deepseek_eagle3.py):
its one layer's attention is DeepSeek's MLA over [embeds ; hidden].
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

F64 = torch.float64


def _rms(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def _rope_neox(x: torch.Tensor, pos: torch.Tensor, theta: float) -> torch.Tensor:
    """Llama's rotation (neox style: the halves of each head), x [..., T, H, D]."""
    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=F64) / d))
    freqs = pos.to(F64)[:, None] * inv[None, :]
    cos = freqs.cos()[:, None, :].to(x.dtype)
    sin = freqs.sin()[:, None, :].to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Eagle3Reference:
    """The drafter's function; ``dtype`` float64 for the reference (the
    benchmark trains a drafter with it in float32, from ``weights``)."""

    def __init__(self, drafter: Path, target: Path, dtype=F64, weights: dict | None = None):
        from safetensors.torch import load_file

        self.dtype = dtype
        self.cfg = json.loads((Path(drafter) / "config.json").read_text())
        w = weights if weights is not None else load_file(str(Path(drafter) / "model.safetensors"))
        self.w = {k: v.to(dtype) if v.is_floating_point() else v for k, v in w.items()}
        tw = load_file(str(Path(target) / "model.safetensors"))
        # the drafter shares the target's embedding: a wrapper's (Kimi-K2.5)
        # is its language model's; DeepSeek-V4's checkpoint calls it embed
        key = next(k for k in tw if k.endswith("model.embed_tokens.weight") or k == "embed.weight")
        self.embed = tw[key].to(dtype)
        c = self.cfg
        self.eps = c["rms_norm_eps"]
        self.heads, self.kv_heads = c["num_attention_heads"], c["num_key_value_heads"]
        self.head_dim = c.get("head_dim") or c["hidden_size"] // self.heads
        self.theta = c.get("rope_theta", 10000.0)
        assert not c.get("norm_before_residual") and not c.get("fc_norm"), "not modelled"

    def fc(self, states: torch.Tensor) -> torch.Tensor:
        return states.to(self.dtype) @ self.w["fc.weight"].T

    def layer(self, embeds, hidden, positions, mask=None):
        """(normed, prenorm) of the midlayer over sequences of T rows
        (``[..., T, hidden]``: one, or a batch); ``mask`` [T, T] says which
        rows a row attends (default: causal; the benchmark's training passes
        the masks of its draft steps)."""
        w, m = self.w, "midlayer."
        residual = hidden
        x = torch.cat(
            [
                _rms(embeds, w[m + "input_layernorm.weight"], self.eps),
                _rms(hidden, w[m + "hidden_norm.weight"], self.eps),
            ],
            dim=-1,
        )
        t, hd = x.shape[-2], self.head_dim
        q = (x @ w[m + "self_attn.q_proj.weight"].T).unflatten(-1, (self.heads, hd))
        k = (x @ w[m + "self_attn.k_proj.weight"].T).unflatten(-1, (self.kv_heads, hd))
        v = (x @ w[m + "self_attn.v_proj.weight"].T).unflatten(-1, (self.kv_heads, hd))
        q, k = _rope_neox(q, positions, self.theta), _rope_neox(k, positions, self.theta)
        rep = self.heads // self.kv_heads
        k, v = k.repeat_interleave(rep, dim=-2), v.repeat_interleave(rep, dim=-2)
        scores = torch.einsum("...qhd,...khd->...hqk", q, k) / math.sqrt(hd)
        if mask is None:
            mask = torch.ones(t, t, dtype=torch.bool).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
        o = torch.einsum("...hqk,...khd->...qhd", scores.softmax(-1), v).flatten(-2)
        h = o @ w[m + "self_attn.o_proj.weight"].T + residual
        residual = h
        h = _rms(h, w[m + "post_attention_layernorm.weight"], self.eps)
        gate = h @ w[m + "mlp.gate_proj.weight"].T
        up = h @ w[m + "mlp.up_proj.weight"].T
        prenorm = (torch.nn.functional.silu(gate) * up) @ w[m + "mlp.down_proj.weight"].T
        prenorm = prenorm + residual
        return _rms(prenorm, w["norm.weight"], self.eps), prenorm

    def to_target(self, draft_id: int) -> int:
        d2t = self.w.get("d2t")
        return draft_id + int(d2t[draft_id]) if d2t is not None else draft_id

    def drafts(self, aux: torch.Tensor, next_ids: list[int], k: int) -> list[int]:
        """The k greedy drafts after a prefill of T tokens: ``aux`` [T, n*hidden]
        are the target's aux states at positions 0..T-1, ``next_ids`` the
        tokens 1..T (the prompt shifted by one, then the token the target
        sampled)."""
        hidden = self.fc(aux)
        ids = list(next_ids)
        out: list[int] = []
        for _ in range(k):
            embeds = self.embed[torch.tensor(ids)]
            normed, prenorm = self.layer(embeds, hidden, torch.arange(len(ids)))
            logits = normed[-1] @ self.w["lm_head.weight"].T
            token = self.to_target(int(logits.argmax()))
            out.append(token)
            ids.append(token)
            hidden = torch.cat([hidden, prenorm[-1:]], dim=0)
        return out


class MlaEagle3Reference(Eagle3Reference):
    """vLLM's MLA EAGLE-3 drafter (deepseek_eagle3.py's decoder layer over
    deepseek_v2.py's DeepseekV2MLAAttention): q from the q latent (q_a_proj,
    q_a_layernorm, q_b_proj), k_nope and v from the kv latent
    (kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj), softmax at
    qk_head_dim**-0.5, times YaRN's mscale squared where the drafter has
    YaRN rope_scaling (deepseek_v2.py: rope_type "deepseek_yarn"). The rope
    part of q and k must be zero (its rotation is not modelled)."""

    def __init__(self, drafter: Path, target: Path, dtype=F64):
        super().__init__(drafter, target, dtype)
        c, w, a = self.cfg, self.w, "midlayer.self_attn."
        self.nope, self.rope = c["qk_nope_head_dim"], c["qk_rope_head_dim"]
        self.vd, self.rank = c["v_head_dim"], c["kv_lora_rank"]
        assert c.get("q_lora_rank"), "q_proj without a q latent: not modelled"
        q_rope = w[a + "q_b_proj.weight"].unflatten(0, (self.heads, -1))[:, self.nope :]
        assert not q_rope.any() and not w[a + "kv_a_proj_with_mqa.weight"][self.rank :].any(), (
            "a rope part of q or k: not modelled"
        )
        self.scale = (self.nope + self.rope) ** -0.5
        yarn = c.get("rope_scaling") or {}
        if yarn.get("type", yarn.get("rope_type")) == "yarn" and yarn["factor"] > 1:
            mscale = 0.1 * float(yarn.get("mscale_all_dim", 0)) * math.log(yarn["factor"]) + 1
            self.scale *= mscale * mscale

    def layer(self, embeds, hidden, positions, mask=None):
        w, m, a = self.w, "midlayer.", "midlayer.self_attn."
        residual = hidden
        x = torch.cat(
            [
                _rms(embeds, w[m + "input_layernorm.weight"], self.eps),
                _rms(hidden, w[m + "hidden_norm.weight"], self.eps),
            ],
            dim=-1,
        )
        t = x.shape[-2]
        q_latent = _rms(x @ w[a + "q_a_proj.weight"].T, w[a + "q_a_layernorm.weight"], self.eps)
        q = (q_latent @ w[a + "q_b_proj.weight"].T).unflatten(-1, (self.heads, -1))
        latent = (x @ w[a + "kv_a_proj_with_mqa.weight"].T)[..., : self.rank]
        latent = _rms(latent, w[a + "kv_a_layernorm.weight"], self.eps)
        kv = (latent @ w[a + "kv_b_proj.weight"].T).unflatten(-1, (self.heads, -1))
        k, v = kv[..., : self.nope], kv[..., self.nope :]
        scores = torch.einsum("...qhd,...khd->...hqk", q[..., : self.nope], k) * self.scale
        if mask is None:
            mask = torch.ones(t, t, dtype=torch.bool).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
        o = torch.einsum("...hqk,...khd->...qhd", scores.softmax(-1), v).flatten(-2)
        h = o @ w[a + "o_proj.weight"].T + residual
        residual = h
        h = _rms(h, w[m + "post_attention_layernorm.weight"], self.eps)
        gate = h @ w[m + "mlp.gate_proj.weight"].T
        up = h @ w[m + "mlp.up_proj.weight"].T
        prenorm = (torch.nn.functional.silu(gate) * up) @ w[m + "mlp.down_proj.weight"].T
        prenorm = prenorm + residual
        return _rms(prenorm, w["norm.weight"], self.eps), prenorm
