"""`measure()`, the wave's one entry that runs models, returning records.Measurement (bytes). On CUDA every
library is warmed up (`warm_up`), the context measured and the cap set, the ensemble trained interleaved
(`train_cuda`) and served all at once (serve.py) with NVML sampled; on the CPU the run is accounted (`train_cpu`)."""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import math
import time
from typing import Any, Mapping

import torch

from foxlib.core.card_classes import CardClass, classes_for, get_class, nearest_class
from foxlib.core.progress import progress
from foxlib.core.results import measures
from foxlib.harness.measure_step import measure_model
from foxlib.harness.step_options import StepOptions
from foxlib.harness.timing import Timing, sync_device
from foxlib.memory.cuda import allocator_stats, use_cublas_workspace
from foxlib.memory.devices import describe, environment, resolve_device, short_name
from foxlib.memory.profile import release_memory
from foxlib.memory.step import check_precision
from foxlib.models import ENSEMBLE, MODELS
from foxlib.waves.wave_8_13.cap import (GIB, NOT_ENFORCED, account_training, cap_arithmetic, cuda_oom, end_view,
                                        is_oom, measure_context, one_line, reset_peak)
from foxlib.waves.wave_8_13.members import Member, free_members, load_member, static_footprints, step_member
from foxlib.waves.wave_8_13.nvml import NvmlProcessReader, Sampler, nvml_samples
from foxlib.waves.wave_8_13.records import SCHEMA_VERSION, ClassFacts, Measurement, TftRun
from foxlib.waves.wave_8_13.serve import Together, forward, infer, inference_input
from foxlib.waves.wave_8_13.tft import ResolvedTft, resolve_tft

INFERENCE_MODES = ("auto", "streams", "threads")
WARMUP_TRAINING_STEPS = 3  # fp16: the GradScaler may skip the first step, which would leave Adam's kernels unloaded


def resolve_class(card_class: str, own: CardClass) -> CardClass:
    """The card class a run validates: "auto" is the device's own, `own` (foxlib.core.card_classes.nearest_class);
    another GPU class is emulated on this GPU, never a CPU class on a GPU or a GPU class on the CPU (ValueError)."""
    if card_class == "auto":
        return own
    chosen = get_class(card_class)
    if chosen.device_type != own.device_type:
        raise ValueError(f"card_class {card_class!r} is a {chosen.device_type} class; this run is on {own.device_type}"
                         f": valid here: auto, {', '.join(c.name for c in classes_for(own.device_type))}")
    return chosen


def class_facts(chosen: CardClass, own: CardClass, tft: TftRun, ensemble_precision: str) -> ClassFacts:
    """What the run enforces of the class's limits, and what it cannot emulate (`own`: the device's own class);
    ValueError where the TFT or the ensemble asks for what the class lacks (bf16 on a GPU without it)."""
    for what, precision, tf32 in (("the TFT", tft.precision, tft.step_options.tf32),
                                  ("DQN, PPO and Mamba-2", ensemble_precision, False)):
        if not chosen.allows(precision, tf32):
            raise ValueError(f"{what} in {precision}{' with TF32' if tf32 else ''} cannot run on the "
                             f"{chosen.name} class ({chosen.title}): it runs {', '.join(chosen.precisions)}"
                             + ("" if chosen.tf32 else ", no TF32"))
    enforced = [f"precisions limited to {', '.join(chosen.precisions)} (the TFT {tft.precision}, the others "
                f"{ensemble_precision}: checked before the run)"]
    if chosen.device_type == "cuda" and not chosen.tf32:
        enforced.append("TF32 off for the whole run (torch.backends.cuda.matmul.allow_tf32 = "
                        "torch.backends.cudnn.allow_tf32 = False)")
    emulated = chosen.name != own.name
    return ClassFacts(chosen.name, chosen.title, own.name, emulated, enforced,
                      ("the target's SM count and clocks (speed is this GPU's, not the target's) and its "
                       "CUDA context and cuBLAS workspaces: this GPU's are used, measured here, which bounds "
                       "them from above (a newer GPU loads more kernels into its context)") if emulated else "")


