"""Helpers shared by the format readers: CSV reading, value cleaning, HCCL naming, RankData.

Everything here knows the quirks listed in ``shared/reference/ascend-formats.md`` §0:
CRLF or LF line ends, absolute µs timestamps written as strings with a trailing TAB (quoted or
not), ``N/A`` for "not collected", shapes with embedded quotes (three double quotes around ``32,3,224,224`` in the
CSV text), header
generations that rename columns (``Block Dim``/``Block Num``, ``Step Id``/``Step ID``) and files
without ``Device_id``.
"""

from __future__ import annotations

import csv
import functools
import gc
import json
import math
import os
import re
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd

from advisor_chat.errors import InputError
from advisor_chat.ingest.guard import check_file, short, short_list, show_path, sniff_csv
from advisor_chat.ingest.profile import DataWarning, TableSource

#: Header aliases: every variant seen in real files → the name the readers use.
HEADER_ALIASES: dict[str, str] = {
    "Step ID": "Step Id",
    "Block Num": "Block Dim",
    "Mix Block Num": "Mix Block Dim",
    "Device_Id": "Device_id",
    "Device ID": "Device_id",
}

NA_VALUES = ["N/A", "NA", "n/a", ""]


@dataclass
class RankData:
    """What one rank folder (or one msprof ``PROF_*`` device) contributes. Picklable.

    Attributes:
        rank: Global rank id (``None`` if the folder does not say; the loader then fails or assigns).
        source_dir: Folder read (absolute).
        export: ``text``, ``db``, ``msprof`` or ``mindspore``.
        tables: Canonical tables (partial columns allowed; validated by the loader). ``comm_matrix``
            still holds *local* ranks in ``src_local``/``dst_local``; the loader maps them to global.
        sources: Files that contributed rows.
        warnings: Data-quality observations.
        meta: Flat dict for the ``meta`` table row (versions, level, env, config, sizes).
        groups: ``parallel_group_info`` entries: dicts ``{comm_name, group_name, group_rank, global_ranks}``.
        parsed_files: Number of files parsed (a cache hit parses none).
    """

    rank: int | None
    source_dir: str
    export: str
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    sources: list[TableSource] = field(default_factory=list)
    warnings: list[DataWarning] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    groups: list[dict[str, Any]] = field(default_factory=list)
    parsed_files: int = 0

    def add(
        self, table: str, df: pd.DataFrame, path: Path | str, version: str | None = None
    ) -> None:
        """Add ``df`` as (part of) ``table`` and record its source file."""
        if df is None or df.empty:
            return
        if table in self.tables and not self.tables[table].empty:
            self.tables[table] = pd.concat([self.tables[table], df], ignore_index=True)
        else:
            self.tables[table] = df
        self.sources.append(
            TableSource(
                table=table,
                path=str(path),
                export=self.export,  # type: ignore[arg-type]
                rank=self.rank,
                rows=len(df),
                version=version,
            )
        )


def read_text(path: Path) -> str:
    """Read a text file as UTF-8 (BOM tolerated).

    Raises:
        InputError: The file cannot be read (permissions, I/O error), is not a regular file (FIFO,
            device), is a symlink loop or is above its size cap (:func:`guard.check_file`).
    """
    check_file(path)
    try:
        return path.read_text(encoding="utf-8-sig", errors="replace")
    except PermissionError as exc:
        raise unreadable(path) from exc
    except OSError as exc:
        raise InputError(
            f"cannot read {show_path(path)}: {exc.strerror or exc}",
            path=show_path(path),
            remedy="Check that the file is a complete, readable copy of the profiling output",
        ) from exc


def unreadable(path: Path) -> InputError:
    """The :class:`InputError` for a file we are not allowed to read."""
    return InputError(
        f"permission denied reading {show_path(path)}",
        path=show_path(path),
        remedy=f"Make the profiling folder readable (e.g. `chmod -R a+rX {show_path(path.parent)}`) or copy it "
        "to a folder you own, then load it again",
    )


def _json_remedy(path: Path) -> str:
    """What to do about a damaged JSON file: who writes it can write it again."""
    if path.name.startswith("cluster_") or path.name == "communication_group.json":
        return (
            "Copy the file again, or run msprof-analyze cluster on the rank folders again to "
            "regenerate it"
        )
    return "Copy the file again from the training machine, or re-run the offline parse of torch_npu"


