"""Peer benchmark: pytorch-forecasting's TemporalFusionTransformer, neuralforecast's TFT and darts' TFTModel
against foxlib's TFT.

Both models at the same configuration (hidden size, heads, variables, encoder and decoder
lengths, batch, quantiles, dropout, one LSTM layer), on the same training windows of the real
S&P 500 / NASDAQ features:

- parameters (count and bytes), activations saved for backward and the peak of one training
  step, measured by foxlib's `profile_step` (forward + loss, backward, Adam step; fp32 unless
  the row says otherwise; a step captured as one CUDA graph by `profile_graphed_step`: the same
  peak, its activations inside the graph), each row profiled alone;
- step time: median of `--repeats` full training steps, every row alternating in one run
  (`foxlib.harness.timing.time_alternating`: the tables); the rows with a step-time target and the peer timed
  again in `--runs` fresh processes (timing_runs), each with the same rows, the target judged on those runs pooled.

Rows (foxlib/report/peer_figures.py: ROWS): `peer` (pytorch-forecasting, same configuration, fp32);
`peer_hcs8`, `peer_hcs16` (pytorch-forecasting at its own defaults: hidden_continuous_size 8, its
default, and 16; its default series embedding); `nf`, `nf_defaults` (neuralforecast's TFT at the same configuration and at its
defaults), `darts`, `darts_skip`, `darts_defaults`, `darts_defaults_skip` (darts' TFTModel, skip_interpolation off
and on, at the same configuration and at its defaults: benchmarks/peer/others.py; rows of a library not
installed are not run, the page says why); `foxlib_default` (the same config, plain, fp32);
`foxlib_best` (wave 8.12's best configuration: `--best` JSON, else
`reports/<device>/wave-8.12/results.json`'s "recommended", cited in depends_on, else bf16 +
memory_efficient + checkpointing="blocks"; with its step options, and on CUDA its whole step as one
CUDA graph where it says cuda_graph: benchmarks/peer/best.py); `foxlib_compiled_default`,
`foxlib_compiled_reduce_overhead` (foxlib_default under torch.compile, `--compile auto`: on for
CUDA, off on the CPU; compile time and graph breaks recorded).

    python benchmarks/peer_tft.py --device auto --preset seed --repeats 10 --out results.json
    python benchmarks/peer_tft.py --render results.json --html reports/cpu/peer-benchmark.html

Measuring needs pytorch-forecasting (the separate `.venv-peer`, requirements-peer.txt) and a
committed tree (else --allow-dirty); rendering a page from a results file does not need the peer
(foxlib/report/peer_page.py). Progress goes to stderr; the summary table is printed last.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere, foxlib installed or not
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from benchmarks.peer import best as best_row, compiled, configuration as conf, data, models, others  # noqa: E402
from foxlib.core import provenance  # noqa: E402
from foxlib.core.config import env_flag  # noqa: E402
from foxlib.core.figures import mb_text  # noqa: E402
from foxlib.core.pooled_runs import MIN_RUNS  # noqa: E402
from foxlib.core.results import read_json, write_json  # noqa: E402
from foxlib.report import peer_figures as fig, peer_page  # noqa: E402

VARIANTS = tuple(fig.ROWS)
PEER_DEFAULTS = {"peer_hcs8": 8, "peer_hcs16": 16}  # row -> the peer's hidden_continuous_size


def log(msg: str) -> None:
    print(f"[peer_tft {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _free(device) -> None:
    import gc
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


def select(asked: list[str], compile_on: bool, compile_reason: str,
           missing: dict[str, str | None] | None = None) -> tuple[list[str], dict[str, str]]:
    """The rows to run, in ROWS order, and {row: why not} for the others. `missing`: {library: why its rows
    cannot run, or None} (others.missing; default: asked of the libraries the chosen rows need)."""
    if missing is None:
        missing = {lib: others.missing(lib) for lib in {fig.OTHER_PEERS[n] for n in asked if n in fig.OTHER_PEERS}}
    chosen, not_run = [], {}
    for name in VARIANTS:
        if name not in asked:
            not_run[name] = "not run: not selected (--variants)"
        elif name in fig.OTHER_PEERS and missing.get(fig.OTHER_PEERS[name]):
            not_run[name] = missing[fig.OTHER_PEERS[name]]
        elif name in fig.COMPILED and not compile_on:
            not_run[name] = f"not run: torch.compile is off, {compile_reason}"
        else:
            chosen.append(name)
    return chosen, not_run


class Rows:
    """What every row is built from, once per process: the device, foxlib's configurations (the preset with --config;
    the best one: --best, else wave 8.12's published recommendation, cited in depends_on), the peer's dataset and
    the same training windows for every library of `chosen`, and foxlib's recipes. `instantiate(name)` builds a row."""

    def __init__(self, args, chosen: list[str]):
        from foxlib.harness.recipe import StepRecipe
        from foxlib.memory.devices import resolve_device, short_name
        self.args = args
        self.device = device = resolve_device(args.device)
        self.overrides = conf.parse_json_option(args.config, "--config") or {}
        self.best = conf.best_configuration(conf.parse_json_option(args.best, "--best"), short_name(device),
                                            Path(args.reports_dir), log)
        self.depends_on = self.best.pop("depends_on")
        self.card, self.cfg, self.best_cfg = conf.foxlib_configs(args.preset, self.overrides, self.best)
        cfg, best_cfg = self.cfg, self.best_cfg
        t0 = time.perf_counter()
        self.ds = data.peer_dataset(cfg)
        fox_batch, self.peer_batch, self.windows = data.same_batches(cfg, self.ds, args.seed)
        self.other_batches = {lib: others.batch(lib, self.ds, self.peer_batch)
                              for lib in {fig.OTHER_PEERS[n] for n in chosen if n in fig.OTHER_PEERS}}
        log(f"built the peer's TimeSeriesDataSet ({len(self.ds):,} windows) and the same {cfg.batch_size} windows for "
            f"both in {time.perf_counter() - t0:.1f} s")
        best_batch = fox_batch
        if (best_cfg.batch_size, best_cfg.encoder_length, best_cfg.decoder_length, best_cfg.n_observed) != \
                (cfg.batch_size, cfg.encoder_length, cfg.decoder_length, cfg.n_observed):
            best_batch = self.card.example_batch(best_cfg, seed=args.seed)
        self.recipes = {  # foxlib's side: the recipe every wave measures (Adam at the card's learning rate)
            "foxlib_default": (StepRecipe("tft", cfg, "fp32", args.seed), fox_batch),
            "foxlib_best": (best_row.recipe(self.best, best_cfg, args.seed), best_batch),
        }
        self.graphed = best_row.graphed(self.best, device)  # foxlib_best's step: one captured CUDA graph (CUDA only)
        self.recipes.update({n: self.recipes["foxlib_default"] for n in fig.COMPILED})  # the default row's step

    def instantiate(self, name: str) -> dict[str, Any]:
        """{model, batch, loss_fn, optimizer, precision, step, compile} on the device: foxlib's from
        foxlib.harness.recipe (its batch checked to be the windows the peer gets; the best row with its
        step options, its step captured as one CUDA graph where `graphed`), compiled rows after their
        first (compiling) steps; the peer's at the same seed and learning rate."""
        from foxlib.harness.recipe import build_step
        from foxlib.memory.step import TrainingStep
        args, device, recipes = self.args, self.device, self.recipes
        lr = recipes["foxlib_default"][0].learning_rate
        if name in fig.OTHER_PEERS:  # neuralforecast's or darts' torch module, on the same windows
            lib = fig.OTHER_PEERS[name]
            torch.manual_seed(args.seed)
            model = others.build(name, self.ds, self.cfg, args.seed).to(device)
            optimizer = torch.optim.Adam(others.trainable(model), lr=lr)
            live = {"model": model, "batch": data.to_device(self.other_batches[lib], device),
                    "loss_fn": others.loss_fn(lib), "optimizer": optimizer, "precision": args.peer_precision}
        elif name in fig.PEER_ROWS:
            torch.manual_seed(args.seed)
            model = models.build_peer(self.ds, self.cfg, PEER_DEFAULTS.get(name)).to(device)
            optimizer = torch.optim.Adam(model.parameters(), lr=lr)
            live = {"model": model, "batch": data.to_device(self.peer_batch, device), "loss_fn": models.peer_loss,
                    "optimizer": optimizer, "precision": args.peer_precision}
        elif name == best_row.NAME and self.graphed:
            return best_row.live(recipes[name][0], device, recipes[name][1])
        else:
            recipe, expected = recipes[name]
            step = build_step(recipe, device)
            data.check_recipe_batch(step.batch, expected)
            live = {"model": step.model, "batch": step.batch, "loss_fn": step.loss_fn, "optimizer": step.optimizer,
                    "precision": recipe.precision, "options": recipe.options}
            if name in fig.COMPILED:
                live["model"] = compiled.CompiledTFT(step.model, fig.COMPILED[name], args.compile_backend)
            else:
                live["step"] = step.step  # the recipe's step (its options' backends held while it runs)
        if "step" not in live:
            live["step"] = TrainingStep(live["model"], live["batch"], live["loss_fn"], live["optimizer"],
                                        live["precision"], device)
        if name in fig.COMPILED:
            log(f"  compiling {name} (mode {fig.COMPILED[name]}, backend {args.compile_backend}): "
                f"{compiled.FIRST_STEPS} first steps")
            live["compile"] = compiled.first_steps(live["step"], device)
            log(f"  compiled in {live['compile']['compile_s']:.1f} s (first step)")
        return live


