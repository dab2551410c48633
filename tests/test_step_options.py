"""The training step's knobs (foxlib.harness.step_options): Adam in backward, fused Adam, TF32."""
from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from foxlib.harness.recipe import StepRecipe, build_step
from foxlib.harness.step_options import OptimizerInBackward, StepOptions, matmul_tf32
from foxlib.models import MODELS

CPU = torch.device("cpu")
TINY = dataclasses.replace(MODELS["tft"].preset("small"), hidden_size=8, batch_size=2, encoder_length=6)


def _params_after(options: StepOptions, steps: int = 3) -> tuple[torch.Tensor, object]:
    st = build_step(StepRecipe("tft", TINY, "fp32", 0, options), CPU)
    for _ in range(steps):
        st.step()
    return torch.cat([p.detach().flatten() for p in st.model.parameters()]), st


def test_adam_in_backward_is_adam_and_leaves_no_gradient():
    plain, _ = _params_after(StepOptions())
    in_backward, st = _params_after(StepOptions(optimizer_in_backward=True))
    # Adam is elementwise: stepping each parameter as its gradient lands is the same update
    assert torch.equal(plain, in_backward)
    assert all(p.grad is None for p in st.model.parameters())
    assert isinstance(st.optimizer, OptimizerInBackward)
    n = sum(p.numel() for p in st.model.parameters())
    state = sum(t.numel() for s in st.optimizer.state.values() for k, t in s.items() if k != "step")
    assert state == 2 * n  # both moments of every parameter


def test_fused_adam_matches_within_rounding():
    plain, _ = _params_after(StepOptions())
    fused, st = _params_after(StepOptions(adam="fused"))
    assert st.optimizer.param_groups[0]["fused"]
    assert torch.allclose(plain, fused, rtol=0, atol=1e-5) and not torch.equal(plain, plain + 1)


def test_adam_in_backward_lowers_the_profiled_gradients_to_nothing():
    cfg = TINY
    plain = build_step(StepRecipe("tft", cfg, "fp32", 0), CPU).profile()
    hooked = build_step(StepRecipe("tft", cfg, "fp32", 0, StepOptions(optimizer_in_backward=True)), CPU).profile()
    assert plain.gradients == plain.parameters > 0 and hooked.gradients == 0
    assert hooked.optimizer_state == plain.optimizer_state and hooked.peak <= plain.peak


def test_per_parameter_clipping_clips_each_gradient():
    w = torch.nn.Parameter(torch.zeros(4))
    opt = OptimizerInBackward([w], lr=1.0, clip_each=0.5)
    seen = []
    w.register_post_accumulate_grad_hook(lambda p: seen.append(None))
    (w * torch.tensor([30.0, 40.0, 0.0, 0.0])).sum().backward()  # gradient norm 50
    assert w.grad is None and seen
    # Adam's first step moves each element by lr in the direction of its (clipped) gradient's sign
    assert torch.allclose(w.detach(), torch.tensor([-1.0, -1.0, 0.0, 0.0]), atol=1e-4)
    opt.remove()


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="valid: default, fused"):
        StepOptions(adam="sgd")
    with pytest.raises(ValueError, match="GradScaler"):
        StepRecipe("tft", TINY, "fp16", 0, StepOptions(optimizer_in_backward=True))
    with pytest.raises(ValueError, match="no parameter"):
        OptimizerInBackward([torch.zeros(2)], lr=1e-3)


def test_cpp_wrapper_is_a_compile_option_held_only_inside_the_step():
    import torch._inductor.config as inductor
    from foxlib.harness.step_options import backends
    with pytest.raises(ValueError, match="set compile too"):
        StepOptions(cpp_wrapper=True)
    with pytest.raises(ValueError, match="true or false"):
        StepOptions.from_dict({"compile": True, "cpp_wrapper": "yes"})
    opts = StepOptions.from_dict({"adam": "fused", "compile": True, "cpp_wrapper": True})
    assert opts.label() == "fused Adam + torch.compile (C++ wrapper)"
    assert opts.sets_backends and not opts.changes_numerics  # the same function, launched from C++
    assert not StepOptions(compile=True).sets_backends
    before = (inductor.cpp_wrapper, inductor.combo_kernels)
    with backends(opts):
        assert inductor.cpp_wrapper and inductor.combo_kernels
    assert (inductor.cpp_wrapper, inductor.combo_kernels) == before
    with backends(StepOptions(compile=True)):
        assert (inductor.cpp_wrapper, inductor.combo_kernels) == before


