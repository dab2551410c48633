"""Peer benchmark: pytorch-forecasting's TemporalFusionTransformer against foxlib's TFT.

Both models at the same configuration (hidden size, heads, variables, encoder and decoder
lengths, batch, quantiles, dropout, one LSTM layer), on the same training windows of the real
S&P 500 / NASDAQ features, in one process run:

- parameters (count and bytes), activations saved for backward and the peak of one training
  step, measured by foxlib's `profile_step` (forward + loss, backward, Adam step; fp32 unless
  the variant says otherwise), each model profiled alone;
- step time: median of `--repeats` full training steps, the variants alternating in one run
  (`foxlib.harness.timing.time_alternating`).

Variants: `peer` (pytorch-forecasting, fp32), `foxlib_default` (the same config, plain, fp32)
and `foxlib_best` (foxlib's best configuration from wave 8.12: `--best` JSON, else
`reports/<device>/wave-8.12/results.json`'s "recommended", else bf16 + memory_efficient +
checkpointing="blocks").

    python benchmarks/peer_tft.py --device auto --preset seed --repeats 10 --out results.json
    python benchmarks/peer_tft.py --render results.json --html reports/cpu/peer-benchmark.html

Measuring needs pytorch-forecasting (the separate `.venv-peer`, requirements-peer.txt); rendering
a page from a results file does not. Progress goes to stderr; the summary table is printed last.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import datetime as dt
import html
import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere, foxlib installed or not
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from foxlib.core.results import read_json, write_json  # noqa: E402

MB = 10**6
VARIANTS = ("peer", "foxlib_default", "foxlib_best")
LABELS = {"peer": "pytorch-forecasting TFT", "foxlib_default": "foxlib TFT, default",
          "foxlib_best": "foxlib TFT, best (8.12)"}
DEFAULT_BEST = {"precision": "bf16", "memory_efficient": True, "checkpointing": "blocks"}
# fields of a best configuration that keep the computed function (and the comparison) at equal configuration
SAME_FUNCTION_FIELDS = {"memory_efficient", "checkpointing", "vsn_chunk"}
CALENDAR = ("day_of_week", "month", "day_of_month", "week_of_year")  # foxlib.data.market._known's order
# targets: foxlib's default must be no heavier and no slower than the peer; its best at most half
TARGETS = {"foxlib_default": 1.0, "foxlib_best": 0.5}


def log(msg: str) -> None:
    print(f"[peer_tft {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- configuration

def parse_json_option(text: str | None, what: str) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SystemExit(f"{what} is not valid JSON ({exc}): {text!r}") from None
    if not isinstance(value, dict):
        raise SystemExit(f"{what} must be a JSON object, got {text!r}")
    return value


# what the peer and both foxlib variants must share (the peer is built from these)
SAME_CONFIGURATION_FIELDS = ("hidden_size", "num_heads", "n_observed", "encoder_length", "decoder_length",
                             "batch_size", "dropout", "quantiles")


def best_configuration(option: dict[str, Any] | None, device_short: str, reports_dir: Path) -> dict[str, Any]:
    """{"precision", "tft_overrides", "source"}: --best, else wave 8.12's recommendation, else DEFAULT_BEST."""
    if option is not None:
        spec, source = dict(option), "--best option"
    else:
        path = reports_dir / device_short / "wave-8.12" / "results.json"
        rec = None
        if path.exists():
            try:
                rec = read_json(path).get("recommended")
            except ValueError as exc:
                log(f"ignoring {path}: {exc}")
        if rec and rec.get("precision"):
            spec = {"precision": rec["precision"], **(rec.get("tft_overrides") or {})}
            source = f"{path} (recommended strategy: {rec.get('strategy')})"
        else:
            spec, source = dict(DEFAULT_BEST), f"built-in default (no recommendation in {path})"
    precision = spec.pop("precision", "fp32")
    overrides = dict(spec.pop("tft_overrides", {}) or {})
    overrides.update(spec)  # --best may give the overrides flat, as in DEFAULT_BEST
    return {"precision": precision, "tft_overrides": overrides, "source": source}


def foxlib_configs(preset: str, config_overrides: dict[str, Any], best: dict[str, Any]):
    from foxlib.models import MODELS
    card = MODELS["tft"]
    base = card.config(preset, **config_overrides)
    # plain: no checkpointing, no batched GRNs, whatever the preset says
    default = dataclasses.replace(base, checkpointing="none", memory_efficient=False)
    from foxlib.waves.wave_8_12 import configure
    best_cfg = configure(default, best["tft_overrides"])
    changed = [f for f in SAME_CONFIGURATION_FIELDS if getattr(best_cfg, f) != getattr(default, f)]
    if changed:  # e.g. 8.12's "batch ÷4": a lighter model of another size is not the peer's configuration
        raise SystemExit(f"the best configuration ({best['source']}) changes {', '.join(changed)}: the peer runs the "
                         f"same configuration, so pass --best with precision and memory options only")
    return card, default, best_cfg