def time_rows(rows: Rows, names: list[str]) -> dict[str, Any]:
    """{row: its timing dict} of `names` built by `rows`, all alive, timed alternating in one run
    (foxlib.harness.timing.time_alternating: --warmup untimed rounds, then --repeats)."""
    from foxlib.harness.timing import time_alternating
    live = {name: rows.instantiate(name) for name in names}
    steps = {name: lv["step"] for name, lv in live.items()}
    args = rows.args
    log(f"timing {len(steps)} rows alternately: {args.warmup} warm-up round(s) + {args.repeats} repeats")
    t = time.perf_counter()
    timings = time_alternating(steps, repeats=args.repeats, warmup=args.warmup, device=rows.device)
    log(f"  timed in {time.perf_counter() - t:.1f} s: " +
        ", ".join(f"{n} {tm.median_s * 1e3:,.1f} ms" for n, tm in timings.items()))
    out = {"timing": {name: tm.to_dict() for name, tm in timings.items()}}
    out.update({"compile": {n: lv["compile"] for n, lv in live.items() if "compile" in lv}})
    del steps, live
    _free(rows.device)
    return out


def timing_runs(args, names: list[str]) -> dict[str, Any]:
    """The rows with a target and the peer timed in args.runs fresh processes (this script with --timing-run,
    through foxlib.harness.fresh_process.run_child: each builds the same rows anew, warms up and times them
    alternating), so that a step-time target is judged on independent runs alike, pooled
    (foxlib.report.peer_figures.pooled_step_time): {"rows", "runs": [{"timing": {row: timing}} or {"error": why},
    ...]}, one entry per run asked for (arguments.runs). The measuring process's own run, with every row, is the
    tables' and is not pooled: it times more rows, so it is not alike."""
    from foxlib.harness.fresh_process import run_child
    argv = [sys.executable, str(Path(__file__).resolve()), "--timing-run", "--variants", ",".join(names),
            "--device", args.device, "--preset", args.preset, "--repeats", str(args.repeats),
            "--warmup", str(args.warmup), "--seed", str(args.seed), "--peer-precision", args.peer_precision,
            "--reports-dir", str(args.reports_dir)]
    argv += ["--config", args.config] if args.config else []
    argv += ["--best", args.best] if args.best else []
    argv += ["--allow-dirty"] if args.allow_dirty else []
    runs = []
    for r in range(1, args.runs + 1):
        log(f"independent timing run {r}/{args.runs} (a fresh process): {', '.join(names)}")
        child = run_child(argv)
        runs.append({"error": child["error"]} if "error" in child else {"timing": child["timing"]})
        log(f"  run {r} failed ({child['error']}): the targets are judged on the runs that did not" if "error" in child
            else "  " + ", ".join(f"{n} {t['median_s'] * 1e3:,.1f} ms" for n, t in child["timing"].items()))
    return {"rows": names, "runs": runs}


