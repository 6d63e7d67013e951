"""``communication_matrix.json`` links: the bulk path and the per-link path give the same rows.

Expected rows are written out by hand from the file content (the reference's LINK fields), so a
parser that drops, reorders or mis-converts a link fails here.
"""

from __future__ import annotations

import math

import pytest

from advisor_chat.ingest.text import LinkColumns


def _link(
    transport: str, size: object, time: object, bw: object = None, name: object = None
) -> dict:
    d = {"Transport Type": transport, "Transit Size(MB)": size, "Transit Time(ms)": time}
    if bw is not None:
        d["Bandwidth(GB/s)"] = bw
    if name is not None:
        d["Op Name"] = name
    return d


def _rows(acc: LinkColumns) -> list[tuple]:
    df = acc.frame()
    return [
        (
            r.group,
            r.step,
            r.op_name,
            r.src_local,
            r.dst_local,
            r.transport,
            r.transit_size_mb,
            r.transit_time_ms,
            r.bandwidth_gbps,
            r.link_op_name,
            r.rank,
        )
        for r in df.itertuples()
    ]


def _same(a: list[tuple], b: list[tuple]) -> bool:
    def eq(x: object, y: object) -> bool:
        if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
            return True
        return x == y

    return len(a) == len(b) and all(
        len(r) == len(s) and all(eq(x, y) for x, y in zip(r, s, strict=True))
        for r, s in zip(a, b, strict=True)
    )


def test_regular_operator_is_read_link_by_link_in_file_order() -> None:
    acc = LinkColumns()
    links = {
        "0-1": _link("HCCS", 8.0, 0.5, 16.0, "hcom_allReduce__1_0_1"),
        "0-0": _link("LOCAL", 2.0, 0.004, 500.0, "hcom_allReduce__1_2_1"),
        "1-0": _link("HCCS", 8.0, 2.0, 4.0, "hcom_allReduce__1_0_1"),
    }
    assert acc.add_links(links, "allreduce-top1@123", 7, 3) == 3
    assert _rows(acc) == [
        ("123", 7, "allreduce-top1", 0, 1, "HCCS", 8.0, 0.5, 16.0, "hcom_allReduce__1_0_1", 3),
        ("123", 7, "allreduce-top1", 0, 0, "LOCAL", 2.0, 0.004, 500.0, "hcom_allReduce__1_2_1", 3),
        ("123", 7, "allreduce-top1", 1, 0, "HCCS", 8.0, 2.0, 4.0, "hcom_allReduce__1_0_1", 3),
    ]


def test_total_entries_without_op_name_and_missing_bandwidth() -> None:
    acc = LinkColumns()
    # the "*-total" entries of the file carry no "Op Name"; a file without Bandwidth(GB/s)
    # gets size / time rounded to 4 decimals (0.0 for a zero time)
    acc.add_links({"2-3": _link("RDMA", 3.0, 0.7, 12.5)}, "allgather-total@9", 1, 2)
    acc.add_links({"2-3": _link("RDMA", 3.0, 0.7), "2-2": _link("LOCAL", 1.0, 0.0)}, "x@9", 1, 2)
    assert _rows(acc) == [
        ("9", 1, "allgather-total", 2, 3, "RDMA", 3.0, 0.7, 12.5, "", 2),
        ("9", 1, "x", 2, 3, "RDMA", 3.0, 0.7, round(3.0 / 0.7, 4), "", 2),
        ("9", 1, "x", 2, 2, "LOCAL", 1.0, 0.0, 0.0, "", 2),
    ]


@pytest.mark.parametrize(
    "bad",
    [
        {"0-x": _link("HCCS", 1.0, 1.0, 1.0, "a")},  # key not two integers
        {"0": _link("HCCS", 1.0, 1.0, 1.0, "a")},  # no '-'
        {"0-1-2": _link("HCCS", 1.0, 1.0, 1.0, "a")},  # three parts
        {"5-6": [1, 2, 3]},  # value not an object
        {"5-6": "N/A"},
    ],
)
def test_unreadable_links_are_skipped_and_their_neighbours_kept(bad: dict) -> None:
    acc = LinkColumns()
    links = {
        "0-1": _link("HCCS", 4.0, 2.0, 2.0, "op_a"),
        **bad,
        "1-0": _link("HCCS", 4.0, 1.0, 4.0),
    }
    assert acc.add_links(links, "send@g", 0, 1) == 2
    assert _same(
        _rows(acc),
        [
            ("g", 0, "send", 0, 1, "HCCS", 4.0, 2.0, 2.0, "op_a", 1),
            ("g", 0, "send", 1, 0, "HCCS", 4.0, 1.0, 4.0, "", 1),
        ],
    )


def test_non_numeric_values_become_nan_like_the_per_value_reader() -> None:
    acc = LinkColumns()
    links = {
        "0-1": _link("HCCS", "N/A", "2.5", None, "op"),  # size N/A, time as text, no bandwidth
        "1-2": _link("HCCS", 6, 3, 2),  # integers
    }
    acc.add_links(links, "allreduce@g", 4, None)
    rows = _rows(acc)
    assert rows[0][6] != rows[0][6] and rows[0][7] == 2.5  # NaN size, 2.5 ms
    assert rows[0][8] != rows[0][8]  # NaN / 2.5 is NaN: no bandwidth is made up
    assert rows[1][6:9] == (6.0, 3.0, 2.0)


def test_many_operators_keep_their_shared_fields() -> None:
    acc = LinkColumns()
    expected = []
    for op in range(5):
        links = {
            f"{op}-{d}": _link("HCCS", float(d + 1), 1.0, float(d + 1), f"n{op}")
            for d in range(op + 1)
        }
        acc.add_links(links, f"op{op}@g{op}", op * 10, op)
        expected += [
            (
                f"g{op}",
                op * 10,
                f"op{op}",
                op,
                d,
                "HCCS",
                float(d + 1),
                1.0,
                float(d + 1),
                f"n{op}",
                op,
            )
            for d in range(op + 1)
        ]
    assert len(acc) == 15
    assert _rows(acc) == expected


@pytest.mark.parametrize("odd", [True, 2**60 + 1, "7.5", " 7.5\t"])
def test_values_arrow_does_not_take_are_converted_as_float_does(odd: object) -> None:
    # most batches become one Arrow struct array; a value Arrow refuses (a boolean, an integer
    # beyond 2^53, a number written as text) sends the batch through the per-column conversion
    acc = LinkColumns()
    links = {"0-1": _link("HCCS", 8.0, 0.5, 16.0, "a"), "1-0": _link("HCCS", odd, 2.0, 4.0, "b")}
    acc.add_links(links, "x@g", 1, 0)
    assert _rows(acc) == [
        ("g", 1, "x", 0, 1, "HCCS", 8.0, 0.5, 16.0, "a", 0),
        ("g", 1, "x", 1, 0, "HCCS", float(odd), 2.0, 4.0, "b", 0),  # type: ignore[arg-type]
    ]
