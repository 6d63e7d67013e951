"""Layout detection: which profiling units a folder holds.

A *unit* is something one reader handles:

- ``rank``: an Ascend PyTorch Profiler ``*_ascend_pt`` folder (text or DB export) or a MindSpore
  ``*_ascend_ms`` folder. Recognised by the name suffix, or by holding ``ASCEND_PROFILER_OUTPUT/``
  or a ``profiler_info*.json`` (renamed folders such as ``rank0_ascend_pt`` or ``rank_3``).
- ``cluster``: a ``cluster_analysis_output/`` folder of ``msprof-analyze cluster`` (or any folder
  holding ``cluster_step_trace_time.csv`` / ``cluster_analysis.db``).
- ``msprof``: a ``PROF_*`` folder with ``mindstudio_profiler_output/`` that is not inside a rank folder.
- ``loose``: a plain folder holding copies of ``ASCEND_PROFILER_OUTPUT`` files (``kernel_details*.csv``,
  ``step_trace_time*.csv``, ``communication*.json``, ``trace_view*.json``) without the rank folder
  around them, e.g. a single kernel_details.csv someone sent; read as one rank of unknown id, and
  only when nothing else was found.

The search goes at most 10 levels deep (like msprof-analyze) and never descends into a unit. It is
bounded (:class:`~advisor_chat.ingest.guard.WalkBudget`: at most 20,000 folders and 20 s, then an
:class:`~advisor_chat.errors.InputError`), enters every folder once by ``(device, inode)`` so a
symlink loop or ``ln -s . again`` cannot repeat or multiply the units (the repeats are listed in
``Layout.repeats``), and refuses the kernel's pseudo file systems (``/proc``, ``/sys``, ``/dev``) at
once.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from advisor_chat.errors import InputError
from advisor_chat.ingest.guard import WalkBudget, is_utf8, not_utf8_error, show_path

MAX_DEPTH = 10
OUTPUT = "ASCEND_PROFILER_OUTPUT"
#: Never profiling data: framework/host logs, caches, VCS, and the AppleDouble copies (`._*`) that
#: macOS archivers put in `__MACOSX/` (they mirror the rank folders, which read as extra ranks).
_SKIP_DIRS = {"FRAMEWORK", "logs", "log", "__pycache__", ".git", "host", "__MACOSX"}
_PROF_RE = re.compile(r"^PROF_\d+_\d+_[A-Za-z0-9]+$|^PROF_")


@dataclass
class Layout:
    """Units found under a root folder (absolute paths, sorted)."""

    root: Path
    rank_dirs: list[Path] = field(default_factory=list)
    cluster_dirs: list[Path] = field(default_factory=list)
    msprof_dirs: list[Path] = field(default_factory=list)
    loose_dirs: list[Path] = field(default_factory=list)
    repeats: list[str] = field(default_factory=list)
    #: ``{rank folder: (its files, whether it holds ASCEND_PROFILER_OUTPUT/)}`` from the walk, so
    #: that the cache key and the plan do not list each rank folder a second time.
    listing: dict[str, tuple[list[str], bool]] = field(
        default_factory=dict, repr=False, compare=False
    )
    #: Every folder the walk listed, with its ``os.stat`` taken *before* the listing (a later
    #: change to the folder's entries changes its mtime/ctime): lets a reload trust the walk.
    dirs: list[tuple[str, os.stat_result]] = field(default_factory=list, repr=False, compare=False)

    @property
    def empty(self) -> bool:
        """True when nothing recognizable was found."""
        return not (self.rank_dirs or self.cluster_dirs or self.msprof_dirs or self.loose_dirs)


def _name(path: str | Path) -> str:
    return path.name if isinstance(path, Path) else os.path.basename(path)


def is_rank_dir(path: str | Path, names: set[str] | None = None) -> bool:
    """Whether ``path`` looks like one rank's profiler output folder."""
    if names is None:
        try:
            names = set(os.listdir(path))
        except OSError:
            return False
    if _name(path).endswith(("ascend_pt", "ascend_ms")):
        return True
    if "ASCEND_PROFILER_OUTPUT" in names:
        return True
    return any(n.startswith("profiler_info") and n.endswith(".json") for n in names)


#: A rank folder named by torch_npu / MindSpore: ``{worker_name}_{17-digit ms clock}_ascend_pt``,
#: where the default worker name is ``{hostname}_{pid}`` (ascend-formats.md, folder layout).
_WORKER_FOLDER_RE = re.compile(r"^(?P<worker>.+?)(?:_(?P<pid>\d+))?_\d{17}_ascend_(?:pt|ms)$")