# ----------------------------------------------------------------------------- data

def market_frame(n_observed: int):
    """The training period of foxlib's market features in long format, one row per (series, day).

    Columns: series (static categorical), time_idx, target (the day's log return in percent: the
    return from the previous close, which is what foxlib's window predicts at that decoder day),
    the four calendar features (known) and the n_observed observed features (unknown)."""
    import pandas as pd

    from foxlib.data.market import SERIES, TARGET_SCALE, market_features
    f = market_features(n_observed)
    n = f.train_end
    frames = []
    for s, name in enumerate(SERIES):
        cols: dict[str, Any] = {"series": name, "time_idx": np.arange(n)}
        ret = np.zeros(n)  # day 0 has no previous close; it is never a decoder day (encoder_length >= 1)
        ret[1:] = f.next_return[s, : n - 1] * TARGET_SCALE
        cols["target"] = ret
        for j, c in enumerate(CALENDAR):
            cols[c] = f.calendar[:n, j]
        for j, c in enumerate(f.names):
            cols[c] = f.observed[s, :n, j]
        frames.append(pd.DataFrame(cols))
    df = pd.concat(frames, ignore_index=True)
    df["series"] = df["series"].astype("category")
    return df, list(f.names)


def peer_dataset(cfg):
    """pytorch-forecasting's TimeSeriesDataSet over the same windows as foxlib's MarketWindows("train")."""
    from pytorch_forecasting import TimeSeriesDataSet
    df, observed = market_frame(cfg.n_observed)
    reals = [*CALENDAR, *observed, "relative_time_idx"]
    return TimeSeriesDataSet(
        df, time_idx="time_idx", target="target", group_ids=["series"],
        min_encoder_length=cfg.encoder_length, max_encoder_length=cfg.encoder_length,
        min_prediction_length=cfg.decoder_length, max_prediction_length=cfg.decoder_length,
        static_categoricals=["series"],
        time_varying_known_reals=list(CALENDAR),          # + relative_time_idx: 5 known, as foxlib's N_KNOWN
        time_varying_unknown_reals=observed,
        add_relative_time_idx=True,                       # the horizon index's counterpart
        target_normalizer=None,                           # identity: foxlib's targets are not rescaled either
        scalers={c: None for c in reals},                 # identity: the features are already z-scored
    )


def same_batches(cfg, ds, seed: int):
    """foxlib's batch and the peer's (x, y) for the same `batch_size` training windows.

    The windows are those foxlib's example_batch draws (MarketWindows.sample with `seed`); the peer's
    samples are looked up by (series, first day) and collated by the dataset. Inputs are checked equal."""
    from foxlib.data.market import SERIES, MarketWindows
    windows = MarketWindows(cfg.n_observed, cfg.encoder_length, cfg.decoder_length, "train")
    rows = np.random.default_rng(seed).integers(0, len(windows), size=cfg.batch_size)  # as sample()
    fox = windows.get(rows)
    decoded = ds.decoded_index
    lookup = {(str(s), int(t)): i for i, (s, t) in enumerate(zip(decoded["series"], decoded["time_idx_first"]))}
    picked = [(SERIES[s], int(t0)) for s, t0 in windows.index[rows]]
    missing = [p for p in picked if p not in lookup]
    if missing:
        raise RuntimeError(f"windows {missing[:3]} are not in the peer's dataset: the two data sets differ")
    x, y = ds._collate_fn([ds[lookup[p]] for p in picked])
    check_same_inputs(fox, x, y, ds, cfg)
    return fox, (x, y), [{"series": s, "first_day": t} for s, t in picked]


def check_same_inputs(fox, x, y, ds, cfg) -> None:
    te = cfg.encoder_length
    idx = {name: i for i, name in enumerate(ds.reals)}
    observed = [n for n in ds.reals if n not in CALENDAR and n != "relative_time_idx"]
    cal = [idx[c] for c in CALENDAR]
    cont = torch.cat([x["encoder_cont"], x["decoder_cont"]], dim=1)
    pairs = {
        "observed (encoder)": (fox["observed"], x["encoder_cont"][..., [idx[n] for n in observed]]),
        "calendar (encoder and decoder)": (fox["known"][..., :4], cont[..., cal]),
        "target (decoder)": (fox["target"], y[0]),
    }
    for what, (a, b) in pairs.items():
        if a.shape != b.shape or not torch.allclose(a.float(), b.float(), rtol=1e-6, atol=1e-6):
            raise RuntimeError(f"foxlib's and the peer's batches differ in {what}: "
                               f"shapes {tuple(a.shape)} vs {tuple(b.shape)}")
    if x["encoder_cont"].shape[1] != te:
        raise RuntimeError("the peer's encoder length differs from foxlib's")


