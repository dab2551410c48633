"""Open a report in headless Chromium, as a reader would: do the charts load, is the verdict visible?

No browser driver is needed: a copy of the page gets a small script that, once the page has
loaded, writes what it found into an attribute of <body>; Chromium's --dump-dom prints the DOM
after the scripts ran. A screenshot of the page can be taken the same way.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from foxlib.report.captioned import PLACEHOLDER_ALTS

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--virtual-time-budget=10000"]

# an image has alt text as foxlib.report.captioned.has_alt_text says: not missing, not blank, not a placeholder
_PROBE = """<script>
window.addEventListener('load', () => {
  const imgs = [...document.images];
  const placeholders = __PLACEHOLDER_ALTS__;
  const hasAlt = i => {
    const alt = (i.getAttribute('alt') || '').trim().toLowerCase();
    return !!alt && !placeholders.includes(alt);
  };
  const verdict = document.querySelector('.foxlib-verdict');
  const box = verdict ? verdict.getBoundingClientRect() : null;
  document.body.setAttribute('data-foxlib-check', JSON.stringify({
    images: imgs.length,
    broken_images: imgs.filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src.slice(0, 60)),
    verdict_text: verdict ? verdict.innerText.split('\\n')[0] : null,
    verdict_visible: !!box && box.width > 0 && box.height > 0 && getComputedStyle(verdict).visibility !== 'hidden',
    verdict_top_px: box ? box.top : null,
    tables: document.querySelectorAll('table').length,
    title: document.title,
    images_without_alt: imgs.filter(i => !hasAlt(i)).map(i => i.src.slice(0, 60)),
    images_without_caption: imgs.filter(i => !(i.closest('figure') && i.closest('figure').querySelector('figcaption')))
                                .map(i => i.src.slice(0, 60)),
    widest_table_px: Math.max(0, ...[...document.querySelectorAll('table')].map(t => t.getBoundingClientRect().width)),
    window_px: window.innerWidth,
    links: [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href')),
    ledger_rows: document.querySelectorAll('#ledger + p + table tr').length - 1,
    // a table cell's alignment as drawn: numbers (class foxlib-num, the index's num) right, text left
    table_cells: document.querySelectorAll('table td, table th').length,
    misaligned_cells: [...document.querySelectorAll('table td, table th')].filter(c => {
      const want = c.classList.contains('foxlib-num') || c.classList.contains('num') ? 'right' : 'left';
      return getComputedStyle(c).textAlign !== want;
    }).map(c => `${c.tagName.toLowerCase()} ${getComputedStyle(c).textAlign}: ${c.innerText.slice(0, 40)}`),
  }));
});
</script>""".replace("__PLACEHOLDER_ALTS__", json.dumps([p.lower() for p in PLACEHOLDER_ALTS]))


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    raise FileNotFoundError("no Chromium found: install it with `apt-get install -y chromium` (make test does)")


def check_page(html_path: Path, timeout_s: int = 120, width_px: int = 1400) -> dict:
    """Load `html_path` in headless Chromium, in a window `width_px` wide, and return what the page
    showed (see _PROBE)."""
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "page.html"
        probe.write_text(Path(html_path).read_text().replace("</body>", _PROBE + "</body>", 1))
        out = subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--window-size={width_px},1000",
                              f"--user-data-dir={tmp}/profile", "--dump-dom",
                              probe.as_uri()], capture_output=True, text=True, timeout=timeout_s)
    m = re.search(r'data-foxlib-check="([^"]*)"', out.stdout)
    if not m:
        raise RuntimeError(f"Chromium did not run the page's check (exit {out.returncode}): {out.stderr[-500:]}")
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def screenshot(html_path: Path, png_path: Path, width: int = 1280, height: int = 1800, timeout_s: int = 120) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp}/profile",
                        f"--window-size={width},{height}", f"--screenshot={Path(png_path).resolve()}",
                        Path(html_path).resolve().as_uri()], capture_output=True, timeout=timeout_s, check=True)
    return Path(png_path)
