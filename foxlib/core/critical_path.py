"""The waves of the critical path: each a notebook under notebooks/ and a package under foxlib/waves/
(imported by name when a wave runs, so that nothing here imports a wave)."""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from foxlib.core import config


@dataclass(frozen=True)
class Wave:
    id: str
    title: str
    question: str

    @property
    def notebook(self) -> Path:
        """The jupytext py:percent source of the wave's notebook."""
        return config.NOTEBOOKS_DIR / f"wave-{self.id}.py"

    def part(self, name: str):
        """One module of the wave's package: foxlib/waves/wave_<N>/<name>.py."""
        return importlib.import_module(f"foxlib.waves.wave_{self.id.replace('.', '_')}.{name}")

    @property
    def built(self) -> bool:
        return self.notebook.exists()


WAVES = {w.id: w for w in (
    Wave("8.10", "TFT GPU memory profile", "Does the TFT fit its memory budget, and where does the memory go?"),
    Wave("8.11", "Mixed precision", "What do fp16 and bf16 buy in memory and speed, and what do they cost in accuracy?"),
    Wave("8.12", "Gradient checkpointing", "Which optimisation strategy brings the TFT under budget, fastest?"),
    Wave("8.13", "Production validation", "Does the whole ensemble train and serve under a real 4 GB cap?"),
)}
DEPLOYMENT = "8.14"  # ensemble deployment: GO when 8.13 is GO


def get_wave(wave_id: str) -> Wave:
    """The wave `wave_id`; ValueError naming the valid waves otherwise."""
    wave = WAVES.get(str(wave_id))
    if wave is None:
        if str(wave_id) == DEPLOYMENT:  # listed by `make waves`, but no notebook: 8.13's verdict decides it
            raise ValueError(f"wave {DEPLOYMENT} (ensemble deployment) is not run: it is GO when wave 8.13 is; run "
                             f"`make report WAVE=8.13` (its deployment.md is the deployment document)")
        raise ValueError(f"unknown wave {wave_id!r}; valid waves: {', '.join(WAVES)}")
    if not wave.built:
        built = [w.id for w in WAVES.values() if w.built]
        raise ValueError(f"wave {wave_id} ({wave.title}) is not built yet; waves that run: {', '.join(built)}")
    return wave
