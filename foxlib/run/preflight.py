"""Everything that comes in, checked before anything runs or is written; each failure is a ValueError (exit 2)
whose message names what is valid:
- parameters whose valid set lives in the code (names, types, nan and inf: foxlib.core.parameters): counts,
  presets, precisions, models, strategies, non-empty lists, the encoder length the market data can hold, budgets;
- a measurement file: what its wave's Measurement.from_dict reads, the parameters it was made with, its citations;
- memory: the run's largest training step predicted (nothing allocated) against its device's free memory.
"""
from __future__ import annotations

from contextlib import suppress
from pathlib import Path
from typing import Any

from foxlib.core import provenance, results
from foxlib.core.budgets import load_budgets
from foxlib.core.critical_path import get_wave
from foxlib.core.parameters import ParameterError, read_parameters, resolve
from foxlib.core.schema import WaveMeasurement
from foxlib.memory.devices import resolve_device
from foxlib.memory.step import check_precision
from foxlib.models import ENSEMBLE, MODELS

# counts that must be at least 1, and those that may be 0 (0: "none" or "the default")
POSITIVE = ("batch_size", "encoder_length", "steps", "timing_repeats", "inference_repeats", "accuracy_seeds",
            "accuracy_steps", "accuracy_eval_every", "accuracy_val_windows", "accuracy_batch_size")
NON_NEGATIVE = ("timing_warmup", "accuracy_patience", "cap_bytes", "inference_batch", "seed")
MAX_SEED = 2**32 - 1  # numpy's generators take seeds below 2**32


# what a run needs beyond its largest step's tensors: the allocator's and the predictor's slack, and the
# process itself (interpreter, torch, the kernel, the market data; on CUDA the context is of that order too)
MEMORY_SLACK = 1.10
PROCESS_BYTES = 1_000_000_000


class MemoryRefused(ValueError):
    """The run's predicted peak is more than the free memory of its device."""


def _counts(params: dict[str, Any]) -> None:
    for key in POSITIVE + NON_NEGATIVE:
        value, low = params.get(key), int(key in POSITIVE)
        if isinstance(value, int) and not isinstance(value, bool) and value < low:
            raise ValueError(f"parameter {key!r} must be at least {low}, got {value}")
    if isinstance(params.get("seed"), int) and params["seed"] > MAX_SEED:
        raise ValueError(f"parameter 'seed' must be at most {MAX_SEED}, got {params['seed']}")


def _names(text: str, sep: str = ",") -> list[str]:
    return [x.strip() for x in text.split(sep) if x.strip()]


def _non_empty(params: dict[str, Any]) -> None:
    lists = {"precisions": ("precisions separated by ','", "fp32,fp16,bf16"),
             "models": ("model names separated by ','", ",".join(MODELS)),
             "strategies": ("'all', or strategy names separated by ';'", "all")}
    for key, (what, example) in lists.items():
        if key in params and not _names(params[key], ";" if key == "strategies" else ","):
            raise ValueError(f"parameter {key!r} is empty; it takes {what} (e.g. {key}={example})")


def _encoder_fits_the_data(params: dict[str, Any]) -> None:
    """The longest encoder whose windows exist in both the training and the validation period."""
    if "encoder_length" not in params or "preset" not in params:
        return
    from foxlib.data.market import market_features
    cfg = MODELS["tft"].preset(params["preset"])
    features = market_features(cfg.n_observed)
    longest = min(features.train_end, len(features.dates) - features.train_end - 1) - cfg.decoder_length
    if params["encoder_length"] > longest:
        raise ValueError(f"parameter 'encoder_length' must be at most {longest} trading days (the longest window "
                         f"that fits both the training and the validation period of the market data), "
                         f"got {params['encoder_length']}")


def check(wave_id: str, params: dict[str, Any]) -> Any:
    """Raise a ValueError (or BudgetsError) naming the valid choices for the first bad value. Returns what the
    wave's own check resolved, for check_memory (8.13: measuring.CheckedRun, its TFT resolved once); else None."""
    load_budgets(params.get("budgets_file") or None)
    _counts(params)
    _non_empty(params)
    for preset in [params[k] for k in ("preset", "ensemble_preset") if k in params]:
        for card in MODELS.values():
            card.preset(preset)
    if params.get("accuracy_preset", "auto") != "auto":
        MODELS["tft"].preset(params["accuracy_preset"])
    if "accuracy_target" in params:
        from foxlib.harness.training import check_target
        check_target(params["accuracy_target"])
    for p in [params[k] for k in ("precision", "candidate") if k in params] + _names(params.get("precisions", "")):
        check_precision(p)
    if wave_id == "8.11":
        from foxlib.waves.wave_8_11.measuring import check_precisions
        check_precisions(_names(params["precisions"]), params["candidate"])
        if "tft" not in _names(params.get("models", "tft")):
            raise ValueError(f"parameter 'models' must include tft (the wave's subject), got {params['models']!r}")
    for name in _names(params.get("models", "")):
        MODELS[name]  # noqa: B018 — the registry raises a ValueError naming the valid models
    if "strategies" in params:
        from foxlib.waves.wave_8_12.strategies import select
        select(params["strategies"])
    if params.get("snapshot_path"):
        parent = Path(params["snapshot_path"]).expanduser().resolve().parent
        if not parent.is_dir():
            raise ValueError(f"parameter 'snapshot_path': its folder {parent} does not exist")
    if params.get("measurements"):
        return None  # nothing is measured: runner.plan checked the file and its own parameters (check_measurement)
    if "device" in params:
        resolve_device(params["device"])
    _encoder_fits_the_data(params)
    if wave_id == "8.13":
        from foxlib.waves.wave_8_13.measuring import check_parameters
        return check_parameters(params)
    return None