def host_of_folder(path: str | Path) -> str | None:
    """The hostname in a rank folder's name, or ``None`` when the name does not carry one.

    ``gz-r07-npu01_3096504_20250109074801020_ascend_pt`` -> ``gz-r07-npu01`` (torch_npu's default
    worker name ``{hostname}_{pid}``; a custom worker name without a pid is returned whole).
    Renamed folders (``rank0_ascend_pt``) and ``PROF_*`` folders carry none.
    """
    m = _WORKER_FOLDER_RE.match(_name(path))
    return m.group("worker") if m else None


def is_cluster_dir(path: str | Path, names: set[str]) -> bool:
    """Whether ``path`` is an msprof-analyze cluster output folder."""
    return _name(path) == "cluster_analysis_output" or bool(
        names & {"cluster_step_trace_time.csv", "cluster_analysis.db", "cluster_communication.json"}
    )


def is_msprof_dir(path: str | Path, names: set[str]) -> bool:
    """Whether ``path`` is a CANN ``PROF_*`` folder with text output or an ``msprof_*.db``."""
    return _name(path).startswith("PROF_") and (
        "mindstudio_profiler_output" in names
        or any(n.startswith("msprof_") and n.endswith(".db") for n in names)
    )


def profiling_folder_of(path: str | Path) -> Path | None:
    """The profiling folder a file written at ``path`` would land in, if any.

    An ancestor of ``path`` that is a rank folder (:func:`is_rank_dir`), a cluster output or a
    ``PROF_*`` folder, or ``path``'s own folder when it directly holds such folders (a job's
    folder of ``*_ascend_pt`` ranks). ``None`` otherwise. Folders that cannot be listed are
    passed over.
    """
    here = Path(path).expanduser().resolve().parent
    try:
        inside = os.listdir(here)
    except OSError:
        inside = []
    for n in inside:
        sub = here / n
        if sub.is_dir() and (
            n.endswith(("ascend_pt", "ascend_ms"))
            or n == "cluster_analysis_output"
            or _PROF_RE.match(n) is not None
        ):
            return here
    for d in (here, *here.parents):
        try:
            names = set(os.listdir(d))
        except OSError:
            continue
        if is_rank_dir(d, names) or is_cluster_dir(d, names) or is_msprof_dir(d, names):
            return d
    return None


LOOSE_PREFIXES = (
    "kernel_details",
    "step_trace_time",
    "communication",
    "trace_view",
    "op_statistic",
)


def loose_name(name: str) -> str | None:
    """Canonical ASCEND_PROFILER_OUTPUT name of a loose copy, or ``None``.

    Example: ``kernel_details_2025.csv`` → ``kernel_details.csv``.
    """
    if name.startswith("communication_matrix") and name.endswith(".json"):
        return "communication_matrix.json"
    for pre in LOOSE_PREFIXES:
        if name.startswith(pre):
            ext = ".csv" if name.endswith(".csv") else ".json" if name.endswith(".json") else None
            if ext is None:
                return None
            canon = pre + ext
            if canon in (
                "kernel_details.csv",
                "step_trace_time.csv",
                "communication.json",
                "trace_view.json",
                "op_statistic.csv",
            ):
                return canon
    return None


_PSEUDO_FS = ("/proc", "/sys", "/dev")


def _is_file(e: os.DirEntry[str]) -> bool:
    try:
        return e.is_file()
    except OSError:
        return False


def _has_output(entries: list[os.DirEntry[str]]) -> bool:
    """Whether ``entries`` (a folder's listing) hold an ``ASCEND_PROFILER_OUTPUT`` folder (symlinks followed)."""
    for e in entries:
        if e.name == OUTPUT:
            try:
                return e.is_dir()
            except OSError:
                return False
    return False


def _parts(path: str) -> list[str]:
    return path.split("/")


