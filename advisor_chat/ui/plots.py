"""Plotly figures for the chat's side panel, one per :data:`~advisor_chat.agent.answer.PlotName`.

Each figure is drawn from canonical tables (:mod:`advisor_chat.ingest.schema`) or from an
analyzer's result table; the only computation here is display aggregation (mean per step,
quantiles, pivots) and unit conversion µs → ms. Every builder returns ``None`` when the profile
lacks the data, so the UI can say so instead of drawing an empty chart.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from pydantic import ValidationError

from advisor_chat.analyzers.slow_link import link_records
from advisor_chat.errors import AdvisorError
from advisor_chat.i18n import t
from advisor_chat.ingest.profile import Profile
from advisor_chat.textsafe import html_text

log = logging.getLogger(__name__)

PLOT_NAMES = ("rank_breakdown", "bandwidth_heatmap", "step_trend", "op_compare", "launch_delay")

#: Plot titles and one line per plot that says how to read it, from the message catalogue
#: (``plot.title.<name>``, ``plot.caption.<name>``; :mod:`advisor_chat.i18n`).
PLOT_TITLES: dict[str, str] = {n: t(f"plot.title.{n}", "en") for n in PLOT_NAMES}
PLOT_TITLES_ZH: dict[str, str] = {n: t(f"plot.title.{n}", "zh") for n in PLOT_NAMES}
PLOT_CAPTIONS: dict[str, tuple[str, str]] = {
    n: (t(f"plot.caption.{n}", "en"), t(f"plot.caption.{n}", "zh")) for n in PLOT_NAMES
}

_COLORS = {
    "computing": "#4C78A8",
    "communication": "#F58518",
    "free": "#B8B8B8",
    "bubble": "#EECA3B",
    "highlight": "#D62728",
    "other": "#9DB4CF",
}


def _layout(fig: go.Figure, title: str, *, height: int = 340) -> go.Figure:
    fig.update_layout(
        title={"text": title, "font": {"size": 14}},
        height=height,
        margin={"l": 50, "r": 20, "t": 50, "b": 45},
        legend={"orientation": "h", "y": -0.3, "yanchor": "top", "x": 0},
        template="plotly_white",
    )
    return fig


STAR_LEGEND = t("plot.star_legend", "en")
"""What the star means: ``Answer.plot_ranks``, which the planner fills with the culprit ranks of
the answer's cause (never a rank it calls not slow); the other ranks are drawn faded."""


def _rank_axis(hl: set[int]) -> str:
    return f"rank ({STAR_LEGEND})" if hl else "rank"


def _rank_label(rank: int, highlight: set[int]) -> str:
    return f"<b>{rank}★</b>" if rank in highlight else str(rank)


def rank_breakdown(profile: Profile, highlight: Sequence[int] = ()) -> go.Figure | None:
    """Stacked bars per rank: Computing, Communication (Not Overlapped), Bubble, Free; ms/step.

    Source: ``step_trace`` (``computing_us``, ``communication_not_overlapped_us``,
    ``bubble_us``, ``free_us``), mean per step. Bubble (pipeline receive wait) is part of
    Communication (Not Overlapped) in the data; it is drawn as its own series and the
    communication bar shows ``max(communication_not_overlapped_us - bubble_us, 0)``, so the
    stack still sums to the step. The Bubble series is left out when no rank has any.
    Highlighted ranks are drawn opaque and starred; the others faded.
    """
    st = profile.get("step_trace")
    cols = ["computing_us", "communication_not_overlapped_us", "free_us"]
    if st.empty or st[cols].isna().all().all():
        return None
    per_rank = st.groupby("rank")[[*cols, "bubble_us"]].mean().sort_index() / 1000.0
    bubble = per_rank["bubble_us"].fillna(0.0).clip(lower=0.0)
    per_rank["bubble_us"] = bubble
    per_rank["communication_not_overlapped_us"] = (
        per_rank["communication_not_overlapped_us"] - bubble
    ).clip(lower=0.0)
    series = [
        ("computing_us", "Computing", _COLORS["computing"]),
        (
            "communication_not_overlapped_us",
            "Communication (Not Overlapped)" + (", excl. Bubble" if bubble.gt(0).any() else ""),
            _COLORS["communication"],
        ),
    ]
    if bubble.gt(0).any():
        series.append(("bubble_us", "Bubble (PP receive wait)", _COLORS["bubble"]))
    series.append(("free_us", "Free", _COLORS["free"]))
    hl = set(int(r) for r in highlight)
    ranks = [int(r) for r in per_rank.index]
    labels = [_rank_label(r, hl) for r in ranks]
    opacity = [1.0 if (not hl or r in hl) else 0.55 for r in ranks]
    fig = go.Figure()
    for col, name, color in series:
        fig.add_bar(
            x=labels,
            y=per_rank[col].to_numpy(),
            name=name,
            marker={"color": color, "opacity": opacity},
            hovertemplate="rank %{x}<br>" + name + ": %{y:.2f} ms<extra></extra>",
        )
    fig.update_layout(barmode="stack", xaxis_title=_rank_axis(hl), yaxis_title="ms per step")
    return _layout(fig, "Per-rank step breakdown (mean per step, step_trace)", height=420)