@contextlib.contextmanager
def class_limits(chosen: CardClass, dev: torch.device):
    """TF32 off while the run lasts where the class has none; restored after."""
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    if dev.type == "cuda" and not chosen.tf32:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


@dataclasses.dataclass(frozen=True)
class CheckedRun:
    """measure's parameters checked (check_parameters), with what the run takes from them: resolved once, so that
    the preflight (foxlib.run.preflight) predicts the TFT it checked, the one measure validates."""
    device: torch.device
    inference_mode: str
    """"auto" resolved: streams on CUDA, threads on the CPU."""
    tft: ResolvedTft
    """The TFT for the run's card class (tft.resolve_tft)."""
    card_class: CardClass
    class_facts: ClassFacts


def check_parameters(params: Mapping[str, Any]) -> CheckedRun:
    """The values of measure's parameters (in `params`; seed is any integer) that `measure` would reject, the TFT
    configuration included, before anything runs: a ValueError naming the valid ones. Returns what the run takes
    from them (CheckedRun)."""
    steps, inference_repeats, inference_batch = params["steps"], params["inference_repeats"], params["inference_batch"]
    card_gb, cap_bytes, inference_mode = params["card_gb"], params["cap_bytes"], params["inference_mode"]
    if steps < 1 or inference_repeats < 1:
        raise ValueError(f"steps and inference_repeats must be at least 1, got {steps} and {inference_repeats}")
    if not card_gb > 0 or cap_bytes < 0 or inference_batch < 0:
        raise ValueError(f"card_gb must be positive and cap_bytes, inference_batch not negative; "
                         f"got {card_gb}, {cap_bytes}, {inference_batch}")
    if inference_mode not in INFERENCE_MODES:
        raise ValueError(f"unknown inference_mode {inference_mode!r}; valid: {', '.join(INFERENCE_MODES)}")
    check_precision(params["ensemble_precision"])
    for card in MODELS.values():
        card.preset(params["preset"])
    dev = resolve_device(params["device"])
    is_cuda = dev.type == "cuda"
    mode = inference_mode if inference_mode != "auto" else ("streams" if is_cuda else "threads")
    if mode == "streams" and not is_cuda:
        raise ValueError("inference_mode 'streams' needs CUDA; on the CPU use threads (or auto)")
    own = nearest_class(describe(dev).capability, dev.type)  # a Pascal, or unknown: the fp16 class, as wave 8.12
    chosen = resolve_class(params["card_class"], own)
    tft = resolve_tft(params["tft_config"], params["preset"], short_name(dev), card_class=chosen.name)
    return CheckedRun(dev, mode, tft, chosen, class_facts(chosen, own, tft.run, params["ensemble_precision"]))


@measures(Measurement)
def measure(*, preset: str = "seed", tft_config: str = "auto", steps: int = 20, card_gb: float = 4.0,
            cap_bytes: int = 0, inference_repeats: int = 100, inference_batch: int = 0,
            inference_mode: str = "auto", ensemble_precision: str = "fp32", device: str = "auto",
            seed: int = 0, card_class: str = "auto") -> dict[str, Any]:
    """Train the four models interleaved under the card's cap, then serve them concurrently.

    card_gb: the card in GiB; the cap is that minus the CUDA context. cap_bytes > 0 sets the cap directly (the
    context on top): an out-of-memory error is recorded ("oom"), never raised. card_class: "auto" (this device's
    own) or another GPU class, emulated with its limits enforced and 8.12's recommendation for it."""
    checked = check_parameters(locals())
    with class_limits(checked.card_class, checked.device):
        out = _run(checked.device, checked.inference_mode, checked.tft, preset, steps, card_gb, cap_bytes,
                   inference_repeats, inference_batch, ensemble_precision, seed)
    out["card_class"] = checked.class_facts
    return out


