"""Input guards: bounded reads, safe messages and a bounded folder walk (issue 14).

Every file a reader opens goes through :func:`check_file` first (``common.read_text``,
``common.read_csv``/``read_columns``, ``db.connect``, the trace streamer): it refuses what is not
a regular file (FIFO, device, socket), symlink loops and files larger than the cap of their kind,
each with an :class:`~advisor_chat.errors.InputError` that names the file and says what to do.
CSV headers are sniffed from a bounded prefix (:func:`sniff_csv`) so that a multi-GB file of
garbage is refused after reading 64 KB, not after parsing it. Text that comes from a file
(headers, values) is cut by :func:`short` before it enters a message; paths go through
:func:`show_path` so that a folder name that is not UTF-8 prints as escapes instead of crashing
the terminal.

:class:`WalkBudget` bounds the layout search (folders visited, seconds) and remembers the
``(device, inode)`` of every folder, so a symlink loop or a folder reached twice (``ln -s . a``)
is visited once.
"""

from __future__ import annotations

import functools
import os
import re
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from advisor_chat.errors import InputError
from advisor_chat.ingest.profile import DataWarning

if TYPE_CHECKING:
    from advisor_chat.ingest.common import RankData

MB = 1 << 20

#: Size caps per file kind (bytes). Real files stay far below them (a 1-day Level1 run of one
#: rank writes a kernel_details.csv of a few hundred MB); a file above its cap is refused with a
#: message before anything is parsed. ``ADVISOR_MAX_FILE_MB`` overrides every cap.
SIZE_CAPS: dict[str, int] = {
    "kernel_details.csv": 8 << 30,
    "op_summary.csv": 8 << 30,
    "trace_view.json": 32 << 30,
    "communication.json": 4 << 30,
    "communication_matrix.json": 4 << 30,
    "cluster_communication.json": 4 << 30,
    "cluster_communication_matrix.json": 4 << 30,
    ".db": 64 << 30,
    ".csv": 1 << 30,
    ".json": 512 * MB,
}
DEFAULT_CAP = 1 << 30

#: Bytes read to sniff a CSV header (a real header is < 2 KB).
SNIFF_BYTES = 64 << 10

#: Layout walk limits: folders visited and seconds spent before giving up with a message.
MAX_WALK_DIRS = 20000
MAX_WALK_SECONDS = 20.0

_KIND_NAMES = (
    "kernel_details",
    "op_summary",
    "trace_view",
    "cluster_communication_matrix",
    "cluster_communication",
    "communication_matrix",
    "communication",
)

_REMEDY_COPY = (
    "Copy the file again from the training machine, or re-run the offline parse of torch_npu"
)


def show_path(path: str | Path | None) -> str:
    """``path`` as printable text: undecodable bytes and control characters become escapes."""
    if path is None:
        return ""
    s = os.fspath(path)
    if isinstance(s, bytes):  # pragma: no cover - Path never gives bytes
        s = os.fsdecode(s)
    try:
        s = os.fsencode(s).decode("utf-8", "backslashreplace")  # undecodable bytes → \\xff
    except UnicodeError:
        s = s.encode("utf-8", "backslashreplace").decode("utf-8")
    return "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}" for ch in s)


def is_utf8(path: str | Path) -> bool:
    """Whether ``path`` is valid UTF-8 (no undecodable bytes kept as surrogates)."""
    try:
        os.fspath(path).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def not_utf8_error(path: str | Path) -> InputError:
    """The :class:`InputError` for a folder whose name is not UTF-8."""
    return InputError(
        f"the folder name {show_path(path)} is not valid UTF-8; its bytes cannot be shown or stored "
        "in the result tables",
        path=show_path(path),
        remedy="Rename the folder to a UTF-8 name (e.g. `mv` it in a UTF-8 terminal), or copy the "
        "profiling data to a folder with a plain name",
    )


def short(text: object, limit: int = 120) -> str:
    """``text`` on one line, control characters escaped, cut to ``limit`` characters (``…`` added)."""
    s = show_path(str(text))
    return s if len(s) <= limit else s[: limit - 1] + "…"


def short_list(items: list[str], n: int = 12, each: int = 40) -> str:
    """A bounded rendering of a list of (untrusted) names: first ``n``, each cut to ``each`` chars."""
    shown = [short(x, each) for x in items[:n]]
    more = f", … ({len(items) - n} more)" if len(items) > n else ""
    return "[" + ", ".join(repr(x) for x in shown) + more + "]"


