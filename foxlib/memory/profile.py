"""profile_step: the memory of one training step, by category, on CPU or CUDA.

Warm-up steps first (the optimizer makes its state at its first step), then one measured step. Categories are
counted from the tensors (accounting.py); peaks come from the CPU profiler's allocation events (timeline.py) or
the CUDA allocator. Two figures, one value each wherever shown:
- model peak (`peak`): the largest total of the step's own live tensor bytes; on CUDA the allocator's peak less
  `workspace_bytes` (cuBLAS workspaces held at the step's start for the process);
- process peak (`process_peak`): model peak + `workspace_bytes` + the CUDA context; on the CPU the model peak.
"""
from __future__ import annotations

import dataclasses
import gc
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import torch

from foxlib.memory import accounting
from foxlib.memory.cuda import allocator_stats, nvml_view
from foxlib.memory.devices import cpu_name
from foxlib.memory.live_series import MIN_BLOCK_BYTES
from foxlib.memory.step import TrainingStep
from foxlib.memory.timeline import cpu_allocations, mark_forward_end

@dataclass(frozen=True)
class ProfiledStep:
    """What every profiled training step has, eager (MemoryProfile) or captured in one CUDA graph
    (foxlib.memory.cuda_graph.GraphedProfile): its device, precision and persistent categories, in bytes."""
    device: str
    device_name: str
    precision: str
    n_parameters: int
    parameters: int
    """Weights and module buffers."""
    gradients: int
    """.grad of every parameter after backward."""
    optimizer_state: int
    """Tensors in optimizer.state (Adam: exp_avg, exp_avg_sq, step)."""


@dataclass(frozen=True)
class MemoryProfile(ProfiledStep):
    """One training step's memory. Every *_bytes-like field is in bytes."""
    activations: int
    """Bytes autograd saved for backward, each storage once, parameters excluded, inputs included."""
    activations_by_module: dict[str, int]
    """`activations` split by the model's direct child that saved them ("loss": the loss function)."""
    saved_tensor_saves: int
    """How many times autograd saved a tensor (before counting each storage once)."""
    batch: int
    """Bytes of the tensors in the input batch (device buffers inside it included)."""
    buffers: dict[str, dict[str, Any]]
    """Named RL buffers: bytes and where they live (device or host)."""
    live_before_step: int
    """Bytes of the step's own tensors live when the measured step starts (parameters, optimizer state, batch)."""
    forward_peak: int
    """The model peak of forward + loss."""
    peak: int
    """The model peak of the whole step."""
    loss: float
    peak_method: str
    cuda: dict[str, Any] | None = field(default=None)
    """CUDA only: allocator statistics, NVML's view and the CUDA context."""
    warmup_steps: int | None = None
    """Warm-up steps run before the measured one (fp16: more while the GradScaler skipped them)."""
    optimizer_step_skipped: bool | None = None
    """fp16 only: the GradScaler skipped the measured step's optimizer step: its peak lacks the optimizer's."""
    workspace_bytes: int = 0
    """CUDA: bytes allocated at the step's start that no tensor of the step owns; not in `peak`. 0 on the CPU."""

    @property
    def context_bytes(self) -> int:
        """CUDA: the context (NVML's process figure less the allocator's reserve, after the step); 0 on the CPU."""
        return int((self.cuda or {}).get("context_bytes") or 0)

    @property
    def process_peak(self) -> int:
        return self.peak + self.workspace_bytes + self.context_bytes

    @property
    def device_buffers(self) -> int:
        """Bytes of the named RL buffers that live on the device."""
        return sum(b["device_bytes"] for b in self.buffers.values())

    @property
    def temporaries(self) -> int:
        """What the model peak holds beyond the categories: outputs, intermediates not saved, the
        optimizer's scratch."""
        return max(0, self.peak - (self.parameters + self.gradients + self.optimizer_state
                                   + self.activations + self.device_buffers))

    DERIVED = ("temporaries", "context_bytes", "process_peak")  # written by to_dict, recomputed by from_dict

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {k: getattr(self, k) for k in self.DERIVED}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "MemoryProfile":
        """A profile from to_dict()'s JSON (the derived figures are recomputed, not read)."""
        d = {k: v for k, v in d.items() if k not in cls.DERIVED}
        names = {f.name for f in dataclasses.fields(cls)}
        if unknown := sorted(set(d) - names):
            raise ValueError(f"unknown MemoryProfile field(s) {unknown}; valid: {', '.join(sorted(names))}")
        return cls(**d)


def peak_misses_saved_tensors(d: Mapping[str, Any]) -> bool:
    """Whether a profile dict's peak is under what its own figures say was live at the forward's end (activations
    beside live_before_step, the batch counted once): it missed tensors held outside the measured step, e.g. in
    a CUDA graph pool filled in the warm-up (torch.compile's reduce-overhead). False where a figure is missing."""
    peak, activations, before, batch = (d.get(k) for k in ("peak", "activations", "live_before_step", "batch"))
    return None not in (peak, activations, before, batch) and peak < before + activations - batch


