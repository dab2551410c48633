"""The whole training step as one CUDA graph: refused where it cannot be captured (any machine),
and on a GPU the same training as eager steps, step for step."""
import pytest
import torch

from foxlib.memory.cuda_graph import GraphedProfile, GraphedStep, profile_graphed_step
from foxlib.models import MODELS
from foxlib.models.tft import device_loss

CARD = MODELS["tft"]


def _parts(device, capturable=True, **overrides):
    cfg = CARD.config("small", dropout=0.0, **overrides)  # no dropout: eager and graph draw no random numbers
    torch.manual_seed(0)
    model = CARD.build(cfg).to(device)
    batch = CARD.example_batch(cfg, device=device, seed=0)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr, capturable=capturable)
    return cfg, model, batch, device_loss(cfg, device), optimizer


@pytest.mark.slow
def test_device_loss_is_the_cards_loss():
    cfg, model, batch, loss, _ = _parts("cpu")
    model.eval()
    assert torch.equal(loss(model, batch), CARD.loss(model, batch))


@pytest.mark.parametrize("precision, capturable, device, match", [
    ("fp16", True, "cpu", "GradScaler"),
    ("fp32", True, "cpu", "needs a CUDA device"),
    ("fp8", True, "cpu", "unknown precision"),
])
def test_a_step_that_cannot_be_captured_is_refused(precision, capturable, device, match):
    _, model, batch, loss, optimizer = _parts(device, capturable)
    with pytest.raises(ValueError, match=match):
        GraphedStep(model, batch, loss, optimizer, precision)


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; this machine has none")


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("overrides, own_workspace", [
    ({}, False), ({"memory_efficient": True, "checkpointing": "vsn_variables"}, False), ({}, True)])
def test_graphed_steps_train_as_eager_steps(overrides, own_workspace):
    """Three eager warm-up steps, then two steps on new batches: replayed graph against eager code.
    own_workspace: what torch.compile's reduce-overhead rows do beside the peer benchmark's graphed row
    (cuBLAS's workspaces cleared after the capture, their memory handed to new tensors); the graph, owning
    its workspace, writes into none of them."""
    dev = torch.device("cuda")
    cfg, eager_model, batch, loss, eager_opt = _parts(dev, **overrides)
    _, graph_model, graph_batch, graph_loss, graph_opt = _parts(dev, **overrides)
    step = GraphedStep(graph_model, graph_batch, graph_loss, graph_opt).capture(own_cublas_workspace=own_workspace)
    fills = []
    if own_workspace:
        torch.cuda.synchronize()
        torch._C._cuda_clearCublasWorkspaces()
        fills = [torch.full((n,), 7.0, device=dev) for n in (2 ** 15, 2 ** 18, 2 ** 20, 2 ** 22, 2 ** 23) for _ in range(4)]
    for _ in range(3):
        eager_opt.zero_grad(set_to_none=True)
        loss(eager_model, batch).backward()
        eager_opt.step()
    for seed in (1, 2):
        new = CARD.example_batch(cfg, device=dev, seed=seed)
        eager_opt.zero_grad(set_to_none=True)
        value = loss(eager_model, new)
        value.backward()
        eager_opt.step()
        step.load(new)
        assert float(step()) == pytest.approx(float(value), rel=1e-4)
    for (name, a), b in zip(eager_model.named_parameters(), graph_model.parameters()):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-5), name
    torch.cuda.synchronize()
    assert all(bool((f == 7.0).all()) for f in fills)
    with pytest.raises(ValueError, match="capturable"):
        GraphedStep(*_parts(dev, capturable=False)[1:])


