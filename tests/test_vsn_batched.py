"""The batched VSN path (TFTConfig.vsn_batched: every variable's GRN in one batched product per layer, the
static covariate encoder's four GRNs as one) on the small preset: the same function as the per-variable path
in float64 (outputs and every gradient), the same parameters, and fewer ops per training step
(foxlib.harness.op_count: counts, not timings)."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from foxlib.data.market import N_KNOWN
from foxlib.harness.op_count import count_step, main as op_count_main, seed_recipe, time_variants
from foxlib.models import tft_blocks
from foxlib.models.tft import PRESETS, build, example_batch, quantile_loss

SMALL = PRESETS["small"]
M_ENC = N_KNOWN + SMALL.n_observed  # 13
FUSED = {"memory_efficient": True, "vsn_batched": True}
BATCHED = {**FUSED, "vsn_chunk": 0}  # all variables at once


def make(cfg, seed=0):
    torch.manual_seed(seed)
    return build(cfg).to(torch.float64).train()


def static_batched(model):
    """The reference's static covariate encoder drawing its dropout as the batched one does (one (4, B, d)
    draw, not four of (B, d): the same masks only on a CPU whose bernoulli_ draws serially), so that a
    dropout-on comparison tests the VSNs."""
    model.static_encoders.forward = model.static_encoders.forward_batched
    return model


def run(model, batch, seed=1):
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)  # the same dropout draws for both models
    pred, attn = model(batch, return_attention=True)
    quantile_loss(pred, batch["target"], model.config.quantiles).backward()
    return pred.detach(), attn.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


def max_diffs(a, b):
    """max |Δ| of the outputs, the attention weights and over every parameter's gradient."""
    (pa, aa, ga), (pb, ab, gb) = a, b
    assert ga.keys() == gb.keys()
    return (float((pa - pb).abs().max()), float((aa - ab).abs().max()),
            max(float((ga[n] - gb[n]).abs().max()) for n in ga))


@pytest.fixture(scope="module")
def batch():
    return {k: v.to(torch.float64) if v.is_floating_point() else v for k, v in example_batch(SMALL, seed=0).items()}


@pytest.mark.parametrize("checkpointing", ["none", "vsn", "blocks", "all"])
def test_batched_equals_per_variable_path_dropout_off(batch, checkpointing):
    """Against the plain reference (embeddings materialised, a loop over the variables, explicit attention):
    dropout off (the plain loop draws m masks of (N, d), the batched path one of (m, N, d))."""
    ref = make(dataclasses.replace(SMALL, dropout=0.0))
    new = make(dataclasses.replace(SMALL, dropout=0.0, checkpointing=checkpointing, **BATCHED), seed=7)
    assert {k: v.shape for k, v in ref.state_dict().items()} == {k: v.shape for k, v in new.state_dict().items()}
    new.load_state_dict(ref.state_dict())
    out, attn, grad = max_diffs(run(new, batch), run(ref, batch))
    assert out < 1e-12 and attn < 1e-12 and grad < 1e-12, (out, attn, grad)


def test_batched_equals_one_chunk_dropout_on(batch):
    """Dropout on: the same draws as the per-chunk batched path with all m variables in one chunk
    (one (m, N, d) mask per VSN, the selection GRN's first), so outputs and gradients match."""
    ref = static_batched(make(dataclasses.replace(SMALL, dropout=0.2, memory_efficient=True, vsn_chunk=M_ENC)))
    new = make(dataclasses.replace(SMALL, dropout=0.2, **BATCHED), seed=7)
    new.load_state_dict(ref.state_dict())
    out, attn, grad = max_diffs(run(new, batch), run(ref, batch))
    assert out < 1e-12 and attn < 1e-12 and grad < 1e-12, (out, attn, grad)
    off = make(dataclasses.replace(SMALL, dropout=0.0, **BATCHED))  # dropout really on: not dropout 0's function
    off.load_state_dict(ref.state_dict())
    assert max_diffs(run(off, batch), run(new, batch))[0] > 1e-6


@pytest.mark.parametrize("mode", ["none", "variables", "vsn_variables"])
@pytest.mark.parametrize("chunk", [1, 3, M_ENC])
def test_batched_chunk_segments_equal_per_chunk_path(batch, mode, chunk):
    """In chunks of vsn_chunk (1, 3, all 13) the batched kernels run per chunk (per chunk segment under a
    CHUNKED checkpointing): dropout on, the same
    function and draws as the un-checkpointed per-chunk batched path of the same chunks; dropout off, as
    the plain per-variable path."""
    for dropout, ref_overrides in ((0.2, {"memory_efficient": True}), (0.0, {})):
        ref = static_batched(make(dataclasses.replace(SMALL, dropout=dropout, vsn_chunk=chunk, **ref_overrides)))
        new = make(dataclasses.replace(SMALL, dropout=dropout, vsn_chunk=chunk, checkpointing=mode, **FUSED), seed=7)
        new.load_state_dict(ref.state_dict())
        out, attn, grad = max_diffs(run(new, batch), run(ref, batch))
        assert out < 1e-12 and attn < 1e-12 and grad < 1e-12, (dropout, out, attn, grad)