# ----------------------------------------------------------------------------- measurement files

def check_measurement_data(wave_id: str, data: Any, source: str = "the measurement") -> WaveMeasurement:
    """The wave's records.Measurement of `data`; a ValueError unless it is a wave `wave_id` measurement this code can
    render: its type's own check (the wave's Measurement.from_dict), then the parameters it was made with and the
    files it cites."""
    wave = get_wave(wave_id)
    measurement = wave.part("records").Measurement.from_dict(data, source)
    mp = measurement.measure_parameters
    if not isinstance(mp, dict):
        raise ValueError(f"{source}: measure_parameters must be an object of the wave's parameters")
    try:
        made_with = resolve(read_parameters(wave.notebook), mp)
    except ParameterError as exc:
        raise ValueError(f"{source}: the parameters it was measured with do not check out: {exc}") from None
    _counts(made_with)
    provenance.verify(measurement.citations())
    return measurement


def check_measurement(wave_id: str, path: str | Path) -> WaveMeasurement:
    """The measurement file at `path`, read, checked and typed (check_measurement_data)."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"measurements={path} is a folder; give the measurement file in it (a report keeps its own "
                         "as measurement.json; scripts/h200.sh writes wave-<N>.json)")
    if not path.is_file():
        raise ValueError(f"measurement file {path} not found (make one with `python -m foxlib measure "
                         f"--wave {wave_id} --out FILE`)")
    return check_measurement_data(wave_id, results.read_json(path), str(path))


# ----------------------------------------------------------------------------- memory

def free_bytes(device) -> tuple[int | None, str]:
    """(free bytes, what that figure is) of the device a run will use: the CPU's MemAvailable; on CUDA NVML's
    free figure (it creates no CUDA context in this process, beside the run's own), else cudaMemGetInfo."""
    if device.type == "cuda":
        from foxlib.memory.cuda import nvml_view
        view = nvml_view(device)
        if view.get("available"):
            return view["device_total_bytes"] - view["device_used_bytes"], "free GPU memory (NVML)"
        import torch
        return int(torch.cuda.mem_get_info(device)[0]), "free GPU memory (cudaMemGetInfo)"
    with suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024, "available RAM (MemAvailable, /proc/meminfo)"
    return None, "available RAM (unknown: no /proc/meminfo)"


def predicted_peak(wave_id: str, params: dict[str, Any], device, checked: Any = None) -> tuple[int, str]:
    """(bytes, what) of the run's largest training step, predicted on fake tensors: the TFT at the run's
    configuration (waves 8.10-8.12), the sum of the ensemble's four step peaks (8.13: the TFT of `checked`, what
    check returned, else checked here)."""
    from foxlib.memory import predict_step
    tft = MODELS["tft"]
    target = "cuda" if device.type == "cuda" else "cpu"
    seed = params.get("seed", 0)
    if wave_id == "8.13":
        from foxlib.waves.wave_8_13.measuring import check_parameters
        t = (checked or check_parameters(params)).tft
        total = 0
        for name in ENSEMBLE:
            cfg, precision = (t.config, t.run.precision) if name == "tft" else \
                (MODELS[name].preset(params["preset"]), params["ensemble_precision"])
            total += predict_step(MODELS[name], cfg, precision=precision, target=target, seed=seed).peak
        return total, f"the ensemble's four training steps together (preset {params['preset']})"
    cfg = tft.config(params["preset"], batch_size=params["batch_size"], encoder_length=params["encoder_length"])
    precision = params.get("precision", "fp32")
    peak = predict_step(tft, cfg, precision=precision, target=target, seed=seed).peak
    return peak, (f"the TFT's training step at preset {params['preset']}, batch {params['batch_size']}, "
                  f"encoder length {params['encoder_length']}, {precision}")


def check_memory(wave_id: str, params: dict[str, Any], force: bool = False,
                 checked: Any = None) -> dict[str, Any] | None:
    """MemoryRefused, unless `force`, when the run's predicted peak is more than its device's free memory;
    None when nothing is measured (a measurement file is rendered). `checked`: what check returned for these
    parameters (runner.Plan.checked), so that nothing it resolved is resolved again."""
    if params.get("measurements"):
        return None
    device = resolve_device(params.get("device", "auto"))
    predicted, what = predicted_peak(wave_id, params, device, checked)
    needed = int(predicted * MEMORY_SLACK) + PROCESS_BYTES
    free, free_what = free_bytes(device)
    out = {"predicted_bytes": predicted, "needed_bytes": needed, "predicted": what, "free_bytes": free,
           "free": free_what}
    if free is not None and needed > free and not force:
        raise MemoryRefused(
            f"wave {wave_id} would not fit: {what} is predicted to peak at {predicted / 1e6:,.1f} MB "
            f"(with {MEMORY_SLACK - 1:.0%} slack and {PROCESS_BYTES / 1e6:,.0f} MB for the process: "
            f"{needed / 1e6:,.1f} MB), more than the {free / 1e6:,.1f} MB of {free_what} on {device}; make it "
            "smaller (batch_size, encoder_length, preset) or run anyway with --force (FOXLIB_FORCE=1)")
    return out