def bandwidth_heatmap(profile: Profile, highlight: Sequence[int] = ()) -> go.Figure | None:
    """Heatmap of the median link bandwidth, GB/s, source rank × destination rank.

    Source: ``comm_matrix`` (``src_rank``, ``dst_rank``, ``bandwidth_gbps``), LOCAL links and
    ``src == dst`` dropped; the median is over ops (or per-step ``total`` records, see
    :func:`~advisor_chat.analyzers.slow_link.link_records`) and steps of each link.
    """
    cm, _ = link_records(profile.get("comm_matrix"))
    if cm.empty:
        return None
    cm = cm[(cm["transport"].astype("string") != "LOCAL") & (cm["src_rank"] != cm["dst_rank"])]
    cm = cm.dropna(subset=["bandwidth_gbps", "src_rank", "dst_rank"])
    if cm.empty:
        return None
    pivot = (
        cm.pivot_table(
            index="src_rank", columns="dst_rank", values="bandwidth_gbps", aggfunc="median"
        )
        .sort_index(axis=0)
        .sort_index(axis=1)
    )
    hl = set(int(r) for r in highlight)
    fig = go.Figure(
        go.Heatmap(
            z=pivot.to_numpy(),
            x=[_rank_label(int(r), hl) for r in pivot.columns],
            y=[_rank_label(int(r), hl) for r in pivot.index],
            colorscale="Viridis",
            colorbar={"title": "GB/s"},
            hovertemplate="src %{y} → dst %{x}<br>%{z:.2f} GB/s<extra></extra>",
        )
    )
    star = f" ({STAR_LEGEND})" if hl else ""
    fig.update_layout(xaxis_title=f"destination rank{star}", yaxis_title="source rank")
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, "Link bandwidth, median GB/s (comm_matrix)", height=380)


def step_trend(profile: Profile, highlight: Sequence[int] = ()) -> go.Figure | None:
    """Step time per step, ms, one line per rank; highlighted ranks in colour, others grey.

    Source: ``step_trace.step_us``.
    """
    st = profile.get("step_trace").dropna(subset=["step_us"])
    st = st[st["step"] >= 0]
    if st.empty:
        return None
    hl = set(int(r) for r in highlight)
    fig = go.Figure()
    for rank, grp in st.sort_values("step").groupby("rank"):
        r = int(rank)  # type: ignore[arg-type,call-overload]
        on = r in hl
        fig.add_scatter(
            x=grp["step"].to_numpy(),
            y=(grp["step_us"] / 1000.0).to_numpy(),
            mode="lines+markers",
            name=f"rank {r}" + (" ★" if on else ""),
            line={"color": _COLORS["highlight"] if on else "#C7C7C7", "width": 3 if on else 1},
            marker={"size": 6 if on else 3},
            showlegend=on or len(hl) == 0,
            hovertemplate=f"rank {r}<br>step %{{x}}: %{{y:.2f}} ms<extra></extra>",
        )
    fig.update_layout(
        xaxis_title="step",
        yaxis_title="step time (ms)",
        legend_title_text=STAR_LEGEND if hl else "",
    )
    return _layout(fig, "Step time per step (step_trace)")