def read_json(path: Path) -> Any:
    """Parse a JSON file (orjson; the ``json`` module for what orjson refuses, e.g. ``NaN``).

    Raises:
        InputError: The file is unreadable, empty or not valid JSON, or its top level is not an
            object although the file kind always has one (communication*.json, profiler_info*.json,
            profiler_metadata.json, info.json*).
    """
    from advisor_chat.ingest.guard import read_bytes

    raw = read_bytes(path)  # checked: regular file within its size cap
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        data = orjson.loads(raw)  # fast path; NaN literals, bad UTF-8 etc. fall back to json
    except orjson.JSONDecodeError:
        data = _read_json_slow(path, raw)
    if path.name.startswith(_OBJECT_JSON) and not isinstance(data, dict):
        raise InputError(
            f"{show_path(path)} holds a JSON {type(data).__name__}, but this file is a JSON object "
            "({...}) in every profiler version; it is damaged or not the profiler's file",
            path=show_path(path),
            remedy=_json_remedy(path),
        )
    return data


def _read_json_slow(path: Path, raw: bytes) -> Any:
    text = raw.decode("utf-8", errors="replace")
    if not text.strip():
        raise InputError(
            f"{show_path(path)} is empty; the file looks truncated",
            path=show_path(path),
            remedy=_json_remedy(path),
        )
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        where = (
            f"{exc.msg.removesuffix(' at')} at line {exc.lineno}"
            if isinstance(exc, json.JSONDecodeError)
            else "nested too deeply"
        )
        raise InputError(
            f"{show_path(path)} is not valid JSON ({where}); the file looks truncated or corrupted",
            path=show_path(path),
            remedy=_json_remedy(path),
        ) from exc


#: JSON files whose top level is an object in every version (reference §1, §2, §3).
_OBJECT_JSON = (
    "communication",
    "cluster_communication",
    "profiler_info",
    "profiler_metadata",
    "info.json",
)


SMALL_CSV_BYTES = 256 << 10


def read_csv(path: Path, required: list[str] | None = None) -> pd.DataFrame:
    """Read an Ascend CSV, header aliases applied; ``N/A`` and empty fields become NaN.

    Small files (< 256 KB, the common case for step_trace_time.csv, op_statistic.csv and most
    kernel_details.csv of one rank) are read with the ``csv`` module into string columns, which is
    several times faster than the pandas parser's fixed cost per file; bigger ones use the pandas C
    parser with type inference. Either way timestamps with a trailing TAB stay strings until
    :func:`num` strips them, and quoted shapes until :func:`clean_str`.

    Args:
        path: CSV file (CRLF or LF; UTF-8 with or without BOM).
        required: Columns (after aliasing) that must be present.

    Raises:
        InputError: Unreadable file, or a required column is missing (the message names the file,
            the missing columns and the columns found).
    """
    size = check_file(path).st_size
    sniff_csv(path, size)
    if required:
        _check_required(path, _head_columns(path), required)
    cut = False
    try:
        if size < SMALL_CSV_BYTES:
            with path.open(newline="", encoding="utf-8-sig") as fh:
                rows = list(csv.reader(fh))
            cut = drop_cut_row(path, rows)
            if not rows:
                df = pd.DataFrame()
            else:
                header = rows[0]
                width = len(header)
                body = [
                    r + [""] * (width - len(r)) if len(r) < width else r[:width] for r in rows[1:]
                ]
                cols = list(zip(*body, strict=True)) if body else [()] * width
                df = pd.DataFrame(
                    {
                        i: pd.Series(
                            [None if v in _NA_SET else v for v in col], dtype=object, name=h
                        )
                        for i, (h, col) in enumerate(zip(header, cols, strict=True))
                    }
                )
                df.columns = header
        else:
            df = pd.read_csv(
                path,
                keep_default_na=False,
                na_values=NA_VALUES,
                encoding="utf-8-sig",
                engine="c",
                low_memory=False,
            )
    except PermissionError as exc:
        raise unreadable(path) from exc
    except pd.errors.EmptyDataError:
        df = pd.DataFrame()
    except (pd.errors.ParserError, csv.Error, OSError, ValueError) as exc:
        raise csv_error(path, exc) from exc
    df.columns = [HEADER_ALIASES.get(str(c).strip(), str(c).strip()) for c in df.columns]
    _check_required(path, list(df.columns), required)
    if cut:
        df.attrs["cut_row"] = True
    return df