def test_a_step_holding_backends_passes_the_phase_hooks_through():
    """build_step wraps a step whose options set backends (here TF32); TrainingStep's phase hooks still fire, once
    each, in order, and inside the options' settings."""
    built = build_step(StepRecipe("tft", TINY, "fp32", 0, StepOptions(tf32=True)), CPU)
    seen = []
    loss = built.step(on_forward_end=lambda *_: seen.append(("forward", torch.backends.cuda.matmul.allow_tf32)),
                      before_step=lambda: seen.append(("step", torch.backends.cuda.matmul.allow_tf32)))
    assert seen == [("forward", True), ("step", True)] and torch.isfinite(loss)


def test_a_cpp_wrapper_recipe_compiles_with_it_and_steps_inside_its_options(monkeypatch):
    """build_step hands cpp_wrapper to compile_in_place and runs each step inside inductor's C++-wrapper options,
    which the lazily compiled backward reads (compiling itself stubbed: inductor's C++ build takes minutes here)."""
    import torch._inductor.config as inductor
    from foxlib.harness import recipe as recipe_module
    asked = []
    monkeypatch.setattr(recipe_module, "compile_in_place", lambda model, cpp_wrapper=False: asked.append(cpp_wrapper))
    built = build_step(StepRecipe("tft", TINY, "fp32", 0, StepOptions(compile=True, cpp_wrapper=True)), CPU)
    seen = []
    built.step(before_step=lambda: seen.append((inductor.cpp_wrapper, inductor.combo_kernels)))
    assert asked == [True] and seen == [(True, True)] and not inductor.cpp_wrapper


def test_tf32_is_set_only_inside_and_restored():
    before = torch.backends.cuda.matmul.allow_tf32
    with matmul_tf32(True):
        assert torch.backends.cuda.matmul.allow_tf32
    assert torch.backends.cuda.matmul.allow_tf32 == before
    with matmul_tf32(False):
        assert torch.backends.cuda.matmul.allow_tf32 == before
    assert StepOptions(tf32=True).changes_numerics and not StepOptions(adam="fused").changes_numerics
    assert StepOptions(optimizer_in_backward=True, tf32=True).label() == "Adam in backward + TF32"
    recipe = StepRecipe("tft", TINY, "fp32", 0, StepOptions(tf32=True))
    assert recipe.to_dict()["options"]["tf32"] and "options" not in StepRecipe("tft", recipe.cfg).to_dict()


def test_throughput_page_labels_published_figures(tmp_path):
    from foxlib.report.throughput_page import render
    row = {"variant": "AMP (bf16), eager", "precision": "bf16", "options": StepOptions().to_dict(),
           "memory_efficient": False, "cuda_graph": False, "step_s_median": 0.1, "step_s_samples": [0.1],
           "items_per_s": 10240.0, "items_per_s_low": 10000.0, "items_per_s_high": 10500.0,
           "allocator_peak_bytes": 2_000_000_000}
    data = {"device": {"name": "NVIDIA H200"}, "environment": {"torch": "2.11"}, "measured_at_revision": "abc1234",
            "config": {"hidden_size": 128, "num_heads": 4, "encoder_length": 168, "decoder_length": 24,
                       "batch_size": 1024, "n_observed": 1, "dropout": 0.1}, "repeats": 10,
            "published": {"source": "NVIDIA", "items_per_s": {"TF32": 12435, "AMP": 17608}}, "differences": ["x"],
            "rows": [row], "errors": {}}
    md = render(json.loads(json.dumps(data)), rendered_at_revision="def5678")
    assert "**10,240 items/s**" in md and "0.58x the published AMP figure" in md
    assert md.count("published (not measured here)") == 2 and "| 2,000.0 |" in md
    assert "`abc1234`" in md and "`def5678`" in md


