"""deployment.md, written by wave 8.13 beside its results.json from its measurement and checks: each model's
configuration, memory and latency, the headroom on the card, the commands that reproduce it, and the risks
that remain. It is what 8.14 (ensemble deployment) goes on."""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from foxlib.core.budgets import Check, verdict
from foxlib.core.config import MB
from foxlib.core.critical_path import DEPLOYMENT
from foxlib.core.parameters import RUN_PARAMETERS, p_flags, to_assignments
from foxlib.core.results import measured_revision, write_text
from foxlib.waves.wave_8_13 import analysis
from foxlib.waves.wave_8_13.analysis import mb
from foxlib.waves.wave_8_13.cap import NOT_ENFORCED
from foxlib.waves.wave_8_13.records import Measurement

FILE = "deployment.md"
WAVE = "8.13"
NUMBER_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def in_words(n: int) -> str:
    """A count as a word ("four"), up to ten; its digits beyond."""
    return NUMBER_WORDS[n] if 0 <= n < len(NUMBER_WORDS) else str(n)


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{1e3 * x:,.2f}"


def _table(header: list[str], rows: list[list[Any]]) -> str:
    def cell(v: Any) -> str:
        return "—" if v is None else str(v).replace("|", "\\|").replace("\n", " ")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def pinned_tft_config(m: Measurement) -> str:
    """The TFT configuration this run used, as a tft_config value that no longer depends on 8.12's report:
    its precision and overrides, and its CUDA graph, step options and cuBLAS workspace where it had them."""
    tft = m.tft.to_dict()
    extra = {k: tft[k] for k in ("cuda_graph", "options", "cublas_workspace") if tft.get(k)}
    return json.dumps({"precision": m.tft.precision, **m.tft.overrides, **extra}, separators=(",", ":"))


def reproduce_commands(m: Measurement, params: dict[str, Any]) -> dict[str, list[str]]:
    """The exact commands that reproduce this report, by purpose."""
    used = dict(m.measure_parameters or {k: v for k, v in params.items() if k not in RUN_PARAMETERS})
    used["device"] = m.device.type
    pinned = dict(used, tft_config=pinned_tft_config(m))

    def flags(values: dict[str, Any]) -> str:
        budgets = [f"budgets_file={params['budgets_file']}"] if params.get("budgets_file") else []
        return p_flags(to_assignments(values) + budgets)

    py = ".venv/bin/python"
    return {
        "set up the environment (once)": ["make venv"],
        "this report, as it was run": [f"{py} -m foxlib report --wave {WAVE} {flags(used)}"],
        "the same with the TFT configuration pinned (independent of a later wave 8.12 report)":
            [f"{py} -m foxlib report --wave {WAVE} {flags(pinned)}"],
        "on a bare GPU machine: measure there, write the report anywhere": [
            f"{py} -m foxlib measure --wave {WAVE} {flags(dict(pinned, device='cuda'))} "
            "--out wave-8.13-measurement.json",
            f"{py} -m foxlib report --wave {WAVE} -p measurements=wave-8.13-measurement.json"],
        "the tests of the cap and of this wave (the CUDA test runs only where there is a GPU)":
            [f"{py} -m pytest -q -rs tests/test_memory_cap.py tests/test_wave_8_13.py"],
        "on a GPU: the honest cap (a short capped run, NVML sampled, its largest figure at most the card)":
            [f"{py} -m pytest -q -rs -s -m cuda tests/test_memory_cap.py"],
        "the verdicts of every wave, 8.14 included": [f"{py} -m foxlib waves"],
    }


