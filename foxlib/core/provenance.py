"""Where a figure comes from: the revision it was measured and rendered at, and the files it cites.

A revision is a commit of a clean tree (`git rev-parse --short HEAD`), `<commit>+dirty` with uncommitted changes
to tracked files outside reports/ (what the runs write). A report that read another's results.json (8.13, the
peer benchmark: 8.12's) cites it (a Citation: path, revision, sha256); `verify` fails when the published file changed.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from foxlib.core import config
from foxlib.core.results import measured_revision, read_json
from foxlib.core.schema import Record, WaveMeasurement

DIRTY = "+dirty"


class ProvenanceError(ValueError):
    """A dirty tree where a clean one is needed, or a cited file that changed."""


def git_revision() -> str | None:
    """The tree's revision; FOXLIB_GIT_REVISION where set (a copy of the tree on a GPU machine); None if unknown."""
    if os.environ.get("FOXLIB_GIT_REVISION"):
        return os.environ["FOXLIB_GIT_REVISION"]
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=config.ROOT, capture_output=True,
                             text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!reports"],
                               cwd=config.ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if rev.returncode != 0 or not rev.stdout.strip():
        return None
    return rev.stdout.strip() + (DIRTY if dirty.stdout.strip() else "")


def is_clean(revision: str | None) -> bool:
    return bool(revision) and not revision.endswith(DIRTY)


def is_commit(revision: str | None, root: Path | None = None) -> bool | None:
    """Whether `revision` names a commit of the repository; None where git cannot tell (no .git, a shallow clone)."""
    rev = str(revision or "").removesuffix(DIRTY)
    if not rev:
        return False
    root = Path(root or config.ROOT)
    try:
        shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=root, capture_output=True,
                                 text=True, timeout=10)
        if shallow.returncode != 0 or shallow.stdout.strip() != "false":
            return None
        found = subprocess.run(["git", "cat-file", "-e", f"{rev}^{{commit}}"], cwd=root, capture_output=True,
                               timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return found.returncode == 0


def check_tree(allow_dirty: bool, what: str = "a report",
               measurement: Mapping[str, Any] | WaveMeasurement | None = None,
               source: str = "the measurement") -> str | None:
    """This tree's revision; ProvenanceError, unless `allow_dirty`, when it has uncommitted changes or the
    `measurement` rendered (named `source`) names no clean commit of this repository (check_measured)."""
    revision = git_revision()
    if not allow_dirty and not is_clean(revision):
        raise ProvenanceError(
            f"the tree has uncommitted changes (revision {revision or 'unknown'}): {what} must come from a commit. "
            "Commit first, or pass --allow-dirty (FOXLIB_ALLOW_DIRTY=1) and the page will say so")
    if measurement is not None:
        check_measured(measured_revision(measurement), allow_dirty, source)
    return revision


def check_measured(revision: str | None, allow_dirty: bool, what: str = "the measurement") -> None:
    """ProvenanceError, unless `allow_dirty`, when the revision a measurement names is not a clean commit of this
    repository."""
    if allow_dirty:
        return
    if not is_clean(revision):
        raise ProvenanceError(
            f"{what}: measured from uncommitted changes (revision {revision or 'unknown'}); measure it again at a "
            "commit, or pass --allow-dirty (FOXLIB_ALLOW_DIRTY=1) and the page will say so")
    if is_commit(revision) is False:
        raise ProvenanceError(
            f"{what}: it names revision {revision}, which is no commit of this repository (a mistyped "
            "FOXLIB_GIT_REVISION, or measured from another tree): measure it again at a commit, or pass "
            "--allow-dirty (FOXLIB_ALLOW_DIRTY=1) and the page will say so")


def sha256_of(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def display_path(path: Path) -> str:
    """A path relative to the reports folder's parent, or the repository, where it lies inside."""
    path = Path(path).resolve()
    base = next((b for b in (config.REPORTS_DIR.resolve().parent, config.ROOT) if path.is_relative_to(b)), None)
    return str(path.relative_to(base) if base else path)


@dataclass(frozen=True)
class Citation(Record):
    """A results file a measurement read (cite): path, revision, sha256 of its bytes."""
    path: str
    revision: str | None
    sha256: str


def cite(path: Path, data: dict[str, Any] | None = None) -> Citation:
    """A citation of the results file at `path`: its display_path, the revision it was measured at, its sha256."""
    path = Path(path)
    data = read_json(path) if data is None else data
    return Citation(display_path(path), measured_revision(data), sha256_of(path))


def verify(citations: Iterable[Citation], base: Path | None = None) -> None:
    """ProvenanceError unless every cited file (relative to `base`, default the reports' parent) has its sha256.
    Citations read from a file are typed where they are read (Citation.from_dict)."""
    base = Path(base or config.REPORTS_DIR.resolve().parent)
    for c in citations:
        path = base / c.path  # an absolute c.path stays itself
        if not path.is_file():
            raise ProvenanceError(f"the cited file {c.path} is missing (revision {c.revision})")
        actual = sha256_of(path)
        if actual != c.sha256:
            raise ProvenanceError(f"the cited file {c.path} changed since it was used: sha256 {actual[:12]} "
                                  f"is not the cited {c.sha256[:12]} (revision {c.revision}); "
                                  "re-run the wave that depends on it")