def csv_error(path: Path, exc: Exception) -> InputError:
    """The :class:`InputError` for a CSV that cannot be parsed.

    Bytes that are not UTF-8 (a file re-saved as GBK by a Windows tool) are said as such, with
    the command that converts them.
    """
    if isinstance(exc, UnicodeDecodeError):
        return InputError(
            f"{show_path(path)} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset "
            f"{exc.start}); it was saved in another encoding (e.g. GBK by a Windows tool)",
            path=show_path(path),
            remedy=f"Re-save it as UTF-8 (e.g. `iconv -f GBK -t UTF-8 {path.name}`) or copy the "
            "profiler's original file again",
        )
    return InputError(
        f"cannot parse CSV {show_path(path)}: {short(exc, 200)}",
        path=show_path(path),
        remedy="Copy the file again from the training machine, or re-run the offline parse of torch_npu",
    )


def _head_columns(path: Path) -> list[str]:
    """Header of a CSV from a bounded prefix (after :func:`guard.sniff_csv`), aliases applied."""
    from advisor_chat.ingest.guard import SNIFF_BYTES

    with path.open("rb") as fh:
        head = fh.read(SNIFF_BYTES)
    line = head.split(b"\n", 1)[0].decode("utf-8-sig", errors="replace")
    try:
        cols = next(csv.reader([line.rstrip("\r")]), [])
    except csv.Error:
        cols = line.split(",")
    return [HEADER_ALIASES.get(c.strip(), c.strip()) for c in cols]


_NA_SET = frozenset(NA_VALUES)


#: Rank ids and world sizes above this are not a cluster's (the largest run on 2^17 ranks): they
#: are refused before anything is sized from them (sets of expected ranks, arrays by rank).
MAX_RANK_ID = 1 << 20


def plausible_world(n: float) -> bool:
    """Whether ``n`` can be a world size (1 .. :data:`MAX_RANK_ID`)."""
    return math.isfinite(n) and 1 <= n <= MAX_RANK_ID


def _flt(v: Any) -> float:
    if v is None:
        return math.nan
    try:
        return float(v)  # float() already ignores surrounding whitespace, incl. the trailing TAB
    except (TypeError, ValueError):
        try:
            return float(str(v).strip().strip('"').strip())
        except ValueError:
            return math.nan


def num(series: Any, index: Any = None) -> Any:
    """Values → float64 (numpy array for lists, Series for Series).

    Strips whitespace, trailing TABs and quotes; ``N/A``/empty → NaN. ``None`` gives an all-NaN
    column of ``len(index)`` (or a scalar NaN when no index is given, broadcast by the caller).
    """
    if series is None:
        if index is None:
            return math.nan
        return np.full(len(index), np.nan)
    if isinstance(series, list):
        try:  # numpy converts each value as float() does: a column of plain numbers in one call
            return np.asarray(series, dtype="float64")
        except (TypeError, ValueError):
            pass
        arr = np.fromiter((_flt(v) for v in series), dtype="float64", count=len(series))
        unread = [
            i
            for i, v in enumerate(series)
            if isinstance(v, str) and math.isnan(arr[i]) and v.strip()
        ]
        if unread:
            raw = pd.Series([series[i].strip().strip('"').strip() for i in unread], dtype=object)
            arr[unread] = _locale_numbers(raw).to_numpy(dtype="float64")
        return arr
    if series.dtype.kind in "fiub":
        return series.astype("float64")
    try:
        return pd.to_numeric(series, errors="raise").astype("float64")
    except (ValueError, TypeError):
        pass
    s = series.astype(object).map(
        lambda v: v.strip().strip('"').strip() if isinstance(v, str) else v
    )
    out = pd.to_numeric(s, errors="coerce").astype("float64")
    bad = out.isna() & s.map(lambda v: isinstance(v, str) and v not in ("", "N/A", "NA", "nan"))
    if bad.any():
        out = out.where(~bad, _locale_numbers(s[bad]))
    return out