def measure(args, revision: str | None) -> dict[str, Any]:
    """The results file's dict for the parsed arguments; `revision`: the tree's (main checked it once)."""
    import pytorch_forecasting

    from foxlib.harness.recipe import build_step
    from foxlib.harness.step_options import StepOptions, backends
    from foxlib.memory import profile_step
    from foxlib.memory.devices import describe, environment, resolve_device

    device = resolve_device(args.device)
    compile_on, compile_reason = compiled.enabled(args.compile, device, args.compile_off_reason)
    chosen, not_run = select(args.variants, compile_on, compile_reason)
    if not set(chosen) - set(fig.PEER_ROWS):
        raise SystemExit(f"no foxlib row left to run: {not_run}")
    rows = Rows(args, chosen)
    cfg, best, best_cfg, recipes, graphed = rows.cfg, rows.best, rows.best_cfg, rows.recipes, rows.graphed
    log(f"device {device} ({describe(device).name}), preset {args.preset}, d={cfg.hidden_size}, "
        f"H={cfg.num_heads}, observed={cfg.n_observed}, Te={cfg.encoder_length}, Td={cfg.decoder_length}, "
        f"batch={cfg.batch_size}; best: {best_row.label(best, device)}, {best['precision']} {best['tft_overrides']} "
        f"({best['source']}); "
        f"rows: {', '.join(chosen)}; torch.compile {'on' if compile_on else 'off'} ({compile_reason})")
    instantiate = rows.instantiate

    out: dict[str, Any] = {
        "benchmark": "peer-tft",
        "title": "Peer benchmark: pytorch-forecasting's, neuralforecast's and darts' TFTs vs foxlib's TFT",
        "generated_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "measured_at_revision": revision,
        "device": describe(device),
        "environment": {**environment().to_dict(), "pytorch_forecasting": pytorch_forecasting.__version__,
                        "neuralforecast": others.version("neuralforecast"), "darts": others.version("darts"),
                        "lightning": others.version("lightning"), "pandas": others.version("pandas"),
                        "numpy": np.__version__, "threads": torch.get_num_threads()},
        "arguments": {"device": args.device, "preset": args.preset, "config": rows.overrides, "repeats": args.repeats,
                      "warmup": args.warmup, "seed": args.seed, "peer_precision": args.peer_precision,
                      "variants": chosen, "compile": args.compile, "compile_backend": args.compile_backend,
                      "runs": args.runs, "allow_dirty": args.allow_dirty},
        "config": {**{k: v for k, v in dataclasses.asdict(cfg).items() if k not in conf.SAME_FUNCTION_FIELDS},
                   "n_known": 5, "n_static": 1, "lstm_layers": 1},
        "same_configuration": models.same_configuration(cfg),
        "best": {**best, "config": dataclasses.asdict(best_cfg)},
        "depends_on": rows.depends_on,
        "compile": {"setting": args.compile, "enabled": compile_on, "reason": compile_reason,
                    "backend": args.compile_backend, "explain": None},
        "not_run": not_run,
        "windows": rows.windows,
        "variants": {},
    }
    changed = sorted(k for k in best["tft_overrides"] if k not in conf.SAME_FUNCTION_FIELDS
                     and getattr(best_cfg, k) != getattr(cfg, k))
    notes = []
    if changed:
        notes.append(f"The best configuration changes {', '.join(changed)}: its comparison with the peer is "
                     "NOT at equal configuration.")

    if any(n in fig.COMPILED for n in chosen):  # graph breaks of the forward, before anything is compiled
        with build_step(recipes["foxlib_default"][0], device) as step:
            out["compile"]["explain"] = compiled.graph_breaks(step.model, step.batch)
        log(f"graph breaks: {out['compile']['explain']}")

    # memory: each row alone (on CUDA the peak is the allocator's, so nothing else may be resident)
    for name in list(chosen):
        if name in fig.COMPILED:
            torch._dynamo.reset()  # a fresh compile per row: its compile time is its own
        t = time.perf_counter()
        if name in fig.OTHER_PEERS:  # another library's step that fails here loses its rows only, said why
            try:
                live = instantiate(name)
                log(f"profiling {name} ({live['precision']}): warm-up step + measured step")
                memory = profile_step(live["model"], live["batch"], live["loss_fn"], live["optimizer"],
                                      live["precision"]).to_dict()
                body = live["model"]
            except Exception as exc:  # noqa: BLE001 - recorded as the row's reason on the page
                why = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
                log(f"  {name} failed ({why}): not run")
                not_run[name] = f"not run: its training step failed on this machine ({why})"
                chosen.remove(name)
                live = body = None
                _free(device)
                continue
        elif name == best_row.NAME and graphed:  # warm-up steps, the capture and one replay
            log(f"profiling {name} ({best['precision']}) as one CUDA graph: warm-up steps, capture, replay")
            live, (memory, body) = {"precision": best["precision"]}, best_row.profile(recipes[name][0], device, recipes[name][1])
        else:
            live = instantiate(name)
            log(f"profiling {name} ({live['precision']}): warm-up step + measured step")
            with backends(live.get("options") or StepOptions()):
                memory = profile_step(live["model"], live["batch"], live["loss_fn"], live["optimizer"],
                                      live["precision"]).to_dict()
            body = live["model"].model if name in fig.COMPILED else live["model"]
        log(f"  {name}: peak {mb_text(memory['peak'])}, activations {mb_text(memory['activations'])}, "
            f"{time.perf_counter() - t:.1f} s")
        out["variants"][name] = {"label": fig.ROWS[name], "precision": live["precision"],
                                 **models.parameter_summary(body), "memory": memory}
        if name == best_row.NAME:
            out["variants"][name].update(label=best_row.label(best, device), cuda_graph=graphed,
                                         options=best["options"])
        if name in fig.OTHER_PEERS:
            out["variants"][name]["architecture"] = others.architecture(name, body)
        elif name in fig.PEER_ROWS:
            arch = models.peer_architecture(body)
            out["variants"][name]["architecture"] = arch
            if name == fig.PEER:
                out["peer_architecture"] = arch
        if "compile" in live:
            out["variants"][name]["compile"] = {"mode": fig.COMPILED[name], "backend": args.compile_backend,
                                                **live["compile"]}
        del live, memory, body
        if name in fig.COMPILED:
            torch._dynamo.reset()  # and its CUDA graphs' memory pool, before the next row's measurement
        _free(device)
    fox_name = next(n for n in chosen if n not in fig.PEER_ROWS)
    if fig.PEER in out["variants"]:
        notes += models.architecture_notes(out["peer_architecture"], cfg, out["variants"][fig.PEER],
                                           out["variants"][fox_name])

    # time: all rows alive, alternating, in one run (compiled rows compiled again, the process's caches warm)
    timed = time_rows(rows, chosen)
    for name, c in timed["compile"].items():
        out["variants"][name]["compile"]["recompile_s"] = c["compile_s"]
    for name, tm in timed["timing"].items():
        out["variants"][name]["timing"] = tm
    # and the rows with a target, with the peer, in independent runs alike: their step-time targets are judged
    # on those runs pooled (a verdict needs foxlib.core.pooled_runs.MIN_RUNS)
    out["timing_runs"] = timing_runs(args, [n for n in (fig.PEER, *fig.TARGETS) if n in chosen])

    out["ratios"] = fig.ratios(out)
    out["pooled_step_time"] = fig.pooled_step_time(out)
    out["ratios_by_peer"] = fig.foxlib_over_peers(out)
    out["checks"] = fig.checks(out)
    out["notes"] = notes + others.notes(chosen) + run_notes(out, device, best, best_cfg, chosen)
    if best_row.NAME in chosen:
        out["notes"] += best_row.notes(best, device, os.environ)
    return out


