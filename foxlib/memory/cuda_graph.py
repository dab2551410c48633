"""A whole training step captured in one CUDA graph, and its memory.

On a large GPU the seed TFT's step is launch-bound: hundreds of small kernels, each a few
microseconds of work behind a launch from Python. Captured once (zero_grad, forward + loss,
backward, Adam with capturable=True) and replayed, the step does the same arithmetic without the
launches; recomputation from checkpointing then costs GPU time only.

Rules of a capture: the step must not copy from the host (the loss takes its constants on the
device), the optimizer is built with capturable=True, the inputs are fixed tensors that each new
batch is copied into, and fp16's GradScaler (a host-side decision per step) is not captured.
Saved activations live in the graph's private memory pool, where no saved-tensor hook sees them:
a graphed step's profile has its peak and its persistent categories, not its activations.

cuBLAS keeps one workspace per handle and stream, allocated on first use and reused by every later
call; a capture bakes its address into the graph. After the eager warm-up that workspace lies outside
the graph's pool: anything that clears cuBLAS's workspaces (torch.compile's "reduce-overhead" mode
does, each time its CUDA-graph trees record) frees it while the graph still writes into it on every
replay. capture(own_cublas_workspace=True) clears them just before the capture, so that the capture
allocates its workspace inside the graph's own pool, where nothing else allocates: a graph that lives
beside such code needs it.
"""
from __future__ import annotations

import gc
from dataclasses import dataclass
from typing import Any, Callable

import torch

from foxlib.core.schema import Record
from foxlib.memory import accounting
from foxlib.memory.cuda import allocator_stats
from foxlib.memory.profile import MemoryProfile, ProfiledStep, cuda_block_bytes
from foxlib.memory.step import TrainingStep, check_precision

WARMUP_STEPS = 3  # eager steps before the capture: Adam's state and the kernels' workspaces exist
METHOD = ("CUDA caching allocator: max_memory_allocated() over the capture and one replay, after "
          "reset_peak_memory_stats() (the graph's pool included), less the workspaces (workspace_bytes: what "
          "was allocated after the eager warm-up that is not the step's tensors, its capture stream's cuBLAS "
          "workspaces and other streams')")


class GraphedStep:
    """One training step as a CUDA graph. Call it to replay; load(batch) copies a batch into its inputs."""

    def __init__(self, model: torch.nn.Module, batch: dict[str, torch.Tensor],
                 loss_fn: Callable[[torch.nn.Module, Any], torch.Tensor], optimizer: torch.optim.Optimizer,
                 precision: str = "fp32"):
        check_precision(precision)
        if precision == "fp16":
            raise ValueError("fp16 trains through a GradScaler, whose skip-or-step decision is made on the host "
                             "each step: it is not captured here (use bf16 or fp32)")
        device = next(model.parameters()).device
        if device.type != "cuda":
            raise ValueError(f"a CUDA graph needs a CUDA device; the model is on {device}")
        if not all(g.get("capturable") for g in optimizer.param_groups):
            raise ValueError("the optimizer must be built with capturable=True to be captured in a CUDA graph")
        self.inputs = batch  # the graph reads these tensors: load() refills them
        self.device = device
        self.graph: torch.cuda.CUDAGraph | None = None
        model.train()
        # the very step every wave times; its zero_grad(set_to_none) inside the capture makes the
        # gradients in the graph's pool, written afresh by each replay
        self._step = TrainingStep(model, batch, loss_fn, optimizer, precision, device)
        self.stream = torch.cuda.Stream(device)  # warm-up and capture on one stream: one cuBLAS workspace
        self.stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(self.stream):
            for _ in range(WARMUP_STEPS):
                self._step()
        torch.cuda.current_stream(device).wait_stream(self.stream)
        torch.cuda.synchronize(device)

    def capture(self, own_cublas_workspace: bool = False) -> "GraphedStep":
        """Record the step (nothing runs); replaying it is the training step. own_cublas_workspace: the
        graph's cuBLAS workspace is allocated inside its own pool (see the module docstring); this frees
        every cuBLAS workspace of the process first, those that graphs captured earlier without it use."""
        if own_cublas_workspace:
            torch.cuda.synchronize(self.device)  # no kernel in flight still uses a workspace
            torch._C._cuda_clearCublasWorkspaces()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, stream=self.stream):
            self.loss = self._step()
        return self

    def load(self, batch: dict[str, torch.Tensor]) -> None:
        for k, v in batch.items():
            self.inputs[k].copy_(v, non_blocking=True)

    def __call__(self) -> torch.Tensor:
        if self.graph is None:
            raise RuntimeError("capture() the step before replaying it")
        self.graph.replay()
        return self.loss