# numbers written with a locale's separators (a spreadsheet round trip): "1,234.5", "1,234,567"
# (thousands separators) and "65132,238" (a decimal comma) are unambiguous; "1,234" alone is
# read by the convention the column's other values show, else left unread (NaN)
_THOUSANDS = re.compile(r"^-?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_DECIMAL_COMMA = re.compile(r"^-?\d+,\d+$")


def _locale_numbers(values: pd.Series) -> pd.Series:
    """Values with thousands separators or a decimal comma as float64 (NaN when ambiguous)."""
    thousands = values.str.match(_THOUSANDS) & (
        values.str.contains(".", regex=False) | (values.str.count(",") > 1)
    )
    decimal = values.str.match(_DECIMAL_COMMA) & ~values.str.match(_THOUSANDS)
    ambiguous = values.str.match(_THOUSANDS) & ~thousands & ~decimal
    if thousands.any() and decimal.any():  # both conventions in one column: read neither
        return pd.Series(np.nan, index=values.index, dtype="float64")
    as_thousands = thousands | (ambiguous & bool(thousands.any()))
    as_decimal = decimal | (ambiguous & bool(decimal.any()))
    out = pd.Series(np.nan, index=values.index, dtype="float64")
    out[as_thousands] = pd.to_numeric(
        values[as_thousands].str.replace(",", "", regex=False), errors="coerce"
    )
    out[as_decimal] = pd.to_numeric(
        values[as_decimal].str.replace(",", ".", regex=False), errors="coerce"
    )
    return out


def clean_str(series: Any, index: Any = None) -> Any:
    """Strings with outer quote characters removed (``'"32,3,224,224"'`` → ``'32,3,224,224'``)."""
    if series is None:
        return None if index is None else [None] * len(index)
    if isinstance(series, list):
        return [v.strip().strip('"') if isinstance(v, str) else None for v in series]
    return series.map(lambda v: v.strip().strip('"') if isinstance(v, str) else v)


class Columns(dict):  # type: ignore[type-arg]
    """Columns of a small CSV as plain lists (``None`` for ``N/A``/empty), with ``n`` rows."""

    n: int = 0
    #: The file ended inside its last row, which was dropped (:func:`drop_cut_row`).
    cut_row: bool = False

    @property
    def index(self) -> range:
        """Row positions (like ``DataFrame.index``)."""
        return range(self.n)

    @property
    def columns(self) -> list[str]:
        """Column names (like ``DataFrame.columns``)."""
        return list(self.keys())

    def __len__(self) -> int:
        return self.n

    @property
    def empty(self) -> bool:
        """True when there are no rows."""
        return self.n == 0


def read_columns(path: Path, required: list[str] | None = None) -> Columns | pd.DataFrame:
    """Like :func:`read_csv` but small files come back as :class:`Columns` of plain lists.

    Per-rank files are small and numerous; plain lists avoid pandas' fixed cost per column.
    """
    size = check_file(path).st_size
    if size >= SMALL_CSV_BYTES:
        return read_csv(path, required)
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.reader(fh))
    except PermissionError as exc:
        raise unreadable(path) from exc
    except (csv.Error, UnicodeDecodeError, OSError) as exc:
        raise csv_error(path, exc) from exc
    out = Columns()
    if not rows:
        _check_required(path, [], required)
        return out
    out.cut_row = drop_cut_row(path, rows)
    header = [HEADER_ALIASES.get(h.strip(), h.strip()) for h in rows[0]]
    _check_required(path, header, required)
    _check_unique(path, header)
    width = len(header)
    body = [r if len(r) == width else (r + [""] * width)[:width] for r in rows[1:] if r]
    na = _NA_SET
    for h, col in zip(header, zip(*body, strict=True) if body else [()] * width, strict=True):
        out[h] = [None if v in na else v for v in col]
    out.n = len(body)
    return out


def drop_cut_row(path: Path, rows: list[list[str]]) -> bool:
    """Drop the last row of ``rows`` (header first) when the file ends inside it.

    A copy cut short (a full disk, an interrupted transfer) ends without a line break in the
    middle of a row, which then has fewer fields than the header; its last field is a cut number
    (``41`` of ``41546``). The profilers end every row, the last included, with a line break.

    Returns:
        Whether a row was dropped (the caller says so with a ``row_cut`` warning).
    """
    if len(rows) < 2 or not rows[-1] or len(rows[-1]) >= len(rows[0]):
        return False
    try:
        with path.open("rb") as fh:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) in (b"\n", b"\r"):
                return False
    except OSError:
        return False
    rows.pop()
    return True