def risks(m: Measurement, budgets: dict[str, dict[str, float]]) -> list[str]:
    """What this validation does not cover, with this run's numbers."""
    cap, t, i = m.cap, m.training, m.inference
    card = cap.card_bytes
    head = budgets["ensemble"]["min_headroom_mb"] * MB
    out = []
    if t.oom or i.oom:
        where = "; ".join(f"{p}: {m.phase(p).oom.where}" for p in ("training", "inference") if m.phase(p).oom)
        out.append(f"**It ran out of memory** ({where}). The ensemble does not fit as configured; the figures "
                   "after that point are missing, not small.")
    if not cap.enforced:
        out.append(f"**The cap was not enforced.** This run was on the CPU: every memory figure is "
                   f"{NOT_ENFORCED} — measured tensor bytes of each step, added up as the interleaved run "
                   "would hold them. It contains no CUDA context, no caching-allocator rounding or fragmentation "
                   "and no cuBLAS/cuDNN workspaces. A GPU run (below) is needed before 8.14 can rely on it.")
        out.append("The CUDA context is not in these figures: on a GPU it comes on top, and on a 4 GB card it is a "
                   "large share of the memory (wave 8.13's GPU report measures it after warming up every library "
                   "the run uses: reports/<gpu>/wave-8.13/report.md).")
    else:
        ctx0 = cap.context_bytes
        ends = analysis.context_ends(m)
        grew = (f", {mb(max(ends))} MB at the end (kernels load lazily, cuDNN creates its handle at first use)"
                if ends else ", not measurable at the end (NVML gave no per-process figure)")
        env = m.environment
        out.append(f"The CUDA context was {mb(ctx0)} MB at the start (after warming up every library the run "
                   f"uses){grew}, on {m.device.name} with torch "
                   f"{env.torch}, CUDA {env.cuda}, driver {env.driver}. On the production card "
                   "it will differ (driver, compute capability, CUDA_MODULE_LOADING): measure it there "
                   "(wave 8.10's bare context) and compare with this one before relying on the headroom.")
        largest = analysis.largest_context_bytes(m)
        grown = cap.cap_bytes + largest
        if grown > card:
            out.append(f"**The cap was not honest**: it was set from a CUDA context of {mb(ctx0)} MB, but the context "
                       f"grew to {mb(largest)} MB: cap + grown context = {mb(grown)} MB, over "
                       f"the {mb(card)} MB card. A run that filled the cap would not have fitted; re-measure (this "
                       "wave now warms up every library before measuring the context).")
        nv = analysis.nvml_check(m)
        out.append(analysis.nvml_text(m) + (" Watch NVML's process figure in production too." if nv.applicable else
                                        " The card was not verified by NVML: the allocator cap alone bounds it."))
        n, words = len(m.order), in_words(len(m.order))
        out.append(f"All {words} models run in **one process** sharing one context. Deployed as {words} processes, "
                   f"each pays its own: {n} × {mb(largest)} = {mb(n * largest)} MB of contexts alone on a "
                   f"{mb(card)} MB card.")
        if t.allocator_end:
            out.append(f"Allocator fragmentation at the end of training: {mb(t.allocator_end.inactive_split_bytes)} "
                       "MB of inactive split blocks. Over long runs the reserve can creep up; watch NVML's process "
                       "figure in production.")
    if m.tft.options and m.tft.options.compile and m.warmup:
        out.append(f"**Start-up.** The TFT ships compiled by torch.compile: the warm-up before the cap (every model's "
                   f"first steps and forwards, the TFT compiled, the graphs captured) took "
                   f"{m.warmup.seconds:,.1f} s on {m.device.name}. The production machine needs what "
                   "inductor needs (Triton and a C compiler) and compiles again in each new process (inductor's "
                   "on-disk caches shorten a repeat; not measured here).")
    if m.tft.source == "the tft_config parameter":
        out.append("The TFT's configuration was given by the tft_config parameter, not read from wave 8.12's "
                   "report: make sure it is the one 8.12 recommends for this device.")
    elif not m.tft.recommended:
        out.append(f"The TFT was not validated in wave 8.12's recommended configuration ({m.tft.source}). "
                   "Re-run this wave once 8.12 has published its recommendation for this device.")
    for precision, risk in (("bf16", "needs a GPU of compute capability 8.0 or newer (Ampere+). Many 4 GB cards "
                                      "(e.g. Turing GTX 1650) have no bf16: there it must fall back to fp16 with a "
                                      "gradient scaler or to fp32, which changes the memory; re-measure on that card."),
                            ("fp16", "trains with a gradient scaler; overflowing steps are skipped silently. "
                                     "Log the scaler's scale in production.")):
        who = ", ".join(n for n, info in m.models.items() if info.precision == precision)
        if who:
            out.append(f"{precision} ({who}) {risk}")
    bad = {n: p.non_finite_losses for n, p in t.per_model.items() if p.non_finite_losses}
    if bad:
        out.append(f"Non-finite training losses in this run: {bad}.")
    train = analysis.figure(m, "training")
    serve_extra = sum((v.solo_increment_bytes or 0) + v.input_bytes for v in i.models.values())
    if i.models:
        both = train + serve_extra
        out.append(f"Training and serving were validated one after the other. Serving while training in the same "
                   f"process needs about the training figure {mb(train)} MB plus every model's inference input "
                   f"and forward peak ({mb(serve_extra)} MB) = {mb(both)} MB, leaving {mb(card - both)} MB of the "
                   f"card ({'at least' if card - both >= head else 'less than'} the {mb(head, 0)} MB headroom asked"
                   f"{'' if card - both >= head else ': not covered'}).")
    for phase in ("training", "inference"):
        left = card - analysis.figure(m, phase)
        if 0 <= left < 2 * head:
            out.append(f"Thin headroom in {phase}: {mb(left)} MB left on the card, under twice the "
                       f"{mb(head, 0)} MB asked.")
    out.append(f"Only {m.steps} interleaved steps per model, and the RL models repeat one minibatch of a "
               "full-size replay/rollout buffer: environment interaction, data loading, checkpoint saving and "
               "evaluation are not in the figures.")
    host = {n: st.batch_host_bytes for n, st in m.training.models.items() if st.batch_host_bytes}
    if host:
        out.append("Host memory is not on the card and not checked here: "
                   + ", ".join(f"{n} {mb(v)} MB" for n, v in host.items()) + " of replay/rollout storage in RAM.")
    where = ("on the CPU; they say nothing about a GPU's" if not cap.enforced else
             f"on {m.device.name}; a 4 GB card is slower")
    out.append(f"Latencies ({i.mode}) were measured {where}. p99 is over {i.repeats} rounds"
               + (" (fewer than 100: close to the maximum)." if i.repeats < 100 else "."))
    return out


