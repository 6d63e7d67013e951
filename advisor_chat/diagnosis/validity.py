"""Whether the step trace can carry a conclusion: numbers read, one unit, no empty steps.

Every blame rule compares ranks by their step-trace times. When those numbers could not be read
(a spreadsheet round trip left separators no reader can resolve), or one rank's file is in
another unit (ns where the others are µs), any comparison between ranks is an artefact of the
file, not of the job: the diagnosis withholds its conclusions and says which file and column
to fix (issue 24: "a conclusion that rests on data flagged as invalid is withheld"). Steps whose
time is zero or negative on some rank (a step the profiler did not measure) are left out and
said so.

Source: the canonical ``step_trace`` table (``step_trace_time.csv``, DB ``STEP_TIME``, cluster
step trace), its source files (``Profile.sources``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pandas as pd

from advisor_chat.ingest.profile import Profile

#: Columns a step comparison rests on, with the header they come from.
KEY_COLUMNS = {"computing_us": "Computing", "free_us": "Free"}
#: A column is unreadable on a rank when at least this share of its values is missing.
UNREAD_SHARE = 0.5
#: One rank's median step this many times the others' median (or a thousandth of it) is another
#: unit (ns vs µs, ms vs µs), not a slower rank: a real straggler is not 300x slower.
UNIT_RATIO = 300.0


@dataclass(frozen=True)
class Invalid:
    """Why the step trace cannot carry a comparison between ranks.

    Attributes:
        code: ``number_unreadable``, ``steps_disjoint`` or ``unit_mismatch``.
        reason: English clause naming the file(s), column and ranks.
        reason_zh: Chinese clause.
        ranks: Ranks concerned.
    """

    code: str
    reason: str
    reason_zh: str
    ranks: tuple[int, ...]


def _files(profile: Profile, ranks: list[int]) -> str:
    paths = [
        s.path for s in profile.sources.get("step_trace", []) if s.rank is None or s.rank in ranks
    ]
    if not paths:
        return "the step trace"
    return paths[0] + (f" (and {len(paths) - 1} more)" if len(paths) > 1 else "")


def check_step_trace(profile: Profile) -> Invalid | None:
    """The first reason the step trace cannot be compared across ranks, or ``None``.

    - ``number_unreadable``: a key column (Computing, Free) is missing for ≥ ``UNREAD_SHARE`` of
      a rank's steps while the file has rows (values that are not numbers: separators or text);
    - ``steps_disjoint``: no step is held by more than half of the ranks (captured at different
      times: nothing to compare);
    - ``unit_mismatch``: a rank's median step time is ≥ ``UNIT_RATIO`` times the other ranks'
      median, or ≤ 1/``UNIT_RATIO`` of it (its file is in another unit).
    """
    if not profile.has("step_trace"):
        return None
    st = profile.get("step_trace")
    if st.empty or "rank" not in st.columns:
        return None
    st = st[st["rank"].notna()]
    for col, header in KEY_COLUMNS.items():
        if col not in st.columns:
            continue
        miss = st[col].isna().groupby(st["rank"]).mean()
        bad = sorted(int(cast(Any, r)) for r, v in miss.items() if v >= UNREAD_SHARE)
        if bad:
            where = _files(profile, bad)
            who = f"rank {bad[0]}" if len(bad) == 1 else f"{len(bad)} ranks"
            who_zh = f"{bad[0]}号卡" if len(bad) == 1 else f"{len(bad)} 张卡"
            return Invalid(
                "number_unreadable",
                f"the {header} column of {where} could not be read as numbers for {who} "
                "(values with separators or text where numbers belong); fix or re-export that "
                "file (torch_npu's offline parse writes plain numbers)",
                f"{where} 中 {who_zh}的 {header} 列无法读成数字（数字里有分隔符或文字）；请修正该文件或重新导出"
                "（torch_npu 离线解析写出的是纯数字）",
                tuple(bad),
            )
    if "step" in st.columns and st["rank"].nunique() >= 2:
        # ranks captured in different steps cannot be compared step by step (or on average:
        # the steps may differ in work); the largest step shared must hold most ranks
        n_ranks = int(st["rank"].nunique())
        shared = int(st.dropna(subset=["step"]).groupby("step")["rank"].nunique().max())
        if shared <= 0.5 * n_ranks:
            steps = st.dropna(subset=["step"]).groupby("rank")["step"].agg(["min", "max"])
            ex = steps.iloc[0], steps.iloc[-1]
            return Invalid(
                "steps_disjoint",
                f"the ranks were captured in different steps (no step is held by more than "
                f"{shared} of the {n_ranks} ranks; e.g. rank {int(cast(Any, steps.index[0]))} "
                f"steps {int(ex[0]['min'])}-{int(ex[0]['max'])}, rank "
                f"{int(cast(Any, steps.index[-1]))} steps {int(ex[1]['min'])}-{int(ex[1]['max'])}), "
                "so they cannot be compared; capture every rank in the same steps (one profiler "
                "schedule for the job)",
                f"各卡采集的是不同的步（任何一步最多只有 {n_ranks} 张卡中的 {shared} 张）：无法在卡之间比较；"
                "请让所有卡在相同的步采集（整个作业用同一个 profiler `schedule`）",
                (),
            )
    if "step_us" not in st.columns:
        return None
    med = st[st["step_us"] > 0].groupby("rank")["step_us"].median()
    if len(med) < 3:
        return None
    others_all = _leave_one_out_median(med.to_numpy(dtype=float))
    for (r, v), others in zip(med.items(), others_all, strict=True):
        if not (math.isfinite(others) and others > 0 and math.isfinite(v)):
            continue
        ratio = float(v) / others
        if ratio >= UNIT_RATIO or ratio <= 1.0 / UNIT_RATIO:
            rk = int(cast(Any, r))
            where = _files(profile, [rk])
            return Invalid(
                "unit_mismatch",
                f"rank {rk}'s step times in {where} are {ratio:.4g}x the other ranks' (median "
                f"{float(v):.4g} against {others:.4g} µs): that file is in another unit (ns or ms "
                "where the others are µs), so no comparison between ranks is sound; re-export it "
                "with the same profiler version as the others",
                f"{where} 中 {rk}号卡的步骤时间是其他卡的 {ratio:.4g} 倍（中位数 {float(v):.4g}，其他卡 "
                f"{others:.4g} µs）：该文件的单位不同（其他卡为 µs，它可能是 ns 或 ms），卡间比较不可靠；"
                "请用与其他卡相同的 profiler 版本重新导出",
                (rk,),
            )
    return None


def _leave_one_out_median(values: np.ndarray) -> np.ndarray:
    """``out[i]`` = the median of ``values`` without ``values[i]`` (O(n log n), not O(n²)).

    With ``a`` sorted, the remaining ``n - 1`` values at sorted position ``k`` are ``a[k]`` for
    ``k`` below the left-out element's position and ``a[k + 1]`` from it on.
    """
    n = len(values)
    order = np.argsort(values, kind="stable")
    a = values[order]
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    m = n - 1

    def at(k: int) -> np.ndarray:
        return np.where(k < pos, a[k], a[np.minimum(k + 1, n - 1)])

    if m % 2:
        return at(m // 2).astype(float)
    return ((at(m // 2 - 1) + at(m // 2)) / 2.0).astype(float)


def empty_steps(profile: Profile) -> list[int]:
    """Steps whose time is zero or negative on some rank (not measured): left out of the diagnosis."""
    if not profile.has("step_trace"):
        return []
    st = profile.get("step_trace")
    if st.empty or "step_us" not in st.columns or "step" not in st.columns:
        return []
    step_us = pd.to_numeric(st["step_us"], errors="coerce")
    bad = st.loc[step_us.notna() & (step_us <= 0), "step"].dropna()
    steps = sorted({int(s) for s in bad})
    kept = {int(s) for s in st["step"].dropna()} - set(steps)
    return steps if kept else []  # never every step