def _compare_ops_table(profile: Profile, rank_b: int | None) -> tuple[pd.DataFrame, str] | None:
    """Top per-op-type deltas from the ``compare_ops`` analyzer (``None`` if it is unavailable)."""
    try:
        from advisor_chat.analyzers import get_analyzer

        spec = get_analyzer("compare_ops")
        kwargs: dict[str, Any] = {}
        if rank_b is not None:
            kwargs["rank_b"] = rank_b
        result = spec.run(profile, spec.params(**kwargs))
    except (KeyError, AdvisorError, ValidationError) as exc:  # missing or not applicable
        log.info("compare_ops unavailable for the plot: %s", exc)
        return None
    df = result.table
    delta_col = next(
        (c for c in ("delta_total_us", "total_delta_us", "delta_us") if c in df.columns), None
    )
    label_col = next((c for c in ("op_type", "name", "key", "op") if c in df.columns), None)
    if df.empty or delta_col is None or label_col is None:
        return None
    ra, rb = result.metrics.get("rank_a"), result.metrics.get("rank_b")
    sub = f"rank {rb:.0f} − rank {ra:.0f}" if ra is not None and rb is not None else "B − A"
    steps = float(result.metrics.get("steps_compared") or 0.0)
    out = df[[label_col, delta_col]].rename(columns={label_col: "label", delta_col: "delta_us"})
    if steps > 0:  # compare_ops sums over the common steps; show per step
        out = out.assign(delta_us=out["delta_us"] / steps)
        sub += ", per step"
    return out, sub


def op_compare(profile: Profile, highlight: Sequence[int] = (), top: int = 10) -> go.Figure | None:
    """Horizontal bars of the largest per-op time differences between two ranks, ms.

    Source: the ``compare_ops`` analyzer (rank_b = first highlighted rank, rank_a = its default:
    the fastest rank). Positive = the highlighted rank spends more time.
    """
    got = _compare_ops_table(profile, int(highlight[0]) if highlight else None)
    if got is None:
        return None
    df, sub = got
    df = df.dropna(subset=["delta_us"])
    df = df.reindex(df["delta_us"].abs().sort_values(ascending=False).index).head(top)
    if df.empty:
        return None
    df = df.iloc[::-1]
    colors = [_COLORS["highlight"] if v > 0 else _COLORS["computing"] for v in df["delta_us"]]
    fig = go.Figure(
        go.Bar(
            x=(df["delta_us"] / 1000.0).to_numpy(),
            y=[html_text(v, limit=60) for v in df["label"].astype(str)],
            orientation="h",
            marker={"color": colors},
            hovertemplate="%{y}: %{x:+.3f} ms<extra></extra>",
        )
    )
    fig.update_layout(xaxis_title=f"time difference (ms), {sub}")
    return _layout(fig, f"Operator compare: top {len(df)} deltas (compare_ops)", height=380)