def check_recipe_batch(batch: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    """foxlib.harness.recipe's batch must be the windows compared with the peer's (same keys, equal tensors)."""
    if set(batch) != set(expected) or not all(torch.equal(batch[k].cpu(), expected[k].cpu()) for k in batch):
        raise RuntimeError("foxlib.harness.recipe's batch differs from the windows given to the peer: the recipe's "
                           "example_batch no longer draws the windows same_batches picks")


def to_device(obj, device):
    if torch.is_tensor(obj):
        return obj.to(device)
    if isinstance(obj, dict):
        return {k: to_device(v, device) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device(v, device) for v in obj)
    return obj


# ----------------------------------------------------------------------------- models

def build_peer(ds, cfg):
    """pytorch-forecasting's TFT at foxlib's configuration (see SAME_CONFIGURATION)."""
    from pytorch_forecasting import TemporalFusionTransformer
    from pytorch_forecasting.metrics import QuantileLoss
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's save_hyperparameters notes about loss/logging_metrics
        return TemporalFusionTransformer.from_dataset(
            ds, hidden_size=cfg.hidden_size, attention_head_size=cfg.num_heads,
            hidden_continuous_size=cfg.hidden_size,              # per-variable GRNs at full width d, as foxlib's
            embedding_sizes={"series": (2, cfg.hidden_size)},    # the static embedding at width d, as foxlib's
            dropout=cfg.dropout, loss=QuantileLoss(quantiles=list(cfg.quantiles)),
            lstm_layers=1, learning_rate=cfg.lr)


def peer_loss(model, batch):
    """What the peer's training_step back-propagates: its loss metric on its forward's prediction."""
    x, y = batch
    return model.loss(model(x).prediction, y)


def fox_loss(model, batch):
    from foxlib.models.tft import loss
    return loss(model, batch)


def by_block(model) -> dict[str, int]:
    """Parameter count per top-level child (shared modules counted once, under their first name)."""
    counts: dict[str, int] = collections.Counter()
    for name, p in model.named_parameters():  # named_parameters de-duplicates shared parameters
        counts[name.split(".")[0]] += p.numel()
    return dict(counts)


def parameter_summary(model) -> dict[str, Any]:
    from foxlib.memory import accounting
    return {"n_parameters": sum(p.numel() for p in model.parameters()),
            "parameter_bytes": accounting.parameter_bytes(model), "by_block": by_block(model)}


def make_step(model, batch, loss_fn, optimizer, precision: str, device) -> Callable[[], None]:
    """One full training step (forward + loss, backward, optimizer step), for timing."""
    from foxlib.memory.profile import training_step_fn
    return training_step_fn(model, batch, loss_fn, optimizer, precision, device)


# ----------------------------------------------------------------------------- notes

def same_configuration(cfg) -> str:
    return (f"Both models: hidden size d = {cfg.hidden_size} everywhere (the peer's hidden_continuous_size = d, "
            f"so its per-variable GRNs and real-variable prescalers run at d like foxlib's, and its series-id "
            f"embedding has width d), {cfg.num_heads} attention heads, one LSTM layer, dropout {cfg.dropout}, "
            f"quantiles {list(cfg.quantiles)}; the same variables: 1 static categorical (series id), 5 known reals "
            f"(4 calendar features + a relative-time index: the peer's relative_time_idx, foxlib's horizon index), "
            f"{cfg.n_observed} observed reals (unknown in the future); encoder {cfg.encoder_length} days, decoder "
            f"{cfg.decoder_length} days; the same {cfg.batch_size} training windows (inputs and targets checked "
            f"equal); Adam at lr {cfg.lr}. The peer runs fp32, its default.")


def peer_architecture(peer) -> dict[str, Any]:
    """The few facts of the built peer the notes quote (read while it exists)."""
    flat = getattr(peer.encoder_variable_selection, "flattened_grn", None)
    return {"encoder_variables": len(peer.encoder_variables), "decoder_variables": len(peer.decoder_variables),
            "static_variables": len(peer.static_variables),
            "encoder_flattened_grn_hidden": getattr(flat, "hidden_size", None),
            "hidden_continuous_size": peer.hparams.hidden_continuous_size,
            "embedding_sizes": {k: list(v) for k, v in peer.hparams.embedding_sizes.items()},
            "output_size": peer.hparams.output_size, "mask_bias": peer.hparams.mask_bias}


def architecture_notes(arch: dict[str, Any], fox_cfg, peer_params: dict, fox_params: dict) -> list[str]:
    d = fox_cfg.hidden_size
    m_enc = arch["encoder_variables"]
    flat_hidden = arch["encoder_flattened_grn_hidden"]
    n_p, n_f = peer_params["n_parameters"], fox_params["n_parameters"]
    return [
        f"Parameters: foxlib {n_f:,}, peer {n_p:,} (foxlib/peer {n_f / n_p:.3f}). Where they differ:",
        f"Variable-selection weights: the peer's flattened GRN (all m variables -> m weights) has hidden width "
        f"min(d, m) = {flat_hidden} for the encoder's m = {m_enc} variables and a parameter-free residual "
        f"(linear interpolation m·d -> m, then LayerNorm); foxlib's follows the paper: hidden width d = {d} and a "
        f"Linear skip (m·d -> m). This is most of the gap (encoder VSN "
        f"{fox_params['by_block'].get('encoder_vsn', 0):,} vs {peer_params['by_block'].get('encoder_variable_selection', 0):,}).",
        "Static side: the peer does not pass a categorical embedding through a GRN (its static VSN over one "
        "variable is a LayerNorm); foxlib's static VSN has the paper's per-variable GRN and flattened GRN "
        f"({fox_params['by_block'].get('static_vsn', 0):,} vs {peer_params['by_block'].get('static_variable_selection', 0):,} parameters). "
        "The four static context GRNs are the same.",
        "Real inputs: the peer's prescalers (one Linear(1, hidden_continuous_size) per real, shared by encoder and "
        "decoder) equal foxlib's RealEmbedding at hidden_continuous_size = d; with the peer's default of 8 they "
        "would be narrower, and its per-variable GRNs too (GRN(8 -> 8 -> d) with an interpolated residual).",
        "Attention: the peer loops over heads in Python (one Linear per head for Q and K), computes queries only "
        "at the decoder steps (T_d x T scores instead of T x T), masks with -1e9 (overflows fp16), and its W_H has "
        "no bias; foxlib projects all heads at once, computes all T positions (fused SDPA when memory_efficient, "
        "except on the CPU with dropout > 0) and carries only the decoder positions after attention.",
        "LSTMs: the peer packs every sequence (pack_padded_sequence, enforce_sorted=False) to support variable "
        "lengths, even when all lengths are equal; foxlib runs nn.LSTM on the padded batch.",
        "Post-LSTM gate: the same parameters (the peer shares one GLU + AddNorm between encoder and decoder and "
        "calls it twice; foxlib calls it once on the concatenation). The peer's pre-output gate has no dropout.",
        "Loss: the peer's QuantileLoss is 2 x pinball averaged over quantiles (a torchmetrics Metric whose batch "
        "state is also accumulated, without grad); foxlib's sums the pinball losses over quantiles. A constant "
        "scale: no effect on memory or time.",
        "The peer's step is its forward + loss metric + backward + Adam, outside a Lightning Trainer (no "
        "logging metrics, callbacks or dataloader): the network's own cost, as for foxlib.",
        "Initialisation differs (the peer: Kaiming/Xavier, zero biases; foxlib: PyTorch's defaults); it does not "
        "change memory or time.",
    ]


# ----------------------------------------------------------------------------- measurement

def measure(args) -> dict[str, Any]:
    import pytorch_forecasting

    from foxlib.memory.devices import describe, environment, resolve_device, short_name
    from foxlib.memory import profile_step
    from foxlib.harness.timing import time_alternating

    chosen = [n for n in VARIANTS if n in getattr(args, "variants", VARIANTS)]
    device = resolve_device(args.device)
    dev_short = short_name(device)
    reports_dir = Path(args.reports_dir)
    overrides = parse_json_option(args.config, "--config") or {}
    best = best_configuration(parse_json_option(args.best, "--best"), dev_short, reports_dir)
    card, cfg, best_cfg = foxlib_configs(args.preset, overrides, best)
    log(f"device {device} ({describe(device)['name']}), preset {args.preset}, d={cfg.hidden_size}, "
        f"H={cfg.num_heads}, observed={cfg.n_observed}, Te={cfg.encoder_length}, Td={cfg.decoder_length}, "
        f"batch={cfg.batch_size}; best: {best['precision']} {best['tft_overrides']} ({best['source']})")

    t0 = time.perf_counter()
    ds = peer_dataset(cfg)
    fox_batch, peer_batch, windows = same_batches(cfg, ds, args.seed)
    log(f"built the peer's TimeSeriesDataSet ({len(ds):,} windows) and the same {cfg.batch_size} windows for both "
        f"in {time.perf_counter() - t0:.1f} s")
    best_batch = fox_batch
    if (best_cfg.batch_size, best_cfg.encoder_length, best_cfg.decoder_length, best_cfg.n_observed) != \
            (cfg.batch_size, cfg.encoder_length, cfg.decoder_length, cfg.n_observed):
        best_batch = card.example_batch(best_cfg, seed=args.seed)

    from foxlib.harness.recipe import StepRecipe, build_step
    recipes = {  # foxlib's side: the recipe every wave measures (Adam at the card's learning rate)
        "foxlib_default": (StepRecipe("tft", cfg, "fp32", args.seed), fox_batch),
        "foxlib_best": (StepRecipe("tft", best_cfg, best["precision"], args.seed), best_batch),
    }

    def instantiate(name):
        """(model, batch, loss_fn, optimizer, precision) on `device`: foxlib's from foxlib.harness.recipe (its batch
        checked to be the windows the peer gets), the peer's at the same seed and learning rate."""
        if name == "peer":
            torch.manual_seed(args.seed)
            model = build_peer(ds, cfg).to(device)
            optimizer = torch.optim.Adam(model.parameters(), lr=recipes["foxlib_default"][0].learning_rate)
            return model, to_device(peer_batch, device), peer_loss, optimizer, args.peer_precision
        recipe, expected = recipes[name]
        step = build_step(recipe, device)
        check_recipe_batch(step.batch, expected)
        return step.model, step.batch, step.loss_fn, step.optimizer, recipe.precision

    out: dict[str, Any] = {
        "benchmark": "peer-tft",
        "title": "Peer benchmark: pytorch-forecasting's TFT vs foxlib's TFT",
        "generated_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "device": describe(device),
        "environment": {**environment(), "pytorch_forecasting": pytorch_forecasting.__version__,
                        "lightning": _version("lightning"), "pandas": _version("pandas"),
                        "numpy": np.__version__, "threads": torch.get_num_threads()},
        "arguments": {"device": args.device, "preset": args.preset, "config": overrides, "repeats": args.repeats,
                      "warmup": args.warmup, "seed": args.seed, "peer_precision": args.peer_precision,
                      "variants": chosen},
        "config": {**{k: v for k, v in dataclasses.asdict(cfg).items()
                      if k not in SAME_FUNCTION_FIELDS},
                   "n_known": 5, "n_static": 1, "lstm_layers": 1},
        "same_configuration": same_configuration(cfg),
        "best": {**best, "config": dataclasses.asdict(best_cfg)},
        "windows": windows,
        "variants": {},
    }
    changed = sorted(k for k in best["tft_overrides"] if k not in SAME_FUNCTION_FIELDS
                     and getattr(best_cfg, k) != getattr(cfg, k))
    notes = []
    if changed:
        notes.append(f"The best configuration changes {', '.join(changed)}: its comparison with the peer is "
                     "NOT at equal configuration.")

    # memory: each variant alone (on CUDA the peak is the allocator's, so nothing else may be resident)
    for name in chosen:
        model, batch, loss_fn, optimizer, precision = instantiate(name)
        log(f"profiling {name} ({precision}): warm-up step + measured step")
        t = time.perf_counter()
        prof = profile_step(model, batch, loss_fn, optimizer, precision)
        log(f"  {name}: peak {prof.peak / MB:,.1f} MB, activations {prof.activations / MB:,.1f} MB, "
            f"{time.perf_counter() - t:.1f} s")
        params = parameter_summary(model)
        out["variants"][name] = {"label": LABELS[name], "precision": precision, **params,
                                 "memory": prof.to_dict()}
        if name == "peer":
            out["peer_architecture"] = peer_architecture(model)
        del model, batch, optimizer, prof
        _free(device)
    fox_name = next(n for n in chosen if n != "peer")
    notes += architecture_notes(out["peer_architecture"], cfg, out["variants"]["peer"], out["variants"][fox_name])

    # time: all variants alive, alternating, in one run
    live = {name: instantiate(name) for name in chosen}
    steps = {name: make_step(m, b, lf, o, p, device) for name, (m, b, lf, o, p) in live.items()}
    log(f"timing {len(steps)} variants alternately: {args.warmup} warm-up round(s) + {args.repeats} repeats")
    t = time.perf_counter()
    timings = time_alternating(steps, repeats=args.repeats, warmup=args.warmup, device=device)
    log(f"  timed in {time.perf_counter() - t:.1f} s: " +
        ", ".join(f"{n} {tm.median_s * 1e3:,.0f} ms" for n, tm in timings.items()))
    for name, tm in timings.items():
        out["variants"][name]["timing"] = tm.to_dict()
    del steps, live
    _free(device)

    out["ratios"] = ratios(out)
    out["checks"] = checks(out)
    if any(v["timing"]["noisy"] for v in out["variants"].values()):
        notes.append("At least one step time is noisy (interquartile range above 10 % of the median): "
                     "use more repeats before reading small differences.")
    if "foxlib_best" in chosen and device.type == "cpu" and best["precision"] in ("bf16", "fp16"):
        notes.append(f"On the CPU, {best['precision']} autocast is usually slower than fp32 (bf16 needs AVX-512 BF16 "
                     "or AMX to be fast); the best configuration is chosen for the GPU.")
    if "foxlib_best" in chosen and device.type == "cpu" and best_cfg.memory_efficient and best_cfg.dropout > 0:
        notes.append("On the CPU with dropout > 0, foxlib's memory_efficient attention takes its explicit path "
                     "(PyTorch's CPU flash kernel has no dropout); its other parts (batched, folded VSNs) apply.")
    if device.type == "cuda":
        ws = {n: v["memory"]["workspace_bytes"] for n, v in out["variants"].items()}
        notes.append("CUDA peaks are model peaks: the variant's own tensors (the allocator's max_memory_allocated less "
                     "the bytes allocated at the step's start that belong to none of its tensors, cuBLAS workspaces, "
                     "reported apart as workspace_bytes): " + ", ".join(f"{n} {f / MB:,.1f} MB" for n, f in ws.items()) + ".")
    out["notes"] = notes
    return out


def _version(module: str) -> str | None:
    try:
        return __import__(module).__version__
    except Exception:  # noqa: BLE001 - a version string is informational only
        return None


def _free(device) -> None:
    import gc
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


def ratios(res: dict[str, Any]) -> dict[str, dict[str, float]]:
    peer = res["variants"]["peer"]
    out = {}
    for name in ("foxlib_default", "foxlib_best"):
        v = res["variants"].get(name)
        if v is None:
            continue
        out[name] = {
            "parameters": v["n_parameters"] / peer["n_parameters"],
            "parameter_bytes": v["parameter_bytes"] / peer["parameter_bytes"],
            "activations": v["memory"]["activations"] / peer["memory"]["activations"],
            "peak": v["memory"]["peak"] / peer["memory"]["peak"],
            "step_time": v["timing"]["median_s"] / peer["timing"]["median_s"],
            # per round (the variants alternate, so round r of each ran close in time): robust to load drift
            "step_time_paired": float(np.median([a / b for a, b in zip(v["timing"]["samples_s"],
                                                                        peer["timing"]["samples_s"])])),
        }
    return out


def checks(res: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets: default no heavier (peak) and no slower; best at most half of both."""
    out = []
    for name, limit in TARGETS.items():
        r = res["ratios"].get(name)
        if r is None:
            continue
        for key, what in (("peak", "peak training memory"), ("step_time", "median step time")):
            out.append({"name": f"{LABELS[name]}: {what} / peer's", "measured": r[key], "limit": limit,
                        "unit": "ratio", "passed": bool(r[key] <= limit)})
    return out


# ----------------------------------------------------------------------------- output

def table_rows(res: dict[str, Any]) -> list[dict[str, str]]:
    rows = []
    for name in VARIANTS:
        v = res["variants"].get(name)
        if v is None:
            continue
        mem, tm = v["memory"], v.get("timing", {})
        r = res.get("ratios", {}).get(name)
        rows.append({
            "variant": v["label"],
            "precision": v["precision"],
            "parameters": f"{v['n_parameters']:,}",
            "param MB": f"{v['parameter_bytes'] / MB:,.1f}",
            "activations MB": f"{mem['activations'] / MB:,.1f}",
            "peak MB": f"{mem['peak'] / MB:,.1f}",
            "step ms (median)": f"{tm['median_s'] * 1e3:,.0f}" if tm else "",
            "IQR ms": f"{tm['iqr_s'] * 1e3:,.0f}" if tm else "",
            "peak / peer": f"{r['peak']:.3f}" if r else "1",
            "time / peer": f"{r['step_time']:.3f}" if r else "1",
        })
    return rows


def text_table(res: dict[str, Any]) -> str:
    rows = table_rows(res)
    cols = list(rows[0])
    width = {c: max(len(c), *(len(r[c]) for r in rows)) for c in cols}
    line = lambda r: "  ".join(r[c].rjust(width[c]) if i else r[c].ljust(width[c]) for i, c in enumerate(cols))  # noqa: E731
    head = {c: c for c in cols}
    out = [line(head), "  ".join("-" * width[c] for c in cols), *(line(r) for r in rows)]
    for c in res.get("checks", []):
        out.append(f"{'PASS' if c['passed'] else 'FAIL'}  {c['name']}: {c['measured']:.3f} (target <= {c['limit']})")
    return "\n".join(out)


def render_html(res: dict[str, Any]) -> str:
    e = html.escape
    rows = table_rows(res)
    cols = list(rows[0])
    table = ("<table><tr>" + "".join(f"<th>{e(c)}</th>" for c in cols) + "</tr>"
             + "".join("<tr>" + "".join(f"<td>{e(r[c])}</td>" for c in cols) + "</tr>" for r in rows) + "</table>")
    ratio_rows = "".join(
        f"<tr><td>{e(LABELS[n])}</td>" + "".join(f"<td>{r[k]:.3f}</td>" if k in r else "<td></td>" for k in
                                                ("parameters", "activations", "peak", "step_time", "step_time_paired"))
        + "</tr>" for n, r in res.get("ratios", {}).items())
    checks_html = "".join(
        f"<li><b style='color:{'#1a7f37' if c['passed'] else '#cf222e'}'>{'PASS' if c['passed'] else 'FAIL'}</b> "
        f"{e(c['name'])}: {c['measured']:.3f} (target &le; {c['limit']})</li>" for c in res.get("checks", []))
    passed = all(c["passed"] for c in res.get("checks", [])) if res.get("checks") else None
    verdict = {True: ("all targets met", "#1a7f37"), False: ("targets not all met", "#cf222e"),
               None: ("no checks", "#6e7781")}[passed]
    mem_rows = "".join(
        f"<tr><td>{e(v['label'])}</td>" + "".join(
            f"<td>{v['memory'][k] / MB:,.1f}</td>" for k in
            ("parameters", "gradients", "optimizer_state", "activations", "forward_peak", "peak")) + "</tr>"
        for v in res["variants"].values())
    blocks = "".join(
        f"<details><summary>{e(v['label'])}: parameters by block</summary><table>"
        + "".join(f"<tr><td>{e(b)}</td><td>{n:,}</td></tr>" for b, n in v["by_block"].items())
        + "</table></details>" for v in res["variants"].values())
    timing = "".join(
        f"<tr><td>{e(v['label'])}</td><td>{v['timing']['median_s'] * 1e3:,.1f}</td>"
        f"<td>{v['timing']['iqr_s'] * 1e3:,.1f}</td><td>{len(v['timing']['samples_s'])}</td>"
        f"<td>{'yes' if v['timing']['noisy'] else 'no'}</td></tr>"
        for v in res["variants"].values() if "timing" in v)
    env = res.get("environment", {})
    dev = res.get("device", {})
    best = res.get("best", {})
    cfg_items = "".join(f"<tr><td>{e(str(k))}</td><td>{e(str(v))}</td></tr>" for k, v in res.get("config", {}).items())
    notes = "".join(f"<li>{e(n)}</li>" for n in res.get("notes", []))
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{e(res.get('title', 'Peer benchmark'))} — {e(dev.get('short', ''))}</title>
<style>body{{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;line-height:1.45}}
table{{border-collapse:collapse;margin:.6em 0}}td,th{{border:1px solid #d0d7de;padding:5px 9px;text-align:right}}
td:first-child,th:first-child{{text-align:left}}small{{color:#57606a}}</style></head><body>
<h1>{e(res.get('title', 'Peer benchmark'))}</h1>
<p><span style="color:#fff;background:{verdict[1]};padding:2px 8px;border-radius:4px">{verdict[0]}</span>
 on {e(dev.get('name', '?'))} ({e(dev.get('type', '?'))}) · {e(res.get('generated_at', ''))} · measured at
 {e(str(res.get('measured_at_revision') or res.get('environment', {}).get('git_revision')))}, rendered at
 {e(str(res.get('rendered_at_revision')))} · <a href="../index.html">all reports</a></p>
<p>{e(res.get('same_configuration', ''))}</p>
<h2>Results</h2>{table}
<p><small>Memory in MB = 10^6 bytes. Activations: bytes autograd saves for backward (each storage once, parameters
excluded, inputs included). Peak: the largest total of live tensor bytes during one training step (forward + loss,
backward, Adam step) after a warm-up step, each model profiled alone; {e(res['variants']['peer']['memory'].get('peak_method', ''))}.
Step time: median of full training steps, the three variants alternating in one run.</small></p>
<h2>Ratios foxlib / peer</h2>
<table><tr><th>variant</th><th>parameters</th><th>activations</th><th>peak</th><th>step time (ratio of medians)</th>
<th>step time (median of per-round ratios)</th></tr>{ratio_rows}</table>
<ul>{checks_html}</ul>
<p><small>Targets (from the issue): at equal configuration foxlib's default TFT no heavier (peak) and no slower than the
peer; its best configuration at most half the peer's peak and at most half its step time.
Best configuration: {e(str(best.get('precision')))} {e(json.dumps(best.get('tft_overrides', {})))} — {e(str(best.get('source', '')))}.</small></p>
<h2>Memory by category (MB)</h2>
<table><tr><th>variant</th><th>parameters</th><th>gradients</th><th>optimizer</th><th>activations</th><th>forward peak</th><th>step peak</th></tr>{mem_rows}</table>
<h2>Step time</h2>
<table><tr><th>variant</th><th>median (ms)</th><th>IQR (ms)</th><th>repeats</th><th>noisy (IQR &gt; 10 %)</th></tr>{timing}</table>
<h2>What differs between the two architectures</h2><ul>{notes}</ul>
{blocks}
<h2>Configuration</h2><table>{cfg_items}</table>
<p><small>torch {e(str(env.get('torch')))}, pytorch-forecasting {e(str(env.get('pytorch_forecasting')))},
lightning {e(str(env.get('lightning')))}, pandas {e(str(env.get('pandas')))}, Python {e(str(env.get('python')))},
{e(str(env.get('threads')))} CPU threads, revision {e(str(env.get('git_revision')))}.
Made by <code>benchmarks/peer_tft.py</code>; the peer is a benchmark-only dependency (requirements-peer.txt).</small></p>
</body></html>
"""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="auto", help="auto (CUDA if present), cpu, cuda, cuda:N")
    p.add_argument("--preset", default="seed", help="foxlib TFT preset: seed or small")
    p.add_argument("--config", default=None, help='JSON of TFTConfig fields to override, e.g. \'{"batch_size": 4}\'')
    p.add_argument("--best", default=None,
                   help='foxlib\'s best configuration as JSON, e.g. \'{"precision": "bf16", "memory_efficient": true, '
                        '"checkpointing": "blocks"}\'; default: reports/<device>/wave-8.12/results.json\'s '
                        '"recommended", else that example')
    p.add_argument("--peer-precision", default="fp32", choices=("fp32", "bf16", "fp16"))
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help="comma-separated subset of " + ", ".join(VARIANTS) + " (peer and one foxlib variant at least)")
    p.add_argument("--repeats", type=int, default=10, help="timed steps per variant (median)")
    p.add_argument("--warmup", type=int, default=1, help="untimed rounds before timing")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--reports-dir", default=str(ROOT / "reports"))
    p.add_argument("--out", default="auto", help="results JSON; auto: reports/<device>/peer-benchmark.json")
    p.add_argument("--html", default=None, help="also write the report page here ('auto': beside the JSON)")
    p.add_argument("--render", metavar="RESULTS_JSON", default=None,
                   help="only render a page from a results file (no pytorch-forecasting needed)")
    args = p.parse_args(argv)

    if args.render:
        from foxlib.core.provenance import git_revision
        res = read_json(args.render)
        # provenance: the revision it was measured at (older files name it in their environment) and this one
        res["measured_at_revision"] = res.get("measured_at_revision") or res.get("environment", {}).get("git_revision")
        res["rendered_at_revision"] = git_revision()
        write_json(Path(args.render), res)
        html_path = Path(args.html if args.html and args.html != "auto" else Path(args.render).with_suffix(".html"))
        html_path.parent.mkdir(parents=True, exist_ok=True)
        html_path.write_text(render_html(res))
        log(f"wrote {html_path}")
        print(text_table(res))
        return 0

    if args.repeats < 1 or args.warmup < 0:
        p.error("--repeats must be at least 1 and --warmup at least 0")
    args.variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = sorted(set(args.variants) - set(VARIANTS))
    if unknown or "peer" not in args.variants or len(set(args.variants)) < 2:
        p.error(f"--variants: unknown {unknown} or no peer and foxlib variant; valid: {', '.join(VARIANTS)}")
    try:
        import pytorch_forecasting  # noqa: F401
    except ImportError as exc:
        p.exit(2, f"pytorch-forecasting is not installed ({exc}); measure in the peer environment:\n"
                  "  python3 -m venv .venv-peer && .venv-peer/bin/pip install -r requirements-peer.txt "
                  "&& .venv-peer/bin/pip install --no-deps -e .\n")
    res = measure(args)
    out = Path(args.out) if args.out != "auto" else Path(args.reports_dir) / res["device"]["short"] / "peer-benchmark.json"
    write_json(out, res)
    log(f"wrote {out}")
    if args.html:
        html_path = out.with_suffix(".html") if args.html == "auto" else Path(args.html)
        html_path.parent.mkdir(parents=True, exist_ok=True)
        html_path.write_text(render_html(res))
        log(f"wrote {html_path}")
    print(text_table(res))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("FOXLIB_PROGRESS", "0")
    sys.exit(main())
