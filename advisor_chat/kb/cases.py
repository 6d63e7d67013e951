"""Knowledge cases: the schema of ``knowledge/cases/<id>.md`` and how they are loaded.

A case file is Markdown with YAML front matter::

    ---
    id: host-dispatch-bound
    title: Device waits for the host (dispatch-bound)
    title_zh: 下发瓶颈：设备等待 主机下发
    symptom_tags: [host_bound, high_free, launch_delay]
    applies_when:
      - free_share > 0.10
      - launch_delay_p90_us > 50
    remedies:
      - "export TASK_QUEUE_ENABLE=2"
    expected_effect: "..."
    sources:
      - "MindStudio large-model training bottleneck-location workflow (seed article)"
    ---
    ## Symptoms
    ...
    ## How to confirm from the data
    ...
    ## Fixes
    ...
    ## Pitfalls
    ...
    ## 中文摘要
    ...

``applies_when`` grammar (one condition per list item; the case applies when ANY condition holds)::

    condition := metric op number
    metric    := snake_case name as analyzers emit it, containing a unit part
                 (``*_us``, ``*_ms``, ``*_s``, ``*_share``, ``*_ratio``, ``*_gbps``, ``*_mb``, ``*_count``,
                 ``*_cv``, ``*_pct``, ``*_size``, ``*_level``, ``*_flag`` (0/1), ``*_gb``, ``*_<unit>_per_step``,
                 or a statistic after the unit: ``free_share_max``)
    op        := ">" | ">=" | "<" | "<=" | "==" | "!="
    number    := a decimal number, e.g. 0.1, 50, 1e3

Shares and ratios are fractions (0.10 = 10%), times carry their unit in the name.
"""

from __future__ import annotations

import hashlib
import operator
import os
import re
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from advisor_chat.errors import InputError
from advisor_chat.kb.types import CaseHit
from advisor_chat.symptoms import SYMPTOM_TAGS

#: Body sections every case must have, in this order of importance.
REQUIRED_SECTIONS: tuple[str, ...] = (
    "Symptoms",
    "How to confirm from the data",
    "Fixes",
    "Pitfalls",
    "中文摘要",
)

#: Allowed unit suffixes of metric names in ``applies_when``.
METRIC_SUFFIXES: tuple[str, ...] = (
    "_us",
    "_ms",
    "_s",
    "_share",
    "_ratio",
    "_gbps",
    "_mb",
    "_count",
    "_cv",
    "_pct",
    "_size",
    "_level",
    "_flag",
    "_gb",
    "_per_step",
)