def size_cap(path: Path) -> int:
    """The size cap (bytes) for ``path`` from :data:`SIZE_CAPS` (by name, then by extension)."""
    env = os.environ.get("ADVISOR_MAX_FILE_MB")
    if env:
        try:
            return int(float(env) * MB)
        except ValueError:
            pass
    return _cap_of_name(os.path.basename(path))


@functools.lru_cache(maxsize=1024)
def _cap_of_name(name: str) -> int:
    ext = os.path.splitext(name)[1]
    for kind in _KIND_NAMES:
        if name.startswith(kind):
            key = kind + ext
            if key in SIZE_CAPS:
                return SIZE_CAPS[key]
    return SIZE_CAPS.get(ext, DEFAULT_CAP)


def check_file(path: Path) -> os.stat_result:
    """Check that ``path`` is a readable regular file within its size cap, before opening it.

    Returns:
        The ``stat`` result (following symlinks).

    Raises:
        InputError: A symlink loop or dangling symlink, not a regular file (FIFO, device, socket,
            folder), above the size cap of its kind, or not readable.
    """
    try:
        st = os.stat(path)
    except PermissionError as exc:
        shown = show_path(path)
        raise InputError(
            f"permission denied reading {shown}",
            path=shown,
            remedy="Make the profiling folder readable (e.g. `chmod -R a+rX <folder>`) or copy it to a "
            "folder you own, then load it again",
        ) from exc
    except OSError as exc:
        shown = show_path(path)
        what = (
            "is a symlink loop"
            if exc.errno == 40
            else ("is a dangling symlink" if os.path.islink(path) else "cannot be opened")
        )
        raise InputError(
            f"{shown} {what} ({exc.strerror or exc})",
            path=shown,
            remedy="Replace the link with the real file (copy the profiling folder with `cp -rL`)",
        ) from exc
    if not stat.S_ISREG(st.st_mode):
        kind = (
            "a FIFO (named pipe)"
            if stat.S_ISFIFO(st.st_mode)
            else "a device"
            if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
            else "a socket"
            if stat.S_ISSOCK(st.st_mode)
            else "a folder"
            if stat.S_ISDIR(st.st_mode)
            else "not a regular file"
        )
        shown = show_path(path)
        raise InputError(
            f"{shown} is {kind}, not a regular file; it was not read",
            path=shown,
            remedy="Replace it with the real profiler output file",
        )
    cap = size_cap(path)
    if st.st_size > cap:
        shown = show_path(path)
        raise InputError(
            f"{shown} is {st.st_size / MB:,.0f} MB, above the {cap / MB:,.0f} MB limit for this kind of "
            "file; it was not read",
            path=shown,
            remedy="Check that it is a real profiler file (not a concatenation or a core dump), or "
            "raise the limit with ADVISOR_MAX_FILE_MB",
        )
    return st


def sniff_csv(path: Path, size: int) -> None:
    """Refuse a CSV whose first bytes are binary or hold no line break (bounded read).

    Raises:
        InputError: NUL bytes or a zip/gzip signature in the first 64 KB, or no line break there
            while the file is longer.
    """
    try:
        with path.open("rb") as fh:
            head = fh.read(SNIFF_BYTES)
    except PermissionError as exc:
        raise InputError(
            f"permission denied reading {show_path(path)}", path=show_path(path)
        ) from exc
    except OSError as exc:
        raise InputError(
            f"cannot read {show_path(path)}: {exc.strerror or exc}", path=show_path(path)
        ) from exc
    sniff_csv_head(path, size, head)


def sniff_csv_head(path: Path, size: int, head: bytes) -> None:
    """:func:`sniff_csv` on the first :data:`SNIFF_BYTES` of the file, already read (``head``).

    Raises:
        InputError: As :func:`sniff_csv`.
    """
    if head.startswith((b"PK\x03\x04", b"\x1f\x8b", b"BZh", b"\xfd7zXZ", b"SQLite format 3")):
        raise InputError(
            f"{show_path(path)} is an archive or database, not a CSV file",
            path=show_path(path),
            remedy="Unpack the archive first (or use the original CSV), then load the folder again",
        )
    if b"\x00" in head:
        raise InputError(
            f"{show_path(path)} holds binary data, not CSV text (NUL bytes in the first "
            f"{len(head) // 1024 or 1} KB)",
            path=show_path(path),
            remedy=_REMEDY_COPY,
        )
    if size > len(head) and b"\n" not in head:
        raise InputError(
            f"{show_path(path)} is not a CSV file: no line break in its first {SNIFF_BYTES // 1024} KB "
            "(a real header is one short line)",
            path=show_path(path),
            remedy=_REMEDY_COPY,
        )