@pytest.mark.cuda
@needs_cuda
def test_graphed_profile_counts_the_persistent_categories():
    _, model, batch, loss, optimizer = _parts(torch.device("cuda"))
    p = profile_graphed_step(model, batch, loss, optimizer)
    n = sum(t.numel() for t in model.parameters())
    assert p.n_parameters == n and p.parameters >= 4 * n and p.gradients == 4 * n
    assert p.optimizer_state >= 8 * n  # exp_avg and exp_avg_sq (+ the step counters)
    assert p.peak >= p.parameters + p.gradients + p.optimizer_state
    assert p.activations is None and p.cuda_graph and GraphedProfile.from_dict(p.to_dict()) == p
    # the capture stream's cuBLAS workspaces are reported apart, not in the model peak
    assert p.workspace_bytes > 0 and p.cuda["workspace_of_capture_stream_bytes"] >= 0
    assert p.cuda["allocated_peak_bytes"] == p.peak + p.workspace_bytes
    # each capture stream keeps its own cuBLAS workspace for the process: a second profile must not count
    # the first one's (it did once, inflating later graph rows of wave 8.12)
    again = profile_graphed_step(*_parts(torch.device("cuda"))[1:])
    assert again.peak == pytest.approx(p.peak, abs=1e6)


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("options", [
    {"optimizer_in_backward": True}, {"adam": "fused"}, {"optimizer_in_backward": True, "adam": "fused"}, {"tf32": True},
])
def test_graphed_steps_with_the_fast_options_train_as_eager_steps(options):
    """Adam in backward, fused Adam and TF32 inside a captured step: the parameters after two replays on new
    batches are the eager steps' (same options), within the float tolerance of a replay."""
    from foxlib.harness.recipe import StepRecipe, build_step
    from foxlib.harness.step_options import StepOptions, matmul_tf32
    dev = torch.device("cuda")
    opts = StepOptions(**options)
    cfg = CARD.config("small", dropout=0.0, memory_efficient=True)
    recipe = StepRecipe("tft", cfg, "fp32", 0, opts)
    eager = build_step(recipe, dev, capturable=True)
    graphed = build_step(recipe, dev, capturable=True)
    with matmul_tf32(opts.tf32):
        step = GraphedStep(graphed.model, graphed.batch, device_loss(cfg, dev), graphed.optimizer).capture()
    for _ in range(3):
        eager.step()
    for seed in (1, 2):
        new = CARD.example_batch(cfg, device=dev, seed=seed)
        eager.batch.update({k: v.clone() for k, v in new.items()})
        eager.step()
        step.load(new)
        step()
    if opts.optimizer_in_backward:
        assert all(p.grad is None for p in graphed.model.parameters())
    for (name, a), b in zip(eager.model.named_parameters(), graphed.model.parameters()):
        assert torch.allclose(a, b, rtol=1e-3, atol=1e-4), name


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; this machine has none")
def test_a_captured_inference_forward_keeps_its_input_alive():
    """8.13's warm-up drops its reference to the input after capturing; the call must keep it (else the
    replay reads freed, unmapped memory: an illegal memory access on the H200)."""
    import gc

    from foxlib.waves.wave_8_13.members import Member
    from foxlib.waves.wave_8_13.serve import forward, inference_input
    dev = torch.device("cuda")
    m = Member("dqn", MODELS["dqn"].preset("small"), "fp32", cuda_graph=True)
    torch.manual_seed(0)
    m.model = m.card.build(m.cfg).to(dev).eval()
    x = inference_input(m, dev, 0, 0)
    expected = m.model(x).detach().clone()
    fn = forward(m, x, dev)
    assert m.inference_note.startswith("captured")
    del x
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    assert torch.equal(fn(), expected) or torch.allclose(fn(), expected, rtol=1e-5, atol=1e-6)


def test_an_eager_step_profiled_after_a_graph_has_no_own_workspace():
    """own_workspaces, in profiling order: a graph's own workspace is its capture stream's; an eager step's is what
    its start held, unless a graph was profiled before it in the process (then that includes the graph's)."""
    from foxlib.memory.cuda_graph import own_workspaces, profile_from_dict
    from tests.conftest import graphed_profile, step_profile
    profiles = {"eager 1": step_profile(workspace_bytes=70),
                "graph": graphed_profile(workspace_bytes=500, cuda={"workspace_of_capture_stream_bytes": 72}),
                "eager 2": step_profile(workspace_bytes=642)}
    assert own_workspaces(profiles) == {"eager 1": 70, "graph": 72, "eager 2": None}
    assert {n: profile_from_dict(p.to_dict()) for n, p in profiles.items()} == profiles  # "cuda_graph" marks a graph