@pytest.mark.slow  # two Python processes
def test_a_fresh_process_measures_the_step_and_says_why_it_failed():
    from foxlib.harness.fresh_process import measure_in_fresh_process
    tiny = {"preset": "small", "overrides": {"hidden_size": 8, "batch_size": 2, "encoder_length": 6}}
    spec = {"device": "cpu", "profile": True, "steps": 2,
            "variants": {"plain": tiny, "fused": {**tiny, "options": {"adam": "fused"}}}}
    r = measure_in_fresh_process(spec, {"CUBLAS_WORKSPACE_CONFIG": ":16:8"})
    assert r["cublas_workspace_config"] == ":16:8" and set(r["variants"]) == {"plain", "fused"}
    for v in r["variants"].values():
        assert len(v["step_s_samples"]) == 2 and v["step_s_median"] > 0
        # the profile is the in-process one: the step's own tensors, at least weights, gradients, Adam's state
        p = v["profile"]
        assert p["peak"] >= p["parameters"] + p["gradients"] + p["optimizer_state"] > 0
    bad = measure_in_fresh_process({**spec, "variants": {"fp8": {**tiny, "precision": "fp8"}}})
    assert "error" in bad and "precision" in bad["error"]


def test_a_child_process_gives_its_last_json_line_or_says_why_not():
    """foxlib.harness.fresh_process.run_child, with children that need no torch: a result, a failure with its last
    lines, a child that prints no JSON, one that outlives its time."""
    import sys

    from foxlib.harness.fresh_process import run_child
    py = [sys.executable, "-c"]
    assert run_child([*py, "import os; print('progress'); print('{\"a\": 1, \"p\": \"' + os.environ['FOXLIB_PROGRESS'] + '\"}')"]) \
        == {"a": 1, "p": "0"}
    assert run_child([*py, "import sys; sys.stdin.read() == 'x' and print('{\"read\": true}')"], stdin="x") == {"read": True}
    failed = run_child([*py, "import sys; print('step 1', file=sys.stderr); sys.exit('bad preset')"])
    assert failed == {"error": "exit 1: step 1 | bad preset"}
    assert run_child([*py, "print('done')"])["error"].startswith("exit 0 without a JSON result")
    assert run_child([*py, "import time; time.sleep(5)"], timeout_s=0.5) == {"error": "no result within 0.5 s"}


def test_graph_parts_build_a_capturable_step_and_refuse_a_model_without_a_device_loss():
    from foxlib.harness.recipe import graph_parts
    built, loss = graph_parts(StepRecipe("tft", TINY, "fp32", 0, StepOptions(adam="fused")), CPU)
    group = built.optimizer.param_groups[0]
    assert group["capturable"] and group["fused"]
    built.model.eval()
    assert torch.equal(loss(built.model, built.batch), MODELS["tft"].loss(built.model, built.batch))
    with pytest.raises(ValueError, match="no host-copy-free loss known for 'dqn'"):
        graph_parts(StepRecipe("dqn", MODELS["dqn"].preset("small")), CPU)