def run_notes(out: dict[str, Any], device, best: dict[str, Any], best_cfg, chosen: list[str]) -> list[str]:
    notes = []
    if any(v["timing"]["noisy"] for v in out["variants"].values()):
        notes.append("At least one step time is noisy (interquartile range above 10 % of the median): "
                     "use more repeats before reading small differences.")
    if any(n in chosen for n in PEER_DEFAULTS):
        notes.append("The peer at its own defaults: its real-variable prescalers and per-variable GRNs at "
                     "hidden_continuous_size (8, its default, or 16) instead of d, and its series embedding at the "
                     "width its rule picks for 2 categories; d, heads, dropout, quantiles and the windows stay shared.")
    if "foxlib_best" in chosen and device.type == "cpu" and best["precision"] in ("bf16", "fp16"):
        notes.append(f"On the CPU, {best['precision']} autocast is usually slower than fp32 (bf16 needs AVX-512 BF16 "
                     "or AMX to be fast); the best configuration is chosen for the GPU.")
    if "foxlib_best" in chosen and device.type == "cpu" and best_cfg.memory_efficient and best_cfg.dropout > 0:
        notes.append("On the CPU with dropout > 0, foxlib's memory_efficient attention takes its explicit path "
                     "(PyTorch's CPU flash kernel has no dropout); its other parts (batched, folded VSNs) apply.")
    if "foxlib_compiled_reduce_overhead" in chosen and device.type != "cuda":
        notes.append("reduce-overhead's CUDA graphs do not apply on the CPU: that row is Inductor's default code there.")
    if device.type == "cuda":
        ws = {n: v["memory"]["workspace_bytes"] for n, v in out["variants"].items()}
        notes.append("CUDA peaks are model peaks: the row's own tensors (the allocator's max_memory_allocated less "
                     "the bytes allocated at the step's start that belong to none of its tensors, cuBLAS workspaces, "
                     "reported apart as workspace_bytes): " + ", ".join(f"{n} {mb_text(f)}" for n, f in ws.items()) + ".")
    return notes


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="auto", help="auto (CUDA if present), cpu, cuda, cuda:N")
    p.add_argument("--preset", default="seed", help="foxlib TFT preset: seed or small")
    p.add_argument("--config", default=None, help='JSON of TFTConfig fields to override, e.g. \'{"batch_size": 4}\'')
    p.add_argument("--best", default=None,
                   help='foxlib\'s best configuration as JSON, e.g. \'{"precision": "bf16", "memory_efficient": true, '
                        '"checkpointing": "blocks"}\', optionally with "cuda_graph": true (CUDA only), "options": '
                        '{"adam": "fused", "optimizer_in_backward": true, "tf32": false} and "cublas_workspace"; '
                        'default: reports/<device>/wave-8.12/results.json\'s "recommended" (cited in depends_on), '
                        'else that example')
    p.add_argument("--peer-precision", default="fp32", choices=("fp32", "bf16", "fp16"))
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help="comma-separated subset of " + ", ".join(VARIANTS) + " (peer and one foxlib row at least)")
    p.add_argument("--compile", default="auto", choices=("auto", "on", "off"),
                   help="the torch.compile rows: auto = on for CUDA, off on the CPU (minutes per row there)")
    p.add_argument("--compile-off-reason", default=None, metavar="TEXT",
                   help="with --compile off: why, said on the page instead of 'not asked for' (scripts/h200.sh "
                        "passes the error of a run with torch.compile that failed)")
    p.add_argument("--compile-backend", default="inductor",
                   help="torch.compile backend of those rows (tests: eager, to skip Inductor's code generation)")
    p.add_argument("--repeats", type=int, default=10, help="timed steps per row (median)")
    p.add_argument("--runs", type=int, default=MIN_RUNS,
                   help=f"independent timing runs of the peer and the rows with a target, each in a fresh process "
                        f"with the same rows (the tables' run, with every row, is not one of them); a step-time target is judged on them pooled and is inconclusive "
                        f"with fewer than {MIN_RUNS} (default {MIN_RUNS})")
    p.add_argument("--timing-run", action="store_true",
                   help="only time --variants alternating and print {\"timing\": {row: timing}} as JSON on the last "
                        "line of stdout: one independent timing run, as the benchmark starts it")
    p.add_argument("--warmup", type=int, default=1, help="untimed rounds before timing")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--reports-dir", default=str(ROOT / "reports"))
    p.add_argument("--out", default="auto", help="results JSON; auto: reports/<device>/peer-benchmark.json")
    p.add_argument("--html", default=None, help="also write the page here ('auto': beside the JSON)")
    p.add_argument("--render", metavar="RESULTS_JSON", default=None,
                   help="only render a page from a results file (no pytorch-forecasting needed); it checks the "
                        "wave 8.12 results it cites are still the published ones")
    p.add_argument("--allow-dirty", action="store_true",
                   help="measure or render from a tree with uncommitted changes (FOXLIB_ALLOW_DIRTY=1); the page says so")
    return p