def cut_row_warning(path: Path, rank: int | None) -> DataWarning:
    """The ``row_cut`` warning for a CSV whose last, incomplete row was left out."""
    return DataWarning(
        code="row_cut",
        message=f"{show_path(path)} ends in the middle of its last row (no line break, fewer "
        "fields than the header): the file was cut short, and that row was left out; the rows "
        "after the cut are missing too (how many cannot be told), so "
        + (
            "this rank's counts and totals from it are incomplete"
            if rank is not None
            else "the ranks and steps it holds after the cut are missing"
        )
        + ". Copy the file again from the training machine",
        path=str(path),
        ranks=(rank,) if rank is not None else (),
    )


def _check_unique(path: Path, header: list[str]) -> None:
    """Refuse a header that names a column twice: which of the two is meant cannot be told.

    Raises:
        InputError: The repeated column names (after aliasing) and the file.
    """
    counts = Counter(h for h in header if h)
    dup = [h for h, n in counts.items() if n > 1]
    if dup:
        raise InputError(
            f"{show_path(path)}: the header names column(s) {short_list(dup)} twice, so which "
            "values are meant cannot be told",
            path=show_path(path),
            remedy="Remove the extra column (or export the file again)",
        )


def _check_required(path: Path, header: list[str], required: list[str] | None) -> None:
    if not required:
        return
    missing = [c for c in required if c not in header]
    if missing and not [h for h in header if h]:
        raise InputError(
            f"{show_path(path)} is empty (no header line); the file looks truncated",
            path=show_path(path),
            remedy=_json_remedy(path),
        )
    if missing and _cut_in_header(path, header, missing):
        raise InputError(
            f"{show_path(path)} ends inside its header line (after {header[-1]!r}; "
            f"{short_list(missing)} and the rows are missing): the file was cut short",
            path=show_path(path),
            remedy="Copy the file again from the training machine (or export it again)",
        )
    if missing:
        raise InputError(
            f"{show_path(path)} lacks required column(s) {missing} (found: {short_list(header)})",
            path=show_path(path),
            remedy="This header version is not supported; re-export with the offline parse of "
            "torch_npu (`torch_npu.profiler.profiler.analyse(<folder>)`) or report the header",
        )


def _cut_in_header(path: Path, header: list[str], missing: list[str]) -> bool:
    """Whether the file ends inside its header line (cut short, not another header version).

    The exports end every line, the header's too, with a line break: a file with required
    columns missing and no line break at all stops inside its first line.
    """
    try:
        with path.open("rb") as fh:
            head = fh.read(64 * 1024 + 1)
    except OSError:
        return False
    return bool(missing) and bool(header) and len(head) <= 64 * 1024 and b"\n" not in head


def step_from_key(key: str) -> int:
    """``'step50'`` → 50, ``'step'``/``''`` → -1 (communication json step keys)."""
    m = re.search(r"(-?\d+)$", str(key).strip())
    return int(m.group(1)) if m else -1


#: Step id of a row whose Step cell holds something that is not a step number (text, a negative
#: or fractional number, beyond :data:`MAX_STEP_ID`): ``schema.check_values`` drops those rows
#: with an ``invalid_values`` warning instead of reading them as the no-step row (-1).
INVALID_STEP = -2
#: Step ids above this are not a training step (2^31: a run would last centuries).
MAX_STEP_ID = 1 << 31


def step_col(series: Any, index: Any) -> Any:
    """Step column: digits → int, empty → -1, anything else → :data:`INVALID_STEP` (int64 array)."""
    if series is None:
        return np.full(len(index), -1, dtype="int64")
    f = np.asarray(num(series), dtype="float64")
    empty = np.zeros(len(f), dtype=bool)
    nan_at = np.flatnonzero(np.isnan(f))
    if len(nan_at):  # only the cells that did not read as numbers need a look (usually none)
        get = series.iloc.__getitem__ if isinstance(series, pd.Series) else series.__getitem__
        for i in nan_at:
            v = get(int(i))
            empty[i] = (
                v is None or (isinstance(v, float) and math.isnan(v)) or (str(v).strip() in _NA_SET)
            )
    with np.errstate(invalid="ignore"):
        bad = ~empty & (np.isnan(f) | (f < 0) | (f > MAX_STEP_ID) | (f != np.round(f)))
    f = np.where(np.isnan(f) | bad, 0.0, f)
    return np.where(empty, -1, np.where(bad, INVALID_STEP, np.round(f))).astype("int64")