def _run(dev, mode, resolved: ResolvedTft, preset, steps, card_gb, cap_bytes, inference_repeats, inference_batch,
         ensemble_precision, seed) -> dict[str, Any]:
    is_cuda = dev.type == "cuda"
    tft = resolved.run
    # before CUDA starts here: cuBLAS reads its workspace size once (foxlib.memory.cuda.use_cublas_workspace)
    workspace = use_cublas_workspace(tft.cublas_workspace, dev) if tft.cublas_workspace and is_cuda else None
    order = [n for n in ENSEMBLE if n in MODELS]
    graph_mode = bool(tft.cuda_graph) and is_cuda  # every model captured where it can be (members.py)
    members = [Member(n, resolved.config if n == "tft" else MODELS[n].preset(preset),
                       tft.precision if n == "tft" else ensemble_precision, cuda_graph=graph_mode,
                       options=tft.step_options if n == "tft" else StepOptions())
               for n in order]
    card = int(round(card_gb * GIB))
    out: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "context": None, "context_before_warmup": None, "warmup": None,
        "step_profiles": None, "device": describe(dev), "environment": environment(), "order": order,
        "steps": steps, "tft": tft,
        "graph_mode": {"asked": True, "on": graph_mode,
                       "why": "wave 8.12 recommended a CUDA-graph strategy: every model's training step and "
                              "inference forward captured where it can be" if graph_mode else
                              "a CUDA graph needs a CUDA device: eager steps"} if tft.cuda_graph else None,
        "cublas_workspace": workspace or None,
        "depends_on": list(resolved.depends_on),
        "models": {m.name: {"title": m.card.title, "precision": m.precision, "config": dataclasses.asdict(m.cfg),
                            "preset": preset} for m in members},
    }
    units = len(order) * (steps + (0 if is_cuda else 1) + 1) + 1
    sampler = plan = None
    with progress(units, "wave 8.13") as bar, contextlib.ExitStack() as stack:
        if is_cuda:
            bar.describe("warming up every library the run uses, then measuring the CUDA context")
            out["context_before_warmup"] = measure_context(dev)
            reader = NvmlProcessReader(dev)  # NVML opened before the context is measured
            stack.callback(reader.close)
            out["warmup"] = warm_up(members, dev, mode, inference_batch, seed)
            out["context"] = context = measure_context(dev)
            total = torch.cuda.get_device_properties(dev).total_memory
            arith = cap_arithmetic(card, context.context_bytes, total, cap_bytes)
            out["cap"] = {**arith, "reserved_at_cap_bytes": torch.cuda.memory_reserved(dev), "enforced": True,
                          "how": f"torch.cuda.set_per_process_memory_fraction({arith['fraction']:.6f}) = cap / "
                                 f"device memory; the CUDA context ({context.how}, after the warm-up) "
                                 "is outside the cap"}
            torch.cuda.set_per_process_memory_fraction(arith["fraction"], dev)
            sampler = Sampler(reader)
        else:
            cap = cap_bytes or card
            out["cap"] = {"card_bytes": card, "context_bytes": 0, "cap_bytes": cap, "fraction": None,
                          "override": bool(cap_bytes), "device_total_bytes": None, "limit_bytes": cap,
                          "enforced": False,
                          "how": f"{NOT_ENFORCED}: the CPU has no allocator cap and no CUDA context; each model's "
                                 "training step measured alone (foxlib.harness.measure_step.measure_model), the "
                                 "interleaved run accounted from those measurements"}
            out["step_profiles"] = profiles = {}
            for m in members:
                bar.describe(f"measuring one {m.name} step alone ({m.precision})")
                profiles[m.name] = measure_model(m.name, m.cfg, dev, m.precision, seed)["profile"]
                bar.advance()
            out["nvml"] = {"applicable": False, "note": "not applicable on the CPU: no NVML, no CUDA context",
                           "interval_s": None, "samples": []}
            plan = account_training(profiles, order, steps, cap)
        try:
            with sampler or contextlib.nullcontext():
                if sampler is not None:
                    sampler.phase = "training"
                out["training"] = (train_cuda(members, steps, dev, seed, bar, sampler) if is_cuda else
                                   train_cpu(members, plan, steps, dev, seed, bar))
                if sampler is not None:
                    sampler.phase = "inference"
                out["inference"] = infer(members, dev, mode, inference_repeats, inference_batch, seed,
                                         out["cap"]["cap_bytes"], bar, sampler)
        finally:
            free_members(members, dev)
            if is_cuda:
                torch.cuda.set_per_process_memory_fraction(1.0, dev)
                release_memory()
    if is_cuda:
        out["nvml"] = nvml_samples(sampler, reader.note)
        if graph_mode:
            out["graph_mode"] |= {"training": {m.name: m.graph_note for m in members},
                                  "inference": {m.name: m.inference_note or "eager" for m in members}}
    out["training"]["per_model"] = summarise_steps(out["training"]["steps"], order)
    out["training"]["enforced"] = out["inference"]["enforced"] = is_cuda
    return out


