"""foxlib.harness.equivalence: the strategies claimed to compute the same function, shown as max |Δ| numbers."""
import dataclasses

import pytest
import torch

from foxlib.harness.equivalence import TOLERANCE_REL, compare, reference_run, same_function
from foxlib.harness.step_options import StepOptions
from foxlib.models import MODELS
from tests.conftest import committed

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
SMALL = MODELS["tft"].preset("small")
CLAIMED_EQUAL = [{"checkpointing": "vsn"}, {"checkpointing": "blocks"}, {"checkpointing": "all"},
                 {"checkpointing": "variables"}, {"checkpointing": "vsn_variables"}, {"memory_efficient": True},
                 {"memory_efficient": True, "checkpointing": "vsn_variables", "vsn_chunk": 8}]


@pytest.fixture(scope="module")
def reference():
    return reference_run(SMALL, precision="fp32", seed=0)


@pytest.mark.parametrize("overrides", CLAIMED_EQUAL, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_checkpointing_and_the_efficient_path_compute_the_same_function(reference, overrides):
    e = same_function(SMALL, dataclasses.replace(SMALL, **overrides), reference=reference)
    assert e.same and e.tolerance_rel == TOLERANCE_REL["fp32"]
    # float32 rounding only: far inside the tolerance; whole-segment checkpointing recomputes the same ops
    assert e.output_rel_diff <= 1e-5 and e.grad_rel_diff <= 1e-5
    assert e.output_ref_max_abs > 0.1 and e.grad_ref_max_abs > 1e-3  # the figures are relative to real values
    if overrides.get("checkpointing") in ("vsn", "blocks", "all") and len(overrides) == 1:
        assert e.output_max_abs_diff == 0.0 and e.grad_max_abs_diff == 0.0


def test_another_seeds_weights_are_detected(reference):
    e = same_function(SMALL, dataclasses.replace(SMALL, memory_efficient=True), variant_seed=1, reference=reference)
    assert not e.same
    assert e.output_rel_diff > 0.1 and e.grad_rel_diff > 0.1


def test_a_planted_gradient_difference_is_found_and_named(reference):
    planted = {"pred": reference["pred"].clone(), "loss": reference["loss"],
               "grads": {n: g.clone() for n, g in reference["grads"].items()}}
    name = "positionwise_grn.fc1.weight"
    planted["grads"][name][0, 0] += 1e-2
    e = compare(reference, planted, name="planted", precision="fp32", device="cpu")
    assert e.output_max_abs_diff == 0.0 and e.grad_max_abs_diff == pytest.approx(1e-2, rel=1e-3)
    assert e.worst_parameter == name and not e.same


def test_bf16_variants_within_bf16_rounding():
    ref = reference_run(SMALL, precision="bf16")
    e = same_function(SMALL, dataclasses.replace(SMALL, memory_efficient=True), precision="bf16", reference=ref)
    assert e.same and 0 < e.output_rel_diff <= TOLERANCE_REL["bf16"]


def test_claims_and_arguments_are_checked(reference):
    with pytest.raises(ValueError, match="changes \\['batch_size'\\]: it computes another function"):
        same_function(SMALL, dataclasses.replace(SMALL, batch_size=4))
    with pytest.raises(ValueError, match="a CUDA graph needs a CUDA device"):
        same_function(SMALL, SMALL, cuda_graph=True)
    with pytest.raises(ValueError, match="other arguments"):
        same_function(SMALL, SMALL, precision="bf16", reference=reference)
    with pytest.raises(ValueError, match="valid precisions"):
        same_function(SMALL, SMALL, precision="fp8")
    with pytest.raises(ValueError, match="the options tf32 change the numbers"):
        same_function(SMALL, SMALL, options=StepOptions(tf32=True), reference=reference)


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("overrides,cuda_graph,precision", [
    ({}, True, "fp32"), ({"memory_efficient": True}, False, "fp32"),
    ({"memory_efficient": True, "checkpointing": "vsn_variables"}, True, "fp32"),
    ({"memory_efficient": True, "checkpointing": "vsn_variables"}, True, "bf16")])
def test_same_function_on_cuda(overrides, cuda_graph, precision):
    e = same_function(SMALL, dataclasses.replace(SMALL, **overrides), precision=precision, device="cuda",
                      cuda_graph=cuda_graph)
    assert e.same, e
    other = same_function(SMALL, dataclasses.replace(SMALL, **overrides), precision=precision, device="cuda",
                          cuda_graph=cuda_graph, variant_seed=1)
    assert not other.same


def test_wave_8_12_checks_every_strategy_claimed_equal():
    from foxlib.waves.wave_8_12 import measuring, records, strategies, tables
    chosen = strategies.select("bf16;checkpoint blocks;efficient + checkpoint VSN variables;efficient + bf16;CUDA graph")
    out = measuring.same_function_checks(chosen, SMALL, torch.device("cpu"))
    # only the claims are checked: not the baseline, not bf16 (another function, with its own accuracy runs)
    assert set(out) == {"checkpoint blocks", "efficient + checkpoint VSN variables", "efficient + bf16", "CUDA graph"}
    assert out["checkpoint blocks"]["same"] and out["checkpoint blocks"]["grad_max_abs_diff"] == 0.0
    assert out["efficient + checkpoint VSN variables"]["same"] and out["efficient + bf16"]["precision"] == "bf16"
    assert "a CUDA graph needs a CUDA device" in out["CUDA graph"]["error"]  # said, not hidden
    m = records.Measurement.from_dict({**committed("cpu", "8.12"), "same_function": out})  # typed, as a render reads it
    table = tables.same_function_table(*records.same_function_figures(m.same_function)).set_index("strategy")
    assert table.loc["efficient + bf16", "same function"] and "error" in table.columns


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("options", [StepOptions(compile=True),
                                     StepOptions(adam="fused", compile=True, cpp_wrapper=True)],
                         ids=["torch.compile", "C++ wrapper"])
def test_a_compiled_step_computes_the_same_function_on_cuda(options):
    """Wave 8.12's compiled strategies, as same_function_checks passes them (the strategy's StepOptions)."""
    ref = reference_run(SMALL, precision="bf16", device="cuda")
    e = same_function(SMALL, dataclasses.replace(SMALL, memory_efficient=True, vsn_batched=True), precision="bf16",
                      device="cuda", options=options, reference=ref)
    assert e.same, e
    assert "torch.compile" in e.variant and ("C++ wrapper" in e.variant) == options.cpp_wrapper