def render(m: Measurement, checks: list[Check], budgets: dict[str, dict[str, float]],
           params: dict[str, Any]) -> str:
    """The deployment document, as Markdown."""
    cap, i = m.cap, m.inference
    v = verdict(checks)
    card = cap.card_bytes
    label = analysis.how(m)
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    parts = [
        f"# Ensemble deployment — wave {WAVE} → {DEPLOYMENT}: **{v}**",
        "",
        f"Generated {now} from the wave {WAVE} measurement of {(m.measured_at or '?')} on "
        f"**{m.device.name}** ({m.device.type}), torch {m.environment.torch}, git {measured_revision(m)}. "
        "Memory in MB = 10^6 bytes.",
        "",
        analysis.depends_on_text(m),
        "",
        (f"**Every memory figure in this document is {NOT_ENFORCED}**: measured on the CPU, where no memory "
         "cap exists, by adding up the bytes each model's measured step holds as the interleaved run would hold them."
         if not cap.enforced else
         f"Memory figures are **enforced**: the CUDA caching allocator was capped at {mb(cap.cap_bytes)} MB "
         f"(`torch.cuda.set_per_process_memory_fraction({cap.fraction:.6f})`) so that cap + CUDA context "
         f"({mb(cap.context_bytes)} MB) = {mb(cap.limit_bytes)} MB; an allocation past it is a real "
         "out-of-memory error."),
        "",
        "## Decision",
        "",
        f"{DEPLOYMENT} (ensemble deployment) is **{v}** on this device: "
        + ("every check passed." if v == "GO" else "at least one check failed.")
        + f" It holds for the card class **{m.card_class.title}**"
        + (" (emulated here: the class's limits enforced, its speed and CUDA context this GPU's)"
           if m.card_class.emulated else "")
        + ", with this configuration; another class of card has a report of its own (the index's first lines).",
        "",
        _table(["check", "measured (MB)", "limit (MB)", "result", "how"],
               [[c.name, mb(c.measured), mb(c.limit), "PASS" if c.passed else "FAIL", c.note] for c in checks]),
        "",
        "## Configuration of each model",
        "",
        f"TFT configuration: {m.tft.source}; precision {m.tft.precision}, overrides "
        f"`{json.dumps(m.tft.overrides)}`. Training: Adam at each model's learning rate, one step of each "
        f"model in turn ({' → '.join(m.order)}), {m.steps} steps each, gradients freed after every step. "
        f"Inference: eval mode, no_grad, each model in its precision; {i.how}.",
        "",
    ]
    for name in m.order:
        info = m.models[name]
        parts += [f"### {name} — {info.title}", "", f"preset `{info.preset}`, precision **{info.precision}**", "",
                  "```json", json.dumps(info.config, indent=1), "```", ""]
    rows = [[name, p["precision"], f"{p['steps_run']}/{m.steps}",
             *(mb(p[k], 2) for k in ("kept_bytes", "model_peak_bytes", "peak_bytes", "resident_bytes",
                                     "forward_bytes")),
             p["batch"], *(_ms(p[k]) for k in ("alone_p50_s", "together_p50_s", "together_p99_s"))]
            for name, p in analysis.per_model(m).items()]
    parts += [
        "## Memory and latency of each model",
        "",
        f"All memory figures: {label}. *Kept between steps*: weights, Adam state and the model's batch/buffers on "
        "the device. *Model peak*: its own step's tensors at their largest (what it keeps + what its step adds). "
        "*Allocated during its steps, all models*: everything live while it steps (the other models' kept memory "
        "included). Latency: *alone* = one model at a time; "
        f"*together* = all {in_words(len(m.order))} launched at once ({i.mode}), p50 and p99 over {i.repeats} rounds.",
        "",
        _table(["model", "precision", "steps run", "training: kept between steps (MB)",
                "training: model peak (MB)", "training: allocated during its steps, all models (MB)",
                "inference: weights + input (MB)", "inference: forward peak alone (MB)", "inference batch",
                "alone p50 (ms)", "together p50 (ms)", "together p99 (ms)"], rows),
        "",
        f"## Headroom on the {mb(card)} MB card",
        "",
    ]
    head = budgets["ensemble"]["min_headroom_mb"] * MB
    proc = analysis.process_figure(m)
    hrows = []
    for phase, title in (("training", "training (interleaved)"), ("inference", "concurrent inference")):
        used = analysis.figure(m, phase)
        hrows.append([title, mb(m.phase(phase).peak_bytes), mb(analysis.context_bytes(m, phase)), mb(used),
                      mb(card - used), f"{100 * used / card:.1f} %", "yes" if m.phase(phase).oom else "no", label])
    parts += [
        _table(["phase", "peak (MB)", "CUDA context (MB)", "on the card (MB)", "headroom (MB)", "share of the card",
                "out of memory", "how"], hrows),
        "",
        f"The budgets file asks for at least {mb(head, 0)} MB free in concurrent inference "
        f"(`[ensemble] min_headroom_mb`).",
        "",
        f"The ensemble's **process figure** (model peaks summed + cuBLAS workspaces once per stream + CUDA "
        f"context): {mb(proc)} MB, as if every model were at its peak at once"
        + ("" if proc is not None else " (not measured: a model did not step)") + "; "
        f"{analysis.nvml_text(m)}",
        "",
        analysis.cap_text(m),
        "",
    ]
    for phase in ("training", "inference"):
        oom = m.phase(phase).oom
        if oom:
            parts += [f"**Out of memory in {phase}** {oom.where}: needed {mb(oom.needed_bytes, 2)} MB; {oom.error}",
                      ""]
    parts += ["## How to reproduce", ""]
    for purpose, cmds in reproduce_commands(m, params).items():
        parts += [f"{purpose}:", "", "```sh", *cmds, "```", ""]
    parts += ["## Risks that remain", "", *(f"- {r}" for r in risks(m, budgets)),
              "", "*Source: `results.json` and `measurement.json` beside this file; report `report.html`.*", ""]
    return "\n".join(parts)


def write(out_dir: str | Path, m: Measurement, checks: list[Check], budgets: dict[str, dict[str, float]],
          params: dict[str, Any]) -> Path:
    """Write deployment.md into `out_dir` (the wave's output folder) and return its path."""
    return write_text(Path(out_dir or ".") / FILE, render(m, checks, budgets, params))