def warm_up(members: list[Member], device: torch.device, mode: str, batch: int, seed: int) -> dict[str, Any]:
    """Everything the run will use, once, uncapped, before the CUDA context is measured: each model's training
    steps and inference forward, then one round of all at once in `mode`. Kernels and library handles load
    lazily into the context: measured before this, it is too small and a cap of card − context lets the process
    outgrow the card. Everything is freed afterwards but the cuBLAS workspaces, one per stream used."""
    t0 = time.perf_counter()
    done, fns, oom = [], {}, None
    try:
        for m in members:  # one model trained at a time: the warm-up never holds more than the run does
            load_member(m, device, seed)
            for _ in range(WARMUP_TRAINING_STEPS):
                step_member(m, device)
            x = inference_input(m, device, batch, seed)
            m.batch = m.optimizer = None
            m.model.eval()
            fns[m.name] = forward(m, x, device)
            fns[m.name]()
            del x
            sync_device(device)
            done.append(f"{m.name} ({m.precision}): {WARMUP_TRAINING_STEPS} training steps, one inference forward")
            release_memory()
        with Together(fns, mode, device) as round_:
            round_()
        sync_device(device)
        done.append(f"one round of all {len(fns)} models at once ({mode})")
    except RuntimeError as exc:  # OutOfMemoryError is one: the run itself will meet it under the cap
        if not is_oom(exc):
            raise
        oom = one_line(exc, 300)
    fns.clear()
    free_members(members, device)
    return {"seconds": time.perf_counter() - t0, "oom": oom,
            "what": done + ["NVML opened", "CUDA graphs captured as the run captures them"
                            if any(m.cuda_graph for m in members) else "no CUDA graph (this run's steps are eager)"]
            + ([f"stopped by an out-of-memory error, the context may be measured short: {oom}"] if oom else []),
            "allocated_after_bytes": torch.cuda.memory_allocated(device),
            "how": "allocated after the warm-up, everything freed: the cuBLAS workspaces, one per stream used "
                   "(held by the caching allocator, inside the cap)"}


def summarise_steps(steps: list[dict[str, Any]], order: list[str]) -> dict[str, dict[str, Any]]:
    """Per model, from the interleaved run's step records: steps run, losses, step time, peaks."""
    out = {}
    for name in order:
        mine = [s for s in steps if s["model"] == name]
        losses = [s["loss"] for s in mine if s.get("loss") is not None]
        out[name] = {
            "steps_run": len(mine),
            "first_loss": losses[0] if losses else None,
            "last_loss": losses[-1] if losses else None,
            "non_finite_losses": sum(1 for v in losses if not math.isfinite(v)),
            "median_step_s": Timing(name, tuple(s["seconds"] for s in mine)).median_s if mine else None,
            "peak_bytes": max((s["peak_bytes"] for s in mine), default=None),
            "reserved_peak_bytes": max((s["reserved_peak_bytes"] for s in mine
                                        if s.get("reserved_peak_bytes") is not None), default=None),
            "step_increment_bytes": max((s["peak_bytes"] - s["start_bytes"] for s in mine), default=None),
        }
    return out