#: Bytes of a CSV's body sampled by :func:`sniff_csv_body` before the whole file is read.
BODY_SNIFF_BYTES = 1 << 20
#: Body lines of that sample that are checked.
BODY_SNIFF_LINES = 100
#: Smaller files are not sampled (read whole, they cannot exhaust memory).
BODY_SNIFF_MIN_BYTES = 8 << 20


def sniff_csv_body(
    path: Path, names: list[str], numeric: list[str], size: int | None = None
) -> None:
    """Refuse a CSV whose first body lines do not look like rows of its header (bounded read).

    Files under :data:`BODY_SNIFF_MIN_BYTES` are left to the reader. Reads at most
    :data:`BODY_SNIFF_BYTES` after the header. A line counts as a row when it has
    the header's number of fields and every ``numeric`` column is a number, empty or ``N/A``.
    The file is refused when no complete line fits in the sample while the file is longer (a
    "row" of over 1 MB), or when fewer than half of the sampled lines (up to
    :data:`BODY_SNIFF_LINES`) are rows. This keeps a valid header followed by garbage from being
    read (and held in memory) whole.

    Args:
        path: The CSV file.
        names: Its header (after aliases), as the reader sees it.
        numeric: Columns of ``names`` whose values must be numbers.
        size: The file's size when the caller has stat'ed it already.

    Raises:
        InputError: The sample does not look like rows of the header (the message names the
            file and the counts; it never echoes the file).
    """
    import csv

    try:
        if (path.stat().st_size if size is None else size) < BODY_SNIFF_MIN_BYTES:
            return
        with path.open("rb") as fh:
            fh.readline(SNIFF_BYTES)
            sample = fh.read(BODY_SNIFF_BYTES)
            more = bool(fh.read(1))
    except OSError:
        return  # the reader reports unreadable files
    if not sample.strip():
        return
    cut = sample.rfind(b"\n")
    if more or cut >= 0:
        sample = sample[: cut + 1] if cut >= 0 else b""
    if not sample:
        raise InputError(
            f"{show_path(path)} is not a valid CSV: no line ends within {BODY_SNIFF_BYTES >> 20} MB "
            "after the header (a row is one short line); the file looks corrupted",
            path=show_path(path),
            remedy=_REMEDY_COPY,
        )
    lines = [ln for ln in sample.decode("utf-8", "replace").splitlines() if ln.strip()]
    lines = lines[:BODY_SNIFF_LINES]
    width = len(names)
    idx = [names.index(c) for c in numeric if c in names]
    good = 0
    try:
        rows = list(csv.reader(lines))
    except csv.Error:
        rows = []
    for row in rows:
        if len(row) != width:
            continue
        ok = True
        for i in idx:
            v = row[i].strip().strip('"').strip()
            if v in ("", "N/A", "NA", "n/a"):
                continue
            try:
                float(v)
            except ValueError:
                ok = False
                break
        good += ok
    if lines and good * 2 < len(lines):
        raise InputError(
            f"{show_path(path)} is not a valid CSV: only {good} of its first {len(lines)} line(s) "
            f"after the header are rows of it ({width} fields, numbers in {', '.join(numeric)}); "
            "the file looks corrupted",
            path=show_path(path),
            remedy=_REMEDY_COPY,
        )


def read_bytes(path: Path) -> bytes:
    """Read a whole (capped) file after :func:`check_file`.

    Raises:
        InputError: See :func:`check_file`; an I/O error.
    """
    check_file(path)
    try:
        return path.read_bytes()
    except PermissionError as exc:
        raise InputError(
            f"permission denied reading {show_path(path)}", path=show_path(path)
        ) from exc
    except OSError as exc:
        raise InputError(
            f"cannot read {show_path(path)}: {exc.strerror or exc}",
            path=show_path(path),
            remedy=_REMEDY_COPY,
        ) from exc