def main(argv: list[str] | None = None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    args.allow_dirty = args.allow_dirty or env_flag("FOXLIB_ALLOW_DIRTY")

    def page(json_path: Path, html: str | None) -> None:
        html_path = None if html in (None, "auto") else Path(html)
        try:
            written = peer_page.render_file(json_path, html_path, allow_dirty=args.allow_dirty)
        except provenance.ProvenanceError as exc:
            p.exit(1, f"peer_tft.py: {exc}\n")
        log(f"wrote {written}")

    if args.render:
        page(Path(args.render), args.html)
        print(fig.text_table(read_json(args.render)))
        return 0

    if args.repeats < 1 or args.warmup < 0 or args.runs < 0:
        p.error("--repeats must be at least 1, --runs and --warmup at least 0")
    if args.compile_off_reason and args.compile != "off":
        p.error("--compile-off-reason goes with --compile off only")
    args.variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = sorted(set(args.variants) - set(VARIANTS))
    if unknown or "peer" not in args.variants or not set(args.variants) & set(fig.FOXLIB_ROWS):
        p.error(f"--variants: unknown {unknown} or no peer and foxlib row; valid: {', '.join(VARIANTS)}")
    try:
        revision = provenance.check_tree(args.allow_dirty, "a measurement")
    except provenance.ProvenanceError as exc:
        p.exit(2, f"peer_tft.py: {exc}\n")
    try:
        import pytorch_forecasting  # noqa: F401
    except ImportError as exc:
        p.exit(2, f"pytorch-forecasting is not installed ({exc}); measure in the peer environment:\n"
                  "  python3 -m venv .venv-peer && .venv-peer/bin/pip install -r requirements-peer.txt "
                  "&& .venv-peer/bin/pip install --no-deps -e .\n")
    if args.timing_run:  # one independent timing run of a measurement (timing_runs): its JSON, last on stdout
        print(json.dumps({"timing": time_rows(Rows(args, args.variants), args.variants)["timing"]}))
        return 0
    res = measure(args, revision)
    out = Path(args.out) if args.out != "auto" else Path(args.reports_dir) / res["device"].short / "peer-benchmark.json"
    write_json(out, res)
    log(f"wrote {out}")
    if args.html:
        page(out, args.html)
    print(fig.text_table(read_json(out)))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("FOXLIB_PROGRESS", "0")
    sys.exit(main())