def detect(root: Path, budget: WalkBudget | None = None) -> Layout:
    """Find every unit under ``root`` (``root`` itself may be a unit).

    Raises:
        InputError: ``root`` is in ``/proc``, ``/sys`` or ``/dev``; the walk budget ran out.
    """
    real = os.path.realpath(root)
    if any(real == p or real.startswith(p + "/") for p in _PSEUDO_FS):
        raise InputError(
            f"{show_path(root)} is a system folder ({real.split('/')[1]}), not profiling data",
            path=show_path(root),
            remedy="Point at the folder that holds the *_ascend_pt / *_ascend_ms rank folders",
        )
    if not is_utf8(root):
        raise not_utf8_error(root)
    budget = budget or WalkBudget()
    layout = Layout(root=root)
    # the walk works on strings (a Path per folder cost ~0.1 s at 4096 ranks); units become Paths
    found: dict[str, list[str]] = {"rank": [], "cluster": [], "msprof": [], "loose": []}
    try:
        root_st = os.stat(root)
    except OSError:
        return layout
    stack: list[tuple[str, int, os.stat_result]] = [(str(root), 0, root_st)]
    while stack:
        d, depth, st = stack.pop()
        if not budget.enter(d, st):
            continue
        layout.dirs.append((d, st))
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        names = {e.name for e in entries}
        if is_rank_dir(d, names):
            found["rank"].append(d)
            layout.listing[d] = (
                [e.path for e in entries if _is_file(e)],
                OUTPUT in names and _has_output(entries),
            )
            continue
        if is_cluster_dir(d, names):
            found["cluster"].append(d)
            continue
        if is_msprof_dir(d, names):
            found["msprof"].append(d)
            continue
        if any(loose_name(e.name) and _is_file(e) for e in entries):
            found["loose"].append(d)
        if depth >= MAX_DEPTH:
            continue
        for e in entries:
            if e.name in _SKIP_DIRS:
                continue
            try:
                if not e.is_dir(follow_symlinks=True):
                    continue
                sub = e.stat()  # for the walk's (device, inode) check
            except OSError:  # symlink loop, vanished entry
                continue
            stack.append((e.path, depth + 1, sub))
    layout.repeats = budget.skipped_repeats
    for units in found.values():
        bad = next((u for u in units if not is_utf8(u)), None)
        if bad is not None:
            raise not_utf8_error(bad)
    # sorted as Paths sort (component by component)
    layout.rank_dirs = [Path(u) for u in sorted(found["rank"], key=_parts)]
    layout.cluster_dirs = [Path(u) for u in sorted(found["cluster"], key=_parts)]
    layout.msprof_dirs = [Path(u) for u in sorted(found["msprof"], key=_parts)]
    layout.loose_dirs = [Path(u) for u in sorted(found["loose"], key=_parts)]
    if layout.rank_dirs or layout.cluster_dirs or layout.msprof_dirs:
        # loose copies next to real profiler output are notes or extracts, not extra ranks
        layout.loose_dirs = []
    return layout


def unit_files(
    unit: Path,
    kind: str,
    listing: tuple[list[str], bool] | None = None,
    dirs: list[tuple[str, os.stat_result]] | None = None,
) -> list[tuple[str, int, int, int]]:
    """Identity ``(path, size, mtime_ns, ctime_ns)`` of the files a reader of ``unit`` may read.

    ``ctime`` (set by the kernel on every write or metadata change, never by ``touch``) catches a
    rewrite of the same size whose mtime was put back (``touch -r``, ``cp -p``).

    Used for cache keys; raw binary data (FRAMEWORK/, PROF_*/ inside rank folders) is not listed.
    ``listing`` — the rank folder's files and whether it holds ``ASCEND_PROFILER_OUTPUT/``, as
    :func:`detect` recorded them (``Layout.listing``) — spares listing the folder again.
    ``dirs``, when given, receives every folder listed here with its ``os.stat`` taken before
    the listing (see ``Layout.dirs``).
    """
    out: list[tuple[str, int, int, int]] = []

    def files(d: Path | str) -> None:
        if dirs is not None:
            try:
                dirs.append((os.fspath(d), os.stat(d)))
            except OSError:
                return
        try:
            with os.scandir(d) as it:
                for e in it:
                    if _is_file(e):
                        try:
                            st = e.stat()
                        except OSError:
                            continue
                        out.append((e.path, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
        except OSError:
            pass

    if listing is not None and kind == "rank":
        top, has_output = listing
        for f in top:
            try:
                st = os.stat(f)
            except OSError:
                continue
            out.append((f, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
        if has_output:
            files(os.path.join(unit, OUTPUT))
        out.sort()
        return out
    files(unit)
    if kind == "rank":
        files(unit / OUTPUT)
    elif kind == "msprof":
        files(unit / "mindstudio_profiler_output")
        files(unit / "analyze")
        try:
            for e in os.scandir(unit):
                if e.is_dir() and e.name.startswith("device_"):
                    files(Path(e.path))
        except OSError:
            pass
    out.sort()
    return out