@dataclass
class WalkBudget:
    """Limits of one layout walk; remembers the folders seen by ``(st_dev, st_ino)``.

    Attributes:
        max_dirs: Folders that may be listed.
        max_seconds: Wall time allowed.
        seen: ``(device, inode)`` of every folder entered.
        dirs: Folders listed so far.
        skipped_repeats: Folders reached a second time (symlinks to ``.`` or loops), not re-entered.
    """

    max_dirs: int = -1  # -1: MAX_WALK_DIRS at creation time
    max_seconds: float = -1.0  # -1: MAX_WALK_SECONDS at creation time
    seen: set[tuple[int, int]] = field(default_factory=set)
    dirs: int = 0
    skipped_repeats: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        if self.max_dirs < 0:
            self.max_dirs = MAX_WALK_DIRS
        if self.max_seconds < 0:
            self.max_seconds = MAX_WALK_SECONDS

    def enter(self, path: str | Path, st: os.stat_result | None = None) -> bool:
        """Whether ``path`` should be listed: False when already seen (or not stat-able).

        ``st``: the folder's ``os.stat`` (symlinks followed) when the caller has it already
        (``DirEntry.stat()``); else it is taken here.

        Raises:
            InputError: The folder or time budget is exhausted.
        """
        if st is None:
            try:
                st = os.stat(path)
            except OSError:
                return False
        key = (st.st_dev, st.st_ino)
        if key in self.seen:
            self.skipped_repeats.append(str(path))
            return False
        self.seen.add(key)
        self.dirs += 1
        if self.dirs > self.max_dirs or time.monotonic() - self.started > self.max_seconds:
            raise InputError(
                f"gave up searching for profiling data after {self.dirs - 1:,} folders "
                f"({time.monotonic() - self.started:.0f} s); the path does not look like a profiling "
                "folder",
                remedy="Point at the folder that holds the *_ascend_pt / *_ascend_ms rank folders, the "
                "PROF_* folders or cluster_analysis_output/, not at a system or home folder",
            )
        return True


def repeat_warnings(repeats: list[str]) -> list[DataWarning]:
    """One ``folder_repeated`` warning for the folders the walk reached a second time.

    Args:
        repeats: :attr:`WalkBudget.skipped_repeats` (``Layout.repeats``): paths that lead to a
            folder already entered (a symlink to ``.`` or to a parent, or a second link to a rank
            folder).

    Returns:
        ``[]`` when there are none, else one warning naming up to 5 of them and the count.
    """
    if not repeats:
        return []
    paths = list(dict.fromkeys(repeats))
    shown = ", ".join(show_path(p) for p in paths[:5]) + (
        f" and {len(paths) - 5} more" if len(paths) > 5 else ""
    )
    return [
        DataWarning(
            code="folder_repeated",
            message=f"skipped {len(paths)} folder(s) reached a second time through a symlink "
            f"({shown}): they lead to a folder already read, so its ranks were read once. Remove "
            "the link (e.g. `ln -s . x`) if it was not meant to be there",
            path=paths[0],
        )
    ]


_FOLDER_RANK = re.compile(r"^rank[_-]?(\d+)(?:_|$)", re.IGNORECASE)

#: Ranks of one run stop collecting within seconds of each other; further apart than this, the
#: folders most likely come from different runs.
SAME_RUN_SECONDS = 600.0


def _as_rank(v: object) -> int | None:
    try:
        f = float(str(v).strip())
    except (TypeError, ValueError):
        return None
    return int(f) if f == int(f) and f >= 0 else None


def rank_list(v: object) -> list[int] | None:
    """``v`` as a list of rank numbers (ints or digit strings), or ``None`` when it is not one."""
    if not isinstance(v, (list, tuple)):
        return None
    if not v or (set(map(type, v)) == {int} and min(v) >= 0):
        return list(v)  # the common case (JSON integers): no per-element conversion
    out = []
    for x in v:
        r = None if isinstance(x, bool) else _as_rank(x)
        if r is None:
            return None
        out.append(r)
    return out


def count_or_none(v: object, field: str, problems: list[str]) -> int | None:
    """A positive integer setting (``world_size`` …) or ``None``; a bad value is noted in ``problems``."""
    if v is None:
        return None
    r = None if isinstance(v, bool) else _as_rank(v)
    if r is None or r == 0:
        problems.append(f"distributed_args.{field} = {short(v, 30)!r} is not a positive integer")
        return None
    return r