def cuda_block_bytes(tensors, device: torch.device) -> int:
    """What the CUDA caching allocator holds for these tensors: each storage on `device` once, in blocks of
    MIN_BLOCK_BYTES (an empty storage holds none)."""
    storages = {s.data_ptr(): s.nbytes() for s in (t.untyped_storage() for t in tensors if t.device == device)}
    return sum(-(-n // MIN_BLOCK_BYTES) * MIN_BLOCK_BYTES for n in storages.values())


MAX_EXTRA_WARMUP = 20  # fp16 warm-up steps beyond `warmup` while the GradScaler keeps skipping
HISTORY_ENTRIES = 200_000  # allocator trace entries kept (the seed TFT's step makes about 7,000)


def release_memory() -> None:
    """A full garbage collection, then the CUDA allocator's cached blocks handed back (a no-op where CUDA never
    started), so that a next measurement does not count what the last one left."""
    gc.collect()
    torch.cuda.empty_cache()


def record_cuda_history(stacks: str = "python") -> None:
    """Turn on the CUDA allocator's alloc/free history with `stacks`: "python", "all" (Python and C++) or "none"."""
    if stacks not in ("python", "all", "none"):
        raise ValueError(f"stacks must be 'python', 'all' or 'none', not {stacks!r}")
    torch.cuda.memory._record_memory_history(max_entries=HISTORY_ENTRIES, context=None if stacks == "none" else "all",
                                             stacks="python" if stacks == "none" else stacks)


def profile_step(model: torch.nn.Module, batch: Any, loss_fn: Callable[[torch.nn.Module, Any], torch.Tensor],
                 optimizer: torch.optim.Optimizer, precision: str = "fp32", *, warmup: int = 1,
                 buffers: Mapping[str, Any] | None = None, snapshot_path: str | None = None,
                 snapshot_stacks: str = "python") -> MemoryProfile:
    """Warm-up step(s), then one measured training step of `model` on `batch`.

    buffers: named replay/rollout storage, reported on its own line (not part of the step).
    snapshot_path: write the measured step's allocation history there (CUDA: the allocator's snapshot, a pickle
    for https://pytorch.org/memory_viz; CPU: CpuTimeline.write's JSON); foxlib.memory.live_series.load reads
    either. snapshot_stacks: the CUDA history's stacks (record_cuda_history; "none": the series names no owners).
    """
    run = TrainingStep(model, batch, loss_fn, optimizer, precision)  # checks the precision, finds the device
    device = run.device
    is_cuda = device.type == "cuda"
    model.train()

    def warm() -> bool:  # True if the GradScaler skipped its optimizer step
        before = run.scale()
        run(check="warm-up step")
        return run.scaler is not None and run.scale() < before

    skipped = [warm() for _ in range(warmup)]
    # fp16: steps at the scaler's initial scale often overflow and are skipped, making no optimizer state; warm
    # up until one is taken, so that the measured step has the state live from its start
    while skipped and skipped[-1] and len(skipped) < warmup + MAX_EXTRA_WARMUP:
        skipped.append(warm())
    optimizer.zero_grad(set_to_none=True)
    gc.collect()

    scale_before = run.scale()  # lowered by the step if it skips
    own = [*model.parameters(), *model.buffers(), *accounting.iter_tensors(list(optimizer.state.values())),
           *(t for t in accounting.iter_tensors(batch) if t.device == device)]
    own_live = accounting.unique_bytes(own)
    tracker = accounting.SavedTensorTracker(model)
    seen: dict[str, int] = {}

    def on_forward_end(_loss):
        if is_cuda:
            torch.cuda.synchronize(device)
            seen["forward_peak"] = torch.cuda.max_memory_allocated(device)
        seen["activations"], seen["by_module"] = tracker.live_bytes(), tracker.by_module()
        mark_forward_end()  # an annotation in the snapshot's trace or the profiler's events

    def measured_step() -> float:
        return float(run(tracker=tracker, check="measured step", on_forward_end=on_forward_end))

    workspace = 0
    cuda: dict[str, Any] | None = None
    if is_cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        allocated_at_start = torch.cuda.memory_allocated(device)
        # not the step's tensors: cuBLAS workspaces (per stream and thread) held for the process
        workspace = max(0, allocated_at_start - cuda_block_bytes(own, device))
        if snapshot_path:
            record_cuda_history(snapshot_stacks)
        loss = measured_step()
        torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) - workspace
        forward_peak = seen["forward_peak"] - workspace
        if snapshot_path:
            torch.cuda.memory._dump_snapshot(snapshot_path)
            torch.cuda.memory._record_memory_history(enabled=None)
        stats = allocator_stats(device)
        nvml = nvml_view(device)
        cuda = {**stats, "allocated_at_step_start_bytes": allocated_at_start, "nvml": nvml,
                "context_bytes": (nvml["process_used_bytes"] - stats["reserved_bytes"])
                if "process_used_bytes" in nvml else None,
                "fragmentation": (stats["inactive_split_bytes"] / stats["reserved_bytes"])
                if stats["reserved_bytes"] else 0.0,
                "snapshot": snapshot_path}
        live_before = allocated_at_start - workspace
        method = ("CUDA caching allocator: max_memory_allocated() after reset_peak_memory_stats(), less the "
                  "workspaces allocated before the step (workspace_bytes)")
        name = torch.cuda.get_device_name(device)
    else:
        with cpu_allocations() as timeline:
            loss = measured_step()
        forward_peak = own_live + timeline.peak_delta(timeline.forward_end_ns)
        peak = own_live + timeline.peak_delta()
        live_before = own_live
        if snapshot_path:
            timeline.write(snapshot_path, live_at_start=own_live)
        method = ("CPU: tensors live at the start + largest running sum of the CPU allocator's "
                  "allocation events (torch.profiler, profile_memory=True)")
        name = cpu_name()

    return MemoryProfile(
        device=str(device), device_name=name, precision=precision,
        **accounting.step_bytes(model, optimizer, batch),
        activations=seen["activations"],
        activations_by_module=seen["by_module"],
        saved_tensor_saves=tracker.saves,
        buffers=accounting.buffer_bytes(dict(buffers or {})),
        live_before_step=live_before, forward_peak=forward_peak, peak=peak, loss=loss,
        peak_method=method, cuda=cuda,
        optimizer_step_skipped=None if run.scaler is None else run.scale() < scale_before,
        warmup_steps=len(skipped), workspace_bytes=workspace,
    )