def bytes_outside_step(model: torch.nn.Module, batch: Any, optimizer: torch.optim.Optimizer) -> int:
    """What CUDA's allocator holds now that is not the step's tensors (weights, buffers, batch, gradients,
    the optimizer's state): cuBLAS workspaces of every stream used, and anything else the process keeps.
    Taken after the eager warm-up, it is what a graphed step's model peak leaves out; taken before the step
    exists, the workspaces of other streams (profile_graphed_step)."""
    device = next(model.parameters()).device
    mine = [*model.parameters(), *model.buffers(), *accounting.iter_tensors([batch, list(optimizer.state.values())]),
            *(p.grad for p in model.parameters() if p.grad is not None)]
    return max(0, torch.cuda.memory_allocated(device) - cuda_block_bytes(mine, device))


@dataclass(frozen=True, kw_only=True)
class GraphedProfile(ProfiledStep, Record):
    """A step captured in one CUDA graph, profiled (profile_graphed_step): MemoryProfile's figures where they can be
    measured, in bytes; activations and forward_peak are None (saved inside the graph's pool, where no hook sees
    them). measurement.json holds it as to_dict() writes it, "cuda_graph": true marking it (profile_from_dict)."""
    batch: int
    activations: None = None
    forward_peak: None = None
    peak: int
    """The model peak over the capture and one replay: the allocator's, less workspace_bytes."""
    workspace_bytes: int
    """What the allocator held after the eager warm-up that is not the step's tensors (cuBLAS workspaces)."""
    loss: float
    peak_method: str
    warmup_steps: int
    cuda_graph: bool = True
    cuda: dict[str, Any]
    """The allocator's statistics (its reserve includes the graph's pool) and the workspaces split by stream."""


def profile_from_dict(d: dict[str, Any]) -> MemoryProfile | GraphedProfile:
    """A stored step profile typed: a CUDA graph's (its "cuda_graph" key) as GraphedProfile, else MemoryProfile."""
    return GraphedProfile.from_dict(d) if d.get("cuda_graph") else MemoryProfile.from_dict(d)


def profile_graphed_step(model: torch.nn.Module, batch: dict[str, torch.Tensor],
                         loss_fn: Callable[[torch.nn.Module, Any], torch.Tensor], optimizer: torch.optim.Optimizer,
                         precision: str = "fp32") -> GraphedProfile:
    """Warm up eagerly, then capture the step and replay it once: the peak over capture and replay (GraphedProfile:
    profile_step's figures where they can be measured, the workspaces apart)."""
    device = next(model.parameters()).device
    gc.collect()
    torch.cuda.synchronize(device)
    # allocated before this step exists and not its tensors: cuBLAS workspaces of other streams (the
    # default one, earlier graphs' capture streams), held for the process
    other_streams = bytes_outside_step(model, batch, optimizer)
    step = GraphedStep(model, batch, loss_fn, optimizer, precision)  # its eager warm-up on its capture stream
    gc.collect()
    torch.cuda.synchronize(device)
    # after the warm-up: the step's tensors (now with gradients and Adam's state) and every workspace, its
    # capture stream's (forward and autograd threads) included; the workspaces are not the model's peak
    workspace = bytes_outside_step(model, batch, optimizer)
    torch.cuda.reset_peak_memory_stats(device)
    loss = float(step.capture()())
    torch.cuda.synchronize(device)
    stats = allocator_stats(device)
    return GraphedProfile(
        device=str(device), device_name=torch.cuda.get_device_name(device), precision=precision,
        **accounting.step_bytes(model, optimizer, step.inputs),
        peak=torch.cuda.max_memory_allocated(device) - workspace, workspace_bytes=workspace,
        loss=loss, peak_method=METHOD, warmup_steps=WARMUP_STEPS,
        cuda={**stats, "workspace_of_other_streams_bytes": other_streams,
              "workspace_of_capture_stream_bytes": workspace - other_streams})


def own_workspace(profile: MemoryProfile | GraphedProfile) -> int:
    """The cuBLAS workspaces of a profiled step's own streams, for its allocator peak (model peak + these):
    for a captured step its capture stream's (profile_graphed_step's workspace less what the process held
    before the step existed: the same whatever ran before it in the process), for an eager step what was
    allocated at its start that is not its tensors (profile eager steps before any graph: a graph's capture
    stream keeps its workspace for the life of the process)."""
    own = (profile.cuda or {}).get("workspace_of_capture_stream_bytes")
    return int(profile.workspace_bytes if own is None else own)


def own_workspaces(profiles: dict[str, MemoryProfile | GraphedProfile]) -> dict[str, int | None]:
    """own_workspace of each of one process's profiles, given in the order they were measured; None for an eager
    step profiled after a captured one: what its start held then includes the earlier graphs' capture-stream
    workspaces, which are not its own (wave 8.12 at 7b01627 profiled its batched eager strategy after 9 graphs:
    1,365.4 MB "allocator peak" for a 745.7 MB step)."""
    out, graphed_before = {}, False
    for name, profile in profiles.items():
        graphed = isinstance(profile, GraphedProfile)
        out[name] = None if graphed_before and not graphed else own_workspace(profile)
        graphed_before = graphed_before or graphed
    return out