def _tables_of(u: RankData) -> set[str]:
    have = {s.table for s in u.sources} | set(u.tables)
    heavy = u.meta.get("heavy_files")
    if isinstance(heavy, dict):
        have |= set(heavy)
    return have


#: The text export's file of each table a rank may lack (``missing_table``).
_TABLE_FILES = {
    "step_trace": "step_trace_time.csv",
    "kernels": "kernel_details.csv",
    "comm_ops": "communication.json",
}


def _empty_file(u: RankData, table: str) -> Path | None:
    """The rank's text-export file of ``table`` when it exists but gave no rows, else ``None``."""
    name = _TABLE_FILES.get(table)
    if name is None or u.export not in ("text", "mindspore"):
        return None
    f = Path(u.source_dir) / "ASCEND_PROFILER_OUTPUT" / name
    return f if f.is_file() else None


def _ranks_text(units: list[RankData]) -> str:
    rs = sorted(int(u.rank) for u in units if u.rank is not None)
    shown = ", ".join(str(r) for r in rs[:12]) + (" …" if len(rs) > 12 else "")
    folders = ", ".join(show_path(u.source_dir) for u in units[:2]) + (
        f" and {len(units) - 2} more" if len(units) > 2 else ""
    )
    return f"rank(s) {shown} ({folders})"