_OP_TYPES = (
    "batchsendrecv",
    "reducescatter",
    "allreduce",
    "allgather",
    "alltoallvc",
    "alltoallv",
    "alltoall",
    "broadcast",
    "receive",
    "recv",
    "send",
    "scatter",
    "reduce",
    "gather",
)


def hccl_ratio(part: Any, transit: Any) -> Any:
    """CANN's wait / synchronization ratio: ``round(part / (part + transit), 4)``, 0 when the sum is 0.

    Works on scalars and on pandas/numpy arrays (elementwise). Source: CANN msprof
    ``communication_parser.py`` (``Wait Time Ratio``, ``Synchronization Time Ratio``).
    """
    den = part + transit
    return np.where(den > 1e-15, np.round(part / np.where(den > 1e-15, den, 1.0), 4), 0.0)


@functools.lru_cache(maxsize=4096)  # names repeat on every rank
def comm_op_type(op_name: str) -> str:
    """Normalized HCCL op type from an op name.

    ``hcom_allReduce__586_0_1`` → ``allreduce``, ``hcom_batchSendRecv__128_3_1`` →
    ``batchsendrecv``, ``hcom_alltoallv_…`` → ``alltoallv``, ``hcom_receive_…`` → ``receive``.
    Unknown names give the lower-cased first word.
    """
    low = str(op_name).lower()
    m = re.match(r"hcom_([a-z]+)_", low)
    word = m.group(1) if m else re.sub(r"[^a-z]", "", low.split("@")[0].split("-")[0])
    for t in _OP_TYPES:
        if word.startswith(t) or (not m and t in word):
            return "receive" if t == "recv" else t
    return word or "unknown"


@functools.lru_cache(maxsize=4096)  # names repeat on every rank
def comm_kind_of(op_name: str) -> str:
    """``p2p`` for send/receive/batchsendrecv (torch_npu rule), else ``collective``."""
    low = str(op_name).lower()
    if low.startswith(("hcom_send", "hcom_receive", "hcom_batchsendrecv")):
        return "p2p"
    return "collective"


@functools.lru_cache(maxsize=4096)  # names repeat on every rank
def double_hash(name: str) -> str:
    """HCCL group hash of a communicator name (mstt ``double_hash``), as a decimal string."""
    h29 = 0
    h131 = 0
    for ch in name:
        h29 = (h29 * 29 + ord(ch)) & 0xFFFFFFFF
        h131 = (h131 * 131 + ord(ch)) & 0xFFFFFFFF
    return str((h29 << 32) | h131)


#: Packet size above which a packet counts as "large" (MB), per transport (§1.12).
LARGE_PACKET_MB = {"RDMA": 0.5, "HCCS": 32.0, "PCIE": 32.0, "SIO": 32.0}


def infer_column(values: list[Any]) -> np.ndarray:
    """A list of Python values as an int64, float64 or object array (what pandas would infer).

    Faster than letting ``pd.DataFrame`` infer ~10^5 values per column.
    """
    kind = pd.api.types.infer_dtype(values, skipna=False)
    if kind == "integer":
        return np.asarray(values, dtype="int64")
    if kind in ("floating", "mixed-integer-float"):
        return np.asarray(values, dtype="float64")
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for a parse, then restore its previous state.

    Parsing JSON and CSV files creates millions of short-lived, acyclic containers; the collector's
    passes over them cost 12-18 % of the light-table read at 1024 ranks (measured, one process).
    Reference counting still frees them; cycles made meanwhile are collected once it resumes.
    Nested and concurrent pauses (a cache read in a thread while the main thread parses) count:
    the collector resumes when the last one ends, if it was enabled before the first.
    """
    with _GC_LOCK:
        if _GC_STATE["depth"] == 0:
            _GC_STATE["was"] = gc.isenabled()
            gc.disable()
        _GC_STATE["depth"] += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _GC_STATE["depth"] -= 1
            if _GC_STATE["depth"] == 0 and _GC_STATE["was"]:
                gc.enable()


_GC_LOCK = threading.Lock()
_GC_STATE = {"depth": 0, "was": True}