def train_cuda(members: list[Member], steps: int, device: torch.device, seed: int, bar,
               sampler: Sampler | None = None) -> dict[str, Any]:
    """The interleaved run under the cap: an out-of-memory error recorded, never raised."""
    out: dict[str, Any] = {"steps": [], "oom": None}
    reset_peak(device)
    current = None
    try:
        for m in members:
            current = m.name
            bar.describe(f"loading {m.name} on {device} under the cap")
            load_member(m, device, seed)
        sync_device(device)
    except RuntimeError as exc:  # OutOfMemoryError is one
        if not is_oom(exc):
            raise
        out["oom"] = cuda_oom(exc, "setup", current, None, device)
    st = allocator_stats(device)
    out["setup"] = {"bytes": st["allocated_bytes"], "peak_bytes": st["allocated_peak_bytes"],
                    "reserved_peak_bytes": st["reserved_peak_bytes"]}
    peak_alloc, peak_res = st["allocated_peak_bytes"], st["reserved_peak_bytes"]
    for s in range(1, steps + 1):
        if out["oom"] is not None:  # at loading or at the previous step
            break
        for m in members:
            bar.describe(f"training step {s}/{steps} of {m.name} (interleaved, capped)")
            reset_peak(device)
            start = torch.cuda.memory_allocated(device)
            t0 = time.perf_counter()
            try:
                loss = step_member(m, device)
                sync_device(device)
            except RuntimeError as exc:
                if not is_oom(exc):
                    raise
                out["oom"] = cuda_oom(exc, "training", m.name, s, device)
                break
            seconds = time.perf_counter() - t0
            if sampler is not None:
                sampler.sample()
            st = allocator_stats(device)
            peak_alloc, peak_res = max(peak_alloc, st["allocated_peak_bytes"]), max(peak_res, st["reserved_peak_bytes"])
            out["steps"].append({"model": m.name, "step": s, "loss": loss, "seconds": seconds, "start_bytes": start,
                                 "peak_bytes": st["allocated_peak_bytes"],
                                 "reserved_peak_bytes": st["reserved_peak_bytes"]})
            bar.advance()
    if out["oom"] is not None:
        gc.collect()  # the failed step's tensors were held by the exception's frames
        peak_alloc = max(peak_alloc, out["oom"]["peak_allocated_bytes"])
        peak_res = max(peak_res, out["oom"]["peak_reserved_bytes"])
    out["models"] = static_footprints(members, device)
    out["peak_allocated_bytes"], out["peak_bytes"] = peak_alloc, peak_res
    out["peak_how"] = "CUDA allocator, capped: largest reserved (the figure against the cap); allocated beside it"
    end_view(out, device)
    return out


def train_cpu(members: list[Member], plan: dict[str, Any], steps: int, device: torch.device, seed: int,
              bar) -> dict[str, Any]:
    """The real interleaved run on the CPU; memory from the accounting `plan`, the run stopping where it does."""
    out: dict[str, Any] = {"steps": [], "oom": plan["oom"],
                           "setup": {"bytes": plan["setup_bytes"], "peak_bytes": plan["setup_bytes"],
                                     "reserved_peak_bytes": None}}
    if plan["oom"] is None or plan["oom"]["phase"] != "setup":
        for m in members:
            bar.describe(f"loading {m.name} on the CPU")
            load_member(m, device, seed)
        by_name = {m.name: m for m in members}
        for ev in plan["steps"]:
            bar.describe(f"training step {ev['step']}/{steps} of {ev['model']} (interleaved)")
            t0 = time.perf_counter()
            loss = step_member(by_name[ev["model"]], device)
            out["steps"].append({**ev, "loss": loss, "seconds": time.perf_counter() - t0, "reserved_peak_bytes": None})
            bar.advance()
    out["models"] = static_footprints(members, device)
    peaks = [plan["setup_bytes"]] + [s["peak_bytes"] for s in plan["steps"]]
    out["peak_allocated_bytes"] = out["peak_bytes"] = max(peaks)
    out["peak_how"] = (f"{NOT_ENFORCED}: each model's measured step peak plus what the other models keep "
                       "between their steps (weights, device batch/buffers, Adam state once stepped)")
    return out