def check_units(units: list[RankData]) -> list[DataWarning]:
    """Consistency of the rank units of one load (after ranks are assigned).

    Flags (``DataWarning`` codes):

    - ``rank_id_invalid``: ``rank_id`` inside ``profiler_info*.json`` is not a rank number.
    - ``rank_id_mismatch``: it disagrees with the rank in the file name (``profiler_info_{rank}.json``,
      the rank that is used, as msprof-analyze does), or a folder named ``rank{N}_…`` holds
      another rank's files.
    - ``metadata_invalid``: profiler_metadata.json entries of the wrong type (group ranks that are
      not rank numbers, a world size that is not a positive integer), ignored.
    - ``missing_table``: some ranks have a step trace (kernels, communication operators) and others
      have none (the file is absent, or gave no rows: a communication.json of the wrong shape).
    - ``both_exports``: a rank folder holds both the text export and the DB export
      (``ascend_pytorch_profiler_{rank}.db``): kernels and host dispatch come from the DB, the
      step trace and communication from the text files, which disagree if they are not one run.
    - ``mixed_runs``: the ranks stopped collecting more than :data:`SAME_RUN_SECONDS` apart
      (``end_info.collectionTimeEnd`` of profiler_info, or ``SESSION_TIME_INFO`` of the DB), e.g.
      text and DB ranks of different runs in one folder.

    Args:
        units: Rank and msprof units (``RankData``), ranks assigned.

    Returns:
        The warnings (empty when consistent).
    """
    out: list[DataWarning] = []
    for u in units:
        rid = u.meta.get("rank_id_in_file")
        if rid is None or u.export == "msprof":
            continue
        r = _as_rank(rid)
        if (r is None and str(rid).strip() != "-1") or (
            r is not None and u.rank is not None and r != u.rank
        ):  # only then is the file looked up, to name it
            info = next(iter(sorted(Path(u.source_dir).glob("profiler_info*.json"))), None)
            where = show_path(info or u.source_dir)
        if r is None and str(rid).strip() != "-1":
            out.append(
                DataWarning(
                    code="rank_id_invalid",
                    message=f"{where}: rank_id {short(rid, 40)!r} is not a rank number; rank "
                    f"{u.rank} (from the file name) is used. Check that the file is not damaged",
                    path=str(info or u.source_dir),
                    ranks=(u.rank,) if u.rank is not None else (),
                )
            )
        elif r is not None and u.rank is not None and r != u.rank:
            out.append(
                DataWarning(
                    code="rank_id_mismatch",
                    message=f"{where}: rank_id {r} inside the file disagrees with rank {u.rank} in its "
                    f"name; rank {u.rank} is used (as msprof-analyze does). Folders may have been "
                    "renamed or mixed up: check which rank this folder really is",
                    path=str(info or u.source_dir),
                    ranks=(u.rank, r),
                )
            )
    for u in units:
        problems = u.meta.get("metadata_problems") or []
        if problems:
            where = show_path(Path(u.source_dir) / "profiler_metadata.json")
            out.append(
                DataWarning(
                    code="metadata_invalid",
                    message=f"{where} (or the DB's META_DATA): {'; '.join(problems[:3])}"
                    f"{f' (+{len(problems) - 3} more)' if len(problems) > 3 else ''}; these entries "
                    "were ignored, so groups or the expected world size may be incomplete",
                    path=str(Path(u.source_dir) / "profiler_metadata.json"),
                    ranks=(u.rank,) if u.rank is not None else (),
                )
            )
        m = _FOLDER_RANK.match(Path(u.source_dir).name)
        if m and u.rank is not None and int(m.group(1)) != u.rank:
            out.append(
                DataWarning(
                    code="rank_id_mismatch",
                    message=f"{show_path(u.source_dir)}: the folder is named for rank {m.group(1)} but "
                    f"its files say rank {u.rank} ({u.meta.get('rank_origin') or 'profiler_info'}); "
                    f"rank {u.rank} is used. Check which rank this folder really is",
                    path=u.source_dir,
                    ranks=(u.rank, int(m.group(1))),
                )
            )
    both = [u for u in units if u.meta.get("has_db") and u.meta.get("has_text")]
    if both:
        out.append(
            DataWarning(
                code="both_exports",
                message=f"{_ranks_text(both)} hold both the text export and the DB export "
                "(ascend_pytorch_profiler_*.db): kernels and host dispatch are read from the DB, "
                "the step trace and communication from the text files. If the two are not from "
                "the same run their numbers disagree: keep one export per rank folder",
                path=both[0].source_dir,
                ranks=tuple(int(u.rank) for u in both if u.rank is not None),
            )
        )
    ranked = [u for u in units if u.export in ("text", "db", "mindspore", "msprof")]
    if len(ranked) > 1:
        for table, what in (
            ("step_trace", "step trace (step_trace_time.csv / StepTraceTime)"),
            ("kernels", "kernels (kernel_details.csv / the DB's TASK table)"),
            ("comm_ops", "communication operators (communication.json / analysis.db)"),
        ):
            have = [u for u in ranked if table in _tables_of(u)]
            lack = [u for u in ranked if table not in _tables_of(u)]
            if have and lack:
                empty = _empty_file(lack[0], table)
                who = _ranks_text(lack)
                if empty is not None:  # the file names the folder
                    who = f"{who.split(' (')[0]} ({show_path(empty)}"
                    who += f" and {len(lack) - 1} more)" if len(lack) > 1 else ")"
                state = (
                    f"a {empty.name} with no rows (header only or empty: cut short when copied "
                    "or written)"
                    if empty is not None
                    else f"no {what}"
                )
                fix = (
                    f"Copy {empty.name} of {'that rank' if len(lack) == 1 else 'those ranks'} "
                    "again from the training machine (or export the rank's profile again)"
                    if empty is not None
                    else "Copy the missing files from the training machine"
                )
                out.append(
                    DataWarning(
                        code="missing_table",
                        message=f"{who} have {state}, while {len(have)} other "
                        f"rank(s) have a {what.split(' (')[0]}; conclusions that compare ranks on "
                        f"it leave them out. {fix}",
                        path=str(empty) if empty is not None else lack[0].source_dir,
                        ranks=tuple(int(u.rank) for u in lack if u.rank is not None),
                    )
                )
    ends = [
        (u, float(u.meta["collection_end_ns"]))
        for u in ranked
        if _as_float(u.meta.get("collection_end_ns")) is not None
    ]
    if len(ends) > 1:
        ends.sort(key=lambda x: x[1])
        spread = (ends[-1][1] - ends[0][1]) / 1e9
        if spread > SAME_RUN_SECONDS:
            first, last = ends[0][0], ends[-1][0]
            exports = sorted({u.export for u, _ in ends})
            out.append(
                DataWarning(
                    code="mixed_runs",
                    message=f"the ranks look like different runs: rank {first.rank} "
                    f"({first.export} export, {show_path(first.source_dir)}) stopped collecting "
                    f"{spread / 60:,.0f} min before rank {last.rank} ({last.export} export, "
                    f"{show_path(last.source_dir)})"
                    + (f"; exports mixed: {', '.join(exports)}" if len(exports) > 1 else "")
                    + ". Comparing ranks across runs is meaningless: load the folders of one run",
                    path=last.source_dir,
                    ranks=tuple(int(u.rank) for u, _ in ends if u.rank is not None),
                )
            )
    return out


def _as_float(v: object) -> float | None:
    try:
        f = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return f if f == f else None