def test_backends_hold_cudnn_off_and_tf32_only_inside_and_the_option_counts_as_numerics():
    from foxlib.harness.step_options import backends
    off = StepOptions(cudnn=False, tf32=True)
    assert off.changes_numerics and off.label() == "TF32 + LSTMs without cuDNN"
    assert off.numeric_changes == ("tf32", "no_cudnn") and off.sets_backends
    assert StepOptions(optimizer_in_backward=True).numeric_changes == ("optimizer_in_backward",)
    assert not StepOptions(optimizer_in_backward=True).sets_backends and StepOptions(adam="fused").numeric_changes == ()
    # a wave 8.12 strategy with such options changes the numbers, and gets accuracy runs of its own
    from foxlib.waves.wave_8_12.strategies import Strategy, accuracy_key
    s = Strategy("x", "bf16", options=StepOptions(cudnn=False))
    assert s.changes_numerics and not Strategy("y", "bf16", options=StepOptions(adam="fused")).changes_numerics
    assert accuracy_key(s) == ("bf16", (), ("no_cudnn",)) != accuracy_key(Strategy("y", "bf16"))
    assert StepOptions.from_dict(off.to_dict()) == off and StepOptions().cudnn
    before = (torch.backends.cudnn.enabled, torch.backends.cuda.matmul.allow_tf32)
    with backends(off):
        assert not torch.backends.cudnn.enabled and torch.backends.cuda.matmul.allow_tf32
    assert (torch.backends.cudnn.enabled, torch.backends.cuda.matmul.allow_tf32) == before
    with backends(StepOptions()):
        assert (torch.backends.cudnn.enabled, torch.backends.cuda.matmul.allow_tf32) == before


def test_a_step_without_cudnn_runs_its_forward_with_cudnn_off():
    from foxlib.harness.recipe import build_step
    seen = []
    built = build_step(StepRecipe("tft", TINY, "fp32", 0, StepOptions(cudnn=False)), "cpu")
    built.model.register_forward_hook(lambda *a: seen.append(torch.backends.cudnn.enabled))
    built.step()
    assert seen == [False] and torch.backends.cudnn.enabled


def test_from_dict_checks_what_it_reads():
    assert StepOptions.from_dict(None) == StepOptions() == StepOptions.from_dict({})
    with pytest.raises(ValueError, match="unknown step option.*fused; valid: adam, optimizer_in_backward, tf32, cudnn"):
        StepOptions.from_dict({"fused": True})
    with pytest.raises(ValueError, match="tf32 must be true or false"):
        StepOptions.from_dict({"tf32": 1})
    with pytest.raises(ValueError, match="must be an object"):
        StepOptions.from_dict(["adam"])
    with pytest.raises(ValueError, match="valid: default, fused"):
        StepOptions.from_dict({"adam": "sgd"})


def test_compile_is_the_same_module_compiled_lazily_and_not_a_change_of_numerics():
    """torch.compile in place (nn.Module.compile): the module built is the one whose parameters the optimizer
    holds, state-dict keys unchanged; nothing compiles until the first call (so this test costs no compile);
    dropout through PyTorch's own random ops keeps the function, so it shares the plain step's accuracy runs."""
    opts = StepOptions.from_dict({"compile": True, "adam": "fused"})
    assert opts.compile and not opts.changes_numerics and opts.label() == "fused Adam + torch.compile"
    cfg = MODELS["tft"].config("small", batch_size=2, encoder_length=4)
    built = build_step(StepRecipe("tft", cfg, "fp32", 0, StepOptions(compile=True)), "cpu")
    plain = build_step(StepRecipe("tft", cfg, "fp32", 0), "cpu")
    assert built.model._compiled_call_impl is not None and plain.model._compiled_call_impl is None
    assert list(built.model.state_dict()) == list(plain.model.state_dict())
    assert {id(p) for g in built.optimizer.param_groups for p in g["params"]} == {id(p) for p in built.model.parameters()}


def test_adam_in_backward_lets_a_dropped_model_go():
    """The per-parameter hooks hold the optimizer weakly: a freed step's parameters (and their Adam state) are
    collected, as the plain step's are (a strong hook kept them: 293 MB of an earlier variant in op_count's
    child at b37df45, counted in the next variant's allocator peak)."""
    import gc
    import weakref
    for options in (StepOptions(), StepOptions(optimizer_in_backward=True)):
        st = build_step(StepRecipe("tft", TINY, "fp32", 0, options), CPU)
        st.step()
        param = weakref.ref(next(st.model.parameters()))
        st.free()
        gc.collect()
        assert param() is None, options