#: Unit words; a metric name must contain one as a ``_``-separated part (``free_share_max``,
#: ``aicpu_us_per_step``, ``launch_delay_p50_us``).
UNIT_WORDS: frozenset[str] = frozenset(s.lstrip("_") for s in METRIC_SUFFIXES if s != "_per_step")

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    "<": operator.lt,
}
_COND_RE = re.compile(
    r"^\s*(?P<metric>[a-z][a-z0-9_]*)\s*(?P<op>>=|<=|==|!=|>|<)\s*(?P<value>[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?)\s*$"
)
_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]*[a-z0-9]$")
_CJK_RE = re.compile(r"[\u3400-\u9fff]")
SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader when PyYAML has it (about 10x faster than the pure-Python one: 36 files
in 0.02 s instead of 0.23 s per process), else ``yaml.SafeLoader``; both build the same values."""

_FRONT_RE = re.compile(r"\A---[ \t]*\r?\n(?P<yaml>.*?)\r?\n---[ \t]*\r?\n(?P<body>.*)\Z", re.S)
_SECTION_RE = re.compile(r"^##[ \t]+(?P<name>.+?)[ \t]*$", re.M)


class Condition(BaseModel):
    """One parsed ``applies_when`` condition, e.g. ``free_share > 0.10``.

    Attributes:
        metric: Unit-suffixed metric name as analyzers emit it.
        op: Comparison operator.
        value: Threshold in the metric's unit.
    """

    model_config = ConfigDict(frozen=True)

    metric: str
    op: str
    value: float

    def holds(self, metrics: Mapping[str, float]) -> bool | None:
        """Evaluate the condition; ``None`` when the metric is absent."""
        if self.metric not in metrics or metrics[self.metric] is None:
            return None
        return _OPS[self.op](float(metrics[self.metric]), self.value)

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.value:g}"


def parse_condition(text: str) -> Condition:
    """Parse one ``applies_when`` condition.

    Raises:
        ValueError: The text does not follow ``metric op number`` or the metric lacks a unit suffix.
    """
    m = _COND_RE.match(text)
    if not m:
        raise ValueError(
            f"condition {text!r} does not follow 'metric op number' (op one of > >= < <= == !=)"
        )
    metric = m["metric"]
    if not set(metric.split("_")) & UNIT_WORDS:
        raise ValueError(
            f"metric {metric!r} in {text!r} has no unit suffix "
            f"(a name part among {', '.join(sorted(UNIT_WORDS))})"
        )
    return Condition(metric=metric, op=m["op"], value=float(m["value"]))


class Case(BaseModel):
    """One knowledge case (front matter + body).

    Attributes:
        id: Case id, equal to the file stem.
        title: English title.
        title_zh: Chinese title (must contain Chinese characters).
        symptom_tags: Tags from :data:`advisor_chat.symptoms.SYMPTOM_TAGS`.
        applies_when: Metric conditions (see the module docstring for the grammar).
        remedies: Concrete settings, commands or code changes.
        expected_effect: What the fix should gain, with the source's numbers where a source gives them.
        sources: Titles of the public documents or seed articles the case was written from.
        body: Markdown body (everything after the front matter).
        sections: Body split by ``## `` headings: heading -> text.
        path: The file the case was read from.
        content_hash: SHA-256 of the file bytes (drives incremental index builds).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    title: str = Field(min_length=3)
    title_zh: str = Field(min_length=2)
    symptom_tags: tuple[str, ...] = Field(min_length=1)
    applies_when: tuple[str, ...] = ()
    remedies: tuple[str, ...] = Field(min_length=1)
    expected_effect: str = Field(min_length=3)
    sources: tuple[str, ...] = Field(min_length=1)
    body: str
    sections: dict[str, str]
    path: Path
    content_hash: str

    @field_validator("id")
    @classmethod
    def _check_id(cls, v: str) -> str:
        if not _ID_RE.match(v):
            raise ValueError("id must be lower-case letters, digits and dashes (kebab-case)")
        return v

    @field_validator("title_zh")
    @classmethod
    def _check_zh(cls, v: str) -> str:
        if not _CJK_RE.search(v):
            raise ValueError("title_zh must contain Chinese characters")
        return v

    @field_validator("symptom_tags")
    @classmethod
    def _check_tags(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [t for t in v if t not in SYMPTOM_TAGS]
        if bad:
            raise ValueError(
                f"unknown symptom tag(s) {bad}; add them to advisor_chat/symptoms.py first"
            )
        return v

    @field_validator("applies_when")
    @classmethod
    def _check_conditions(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for text in v:
            parse_condition(text)
        return v

    @field_validator("remedies", "sources")
    @classmethod
    def _non_empty_items(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if any(not str(x).strip() for x in v):
            raise ValueError("items must be non-empty strings")
        return v

    @field_validator("sections")
    @classmethod
    def _check_sections(cls, v: dict[str, str]) -> dict[str, str]:
        missing = [s for s in REQUIRED_SECTIONS if not v.get(s, "").strip()]
        if missing:
            raise ValueError(f"body lacks section(s) {missing} (each as '## <name>' with text)")
        return v

    @property
    def conditions(self) -> tuple[Condition, ...]:
        """The parsed ``applies_when`` conditions."""
        return tuple(parse_condition(c) for c in self.applies_when)

    def matching_conditions(self, metrics: Mapping[str, float]) -> list[str]:
        """Return the ``applies_when`` conditions that hold for ``metrics`` (absent metrics never hold)."""
        return [str(c) for c in self.conditions if c.holds(metrics)]

    @property
    def rel_source(self) -> str:
        """Citation path of the case file, ``knowledge/cases/<id>.md``."""
        return f"knowledge/cases/{self.id}.md"

    def hit(
        self, score: float = 0.0, section: str = "", matched_tags: tuple[str, ...] = ()
    ) -> CaseHit:
        """This case as a retrieval hit, cited by its file and the public sources it came from."""
        return CaseHit(
            id=self.id,
            title=self.title,
            title_zh=self.title_zh,
            score=score,
            section=section,
            source=self.rel_source + " (sources: " + "; ".join(self.sources) + ")",
            remedies=tuple(self.remedies),
            expected_effect=self.expected_effect,
            symptom_tags=tuple(self.symptom_tags),
            matched_tags=matched_tags,
        )

    @property
    def chinese_summary(self) -> str:
        """The ``## 中文摘要`` section."""
        return self.sections.get("中文摘要", "")


def split_sections(body: str) -> dict[str, str]:
    """Split a Markdown body by level-2 headings into ``{heading: text}`` (text stripped)."""
    out: dict[str, str] = {}
    matches = list(_SECTION_RE.finditer(body))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(body)
        out[m["name"].strip()] = body[m.end() : end].strip()
    return out


def _field_of(err: Mapping[str, Any]) -> str:
    loc = [str(x) for x in err.get("loc", ())]
    return ".".join(loc) if loc else "?"


def parse_case_file(path: Path) -> Case:
    """Read and validate one case file.

    Args:
        path: ``knowledge/cases/<id>.md``.

    Returns:
        The validated case.

    Raises:
        InputError: The file is unreadable, has no front matter, bad YAML, or a field is invalid;
            the message names the file and the field.
    """
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read case file: {exc}", path=path) from exc
    text = text.replace("\r\n", "\n")
    m = _FRONT_RE.match(text)
    if not m:
        raise InputError(
            "case file has no YAML front matter (field: front matter)",
            path=path,
            remedy="start the file with a '---' line, the YAML fields, and a closing '---' line",
        )
    try:
        meta = yaml.load(m["yaml"], Loader=SAFE_LOADER)
    except yaml.YAMLError as exc:
        raise InputError(
            f"case file front matter is not valid YAML (field: front matter): {exc}", path=path
        ) from exc
    if not isinstance(meta, dict):
        raise InputError("case file front matter must be a YAML mapping", path=path)
    if "id" in meta and str(meta["id"]) != path.stem:
        raise InputError(
            f"case file field 'id' is {meta['id']!r} but the file is named {path.name}",
            path=path,
            remedy="make the id equal to the file name without .md",
        )
    body = m["body"]
    data = {
        **meta,
        "body": body,
        "sections": split_sections(body),
        "path": path,
        "content_hash": hashlib.sha256(raw).hexdigest(),
    }
    for key in ("symptom_tags", "applies_when", "remedies", "sources"):
        if isinstance(data.get(key), str):
            data[key] = [data[key]]
    try:
        return Case(**data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = _field_of(first)
        raise InputError(
            f"case file field '{field}' is invalid: {first.get('msg', 'invalid value')}",
            path=path,
            remedy="fix the front matter or body as described in knowledge/README.md",
        ) from None
    except TypeError as exc:  # pragma: no cover - defensive
        raise InputError(f"case file is malformed: {exc}", path=path) from None


def knowledge_dir() -> Path:
    """Return the knowledge folder: ``$ADVISOR_KNOWLEDGE`` or the repository's ``knowledge/``.

    Raises:
        InputError: The folder (or its ``cases/`` subfolder) does not exist.
    """
    env = os.environ.get("ADVISOR_KNOWLEDGE")
    path = Path(env).expanduser() if env else Path(__file__).resolve().parents[2] / "knowledge"
    if not env and not (path / "cases").is_dir():
        # A non-editable install: the wheel ships knowledge/ as advisor_chat/_knowledge.
        path = Path(__file__).resolve().parents[1] / "_knowledge"
    if not (path / "cases").is_dir():
        raise InputError(
            "knowledge folder with a cases/ subfolder not found",
            path=path,
            remedy="set ADVISOR_KNOWLEDGE to the folder that holds cases/*.md",
        )
    return path


_CACHE_LOCK = threading.Lock()
_CASE_CACHE: dict[Path, tuple[tuple[tuple[str, int, int], ...], list[Case]]] = {}


def _fingerprint(cases_dir: Path) -> tuple[tuple[str, int, int], ...]:
    out = []
    for p in sorted(cases_dir.glob("*.md")):
        st = p.stat()
        out.append((p.name, st.st_mtime_ns, st.st_size))
    return tuple(out)


def load_cases(knowledge: Path | None = None) -> list[Case]:
    """Load and validate every ``cases/*.md`` file, sorted by id.

    Args:
        knowledge: The knowledge folder; default :func:`knowledge_dir`.

    Returns:
        The cases (cached per folder until a file changes).

    Raises:
        InputError: A case file is invalid (the message names file and field), or ids repeat.
    """
    root = knowledge or knowledge_dir()
    cases_dir = root / "cases"
    if not cases_dir.is_dir():
        raise InputError("knowledge folder has no cases/ subfolder", path=root)
    fp = _fingerprint(cases_dir)
    with _CACHE_LOCK:
        hit = _CASE_CACHE.get(cases_dir.resolve())
        if hit and hit[0] == fp:
            return list(hit[1])
    cases = [parse_case_file(p) for p in sorted(cases_dir.glob("*.md"))]
    if not cases:
        raise InputError("knowledge folder holds no case files", path=cases_dir)
    with _CACHE_LOCK:
        _CASE_CACHE[cases_dir.resolve()] = (fp, cases)
    return list(cases)


def get_case(case_id: str, knowledge: Path | None = None) -> Case:
    """Return the case with this id.

    Raises:
        InputError: No case has this id (the message lists the known ids).
    """
    for c in load_cases(knowledge):
        if c.id == case_id:
            return c
    known = ", ".join(c.id for c in load_cases(knowledge))
    raise InputError(f"no knowledge case with id {case_id!r}; known ids: {known}")