def test_static_encoders_batched_equal_per_grn():
    """The static covariate encoder's four GRNs as one batched GRN (vsn_batched): the same contexts and
    gradients in float64, dropout off (on, it draws one (4, B, d) mask where the loop draws four)."""
    torch.manual_seed(0)
    enc = tft_blocks.StaticCovariateEncoder(SMALL.hidden_size, 0.0).to(torch.float64)
    xi = torch.randn(SMALL.batch_size, SMALL.hidden_size, dtype=torch.float64, requires_grad=True)
    runs = []
    for fn in (enc.forward, enc.forward_batched):
        enc.zero_grad(set_to_none=True)
        xi.grad = None
        out = fn(xi)
        sum((k + 1) * o.square().sum() for k, o in enumerate(out)).backward()  # a different weight per context
        runs.append(([o.detach() for o in out], [p.grad.clone() for p in enc.parameters()], xi.grad.clone()))
    (o1, g1, x1), (o2, g2, x2) = runs
    assert len(o2) == 4 and all(a.shape == b.shape for a, b in zip(o1, o2))
    assert max(float((a - b).abs().max()) for a, b in zip(o1 + g1 + [x1], o2 + g2 + [x2])) < 1e-12


def test_vsn_shapes_and_weights(batch):
    model = make(dataclasses.replace(SMALL, **BATCHED))
    vsn, B, Te = model.encoder_vsn, SMALL.batch_size, SMALL.encoder_length
    emb = (model.known_embedding, model.observed_embedding)
    x = torch.cat([batch["known"][:, :Te], batch["observed"]], dim=-1)
    out, v = vsn.forward_batched(x, torch.cat([e.weight for e in emb]), torch.cat([e.bias for e in emb]),
                                 torch.zeros(B, 1, SMALL.hidden_size, dtype=torch.float64))
    assert out.shape == (B, Te, SMALL.hidden_size) and v.shape == (B, Te, M_ENC)
    torch.testing.assert_close(v.sum(-1), torch.ones(B, Te, dtype=torch.float64))
    with torch.no_grad():  # eval: no dropout, the same forward
        assert model.eval()(batch).shape == (B, SMALL.decoder_length, len(SMALL.quantiles))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_batched_autocast_finite(dtype):
    model = build(dataclasses.replace(SMALL, **BATCHED)).train()
    b = example_batch(SMALL, seed=0)
    with torch.autocast("cpu", dtype=dtype):
        loss = quantile_loss(model(b), b["target"], SMALL.quantiles)
    loss.backward()
    assert torch.isfinite(loss) and all(torch.isfinite(p.grad).all() for p in model.parameters())


def test_vsn_batched_validation():
    with pytest.raises(ValueError, match="memory_efficient"):
        dataclasses.replace(SMALL, vsn_batched=True)
    with pytest.raises(ValueError, match="vsn_chunk must be at least 1, or 0"):
        dataclasses.replace(SMALL, vsn_chunk=-1)
    assert dataclasses.replace(SMALL, vsn_chunk=0).vsn_chunk == 0  # all variables in one chunk
    with pytest.raises(ValueError, match="vsn_batched must be True or False"):
        dataclasses.replace(SMALL, memory_efficient=True, vsn_batched=1)


def test_fewer_ops_per_step():
    """One training step's aten ops (forward, backward, Adam; deterministic), the small preset with the seed's
    37 encoder variables (10 chunks of 4): the batched VSNs issue at most 60 % of the per-chunk path's ops and
    matrix products, and their variable GRNs the same number whatever m (no loop over chunks)."""
    def recipe(batched):
        return seed_recipe(batched, "fp32", "fused", "small", n_observed=32)
    old, new = count_step(recipe(False)), count_step(recipe(True))
    assert new.total <= 0.6 * old.total and new.matmuls <= 0.6 * old.matmuls, (new.total, old.total)
    assert count_step(recipe(True)).to_dict() == new.to_dict()  # deterministic
    blocks = new.per_block()
    assert blocks["encoder VSN: variable GRNs"] == blocks["decoder VSN: variable GRNs"]  # m = 37 and m = 5
    assert old.per_block()["encoder VSN: variable GRNs"]["ops"] > 3 * blocks["encoder VSN: variable GRNs"]["ops"]
    assert "other" not in blocks or blocks["other"]["ops"] < 0.02 * new.total  # nearly every op has its block


def test_timing_and_command_run_on_cpu(tmp_path, capsys):
    recipes = {"old": seed_recipe(False, "fp32", "fused", "small"), "new": seed_recipe(True, "fp32", "fused", "small")}
    result = time_variants(recipes, "cpu", rounds=2)  # in a fresh process (foxlib.harness.fresh_process)
    rows = result["variants"]
    assert set(rows) == {"old, eager", "new, eager"}  # no CUDA graph on a CPU
    assert rows["old, eager"]["model_peak_bytes"] > 0 and rows["new, eager"]["ratio_to"] == "old, eager"
    assert len(rows["new, eager"]["samples_ms"]) == 2
    # the model peak + the step's own cuBLAS workspaces (cuda_graph.own_workspace), as wave 8.12's; a CPU has none
    assert all(r["allocator_peak_bytes"] == r["model_peak_bytes"] for r in rows.values())
    out = tmp_path / "ops.json"
    assert op_count_main(["--preset", "small", "--precision", "fp32", "--time", "--rounds", "2",
                          "--out", str(out)]) == 0
    assert "TOTAL" in capsys.readouterr().out and out.stat().st_size > 0