def launch_delay(profile: Profile, highlight: Sequence[int] = ()) -> go.Figure | None:
    """Box per rank of host→device launch delay, µs (whiskers p1/p99, box p25/p50/p75).

    Source: ``host_dispatch.launch_delay_us``. Quantiles are precomputed so the figure stays small
    for millions of launches.
    """
    hd = profile.get("host_dispatch").dropna(subset=["launch_delay_us"])
    if hd.empty:
        return None
    q = (
        hd.groupby("rank")["launch_delay_us"]
        .quantile(np.array([0.01, 0.25, 0.5, 0.75, 0.99]))
        .unstack()
        .sort_index()
    )
    hl = set(int(r) for r in highlight)
    ranks = [int(r) for r in q.index]
    fig = go.Figure()
    for on in (False, True):
        idx = [i for i, r in enumerate(ranks) if (r in hl) == on]
        if not idx:
            continue
        sel = q.iloc[idx]
        fig.add_trace(
            go.Box(
                x=[_rank_label(ranks[i], hl) for i in idx],
                lowerfence=sel[0.01].to_numpy(),
                q1=sel[0.25].to_numpy(),
                median=sel[0.5].to_numpy(),
                q3=sel[0.75].to_numpy(),
                upperfence=sel[0.99].to_numpy(),
                name="highlighted" if on else "ranks",
                marker={"color": _COLORS["highlight"] if on else _COLORS["other"]},
                showlegend=False,
            )
        )
    fig.update_layout(
        xaxis_title=_rank_axis(hl),
        yaxis_title="launch delay (µs)",
        xaxis={"categoryorder": "array", "categoryarray": [_rank_label(r, hl) for r in ranks]},
    )
    return _layout(fig, "Launch delay per rank, p1–p99 (host_dispatch)")


BUILDERS: dict[str, Callable[[Profile, Sequence[int]], go.Figure | None]] = {
    "rank_breakdown": rank_breakdown,
    "bandwidth_heatmap": bandwidth_heatmap,
    "step_trend": step_trend,
    "op_compare": op_compare,
    "launch_delay": launch_delay,
}


def _localize(fig: go.Figure, name: str, lang: str) -> None:
    """Title, axis titles, legend and trace names of ``fig`` in ``lang`` (the builders write English).

    Each English label fragment of the catalogue family ``plot.label.*`` (and the star legend) is
    replaced by its translation, longest first, so "destination rank" is not read as "rank".
    """
    if lang != "zh":
        return
    from advisor_chat.i18n import messages

    en, zh = messages("en"), messages("zh")
    keys = [k for k in en if k.startswith("plot.label.") or k == "plot.star_legend"]
    pairs = sorted(((en[k], zh[k]) for k in keys), key=lambda p: -len(p[0]))

    def tr(text: str | None) -> str | None:
        if not text:
            return text
        text = re.sub(r"\brank (\d+)", r"\1号卡", text)  # "rank 12" -> "12号卡"
        out, i = [], 0
        while i < len(text):  # left to right, longest match first, whole words only
            for a, b in pairs:
                end = i + len(a)
                if text.startswith(a, i) and (
                    a[0] == "," or ((i == 0 or not text[i - 1].isalnum()) and
                                    (end == len(text) or not text[end].isalnum()))
                ):  # fmt: skip
                    out.append(b)
                    i = end
                    break
            else:
                out.append(text[i])
                i += 1
        return "".join(out)

    fig.update_layout(title_text=PLOT_TITLES_ZH.get(name, PLOT_TITLES.get(name, "")))
    fig.for_each_xaxis(lambda ax: ax.update(title_text=tr(ax.title.text)))
    fig.for_each_yaxis(lambda ax: ax.update(title_text=tr(ax.title.text)))
    if fig.layout.legend.title.text:
        fig.update_layout(legend_title_text=tr(fig.layout.legend.title.text))
    fig.for_each_trace(lambda tr_: tr_.update(name=tr(tr_.name)) if tr_.name else None)


def build_plots(
    profile: Profile, names: Sequence[str], ranks: Sequence[int] = (), lang: str = "en"
) -> dict[str, go.Figure | None]:
    """Build the named figures (unknown names are ignored) with ``ranks`` highlighted.

    ``lang="zh"`` titles them in Chinese (:data:`PLOT_TITLES_ZH`); :data:`PLOT_CAPTIONS` says
    how to read each.

    Returns:
        ``{name: figure or None}`` in the order of ``names``; ``None`` means the profile lacks the
        data for that plot.
    """
    out: dict[str, go.Figure | None] = {}
    for name in names:
        builder = BUILDERS.get(name)
        if builder is not None and name not in out:
            fig = builder(profile, list(ranks))
            if fig is not None:
                _localize(fig, name, lang)
            out[name] = fig
    return out
