"""The eval item schema (YAML) and its loader.

One YAML file holds a list of items. An item names where its profile comes from (a generated
scenario with generation kwargs, optionally a variant that drops files or ranks, or a real sample), one
or more questions asked in the same conversation (follow-ups), and for each question the facts the
answer must contain.

Expectation values may be literals or references resolved at run time, so expected facts are never
copied by hand from generated data:

- ``"@key:slow_ranks"``, ``"@key:expected_numbers.free_ms"``, ``"@key:slow_link"``: a path into the
  scenario's ``answer_key.json``;
- ``"@real:<fact>"``: a fact computed from a real sample's files by
  :mod:`advisor_chat.evals.realfacts` (an independent reading with the ``csv``/``json`` modules).

Questions may contain ``{placeholders}`` filled from the same sources (``{slow_rank}``,
``{other_rank}``, ``{link_src}``, ``{link_dst}``, ``{transport}``, ``{op_type}`` ...; see
:func:`advisor_chat.evals.runner.question_context`).

Example::

    - id: rank12-why-en
      lang: en
      scenario: seed-rank12
      gen: {ranks: 16, steps: 4}
      turns:
        - q: "Why is rank {slow_rank} slow?"
          expect:
            ranks: "@key:slow_ranks"
            category: "@key:category"
            cases: "@key:expected_case_ids"
            numbers: ["@key:expected_numbers"]
            tools: [explain_rank]
        - q: "and rank {other_rank}?"
          expect: {ranks: ["{other_rank}"], tools: [explain_rank]}
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from advisor_chat.errors import InputError


class NumberSpec(BaseModel):
    """One key number the answer must state (in its text or in a cited finding's metrics).

    Attributes:
        ref: Reference to the expected value (``@key:...`` or ``@real:...``); a reference to a mapping
            (e.g. ``@key:expected_numbers``) expands to one spec per entry.
        value: A literal expected value (when there is no ``ref``).
        name: Name of the number; its unit suffix (``_us``, ``_ms``, ``_s``, ``_ratio``, ``_share``,
            ``_pct``, ``_gbps``, ``_mb``) lets a stated value in another unit match.
        rel_tol: Relative tolerance (0.05 = 5%).
        abs_tol: Absolute tolerance in the number's own unit.
    """

    model_config = ConfigDict(extra="forbid")

    ref: str | None = None
    value: float | None = None
    name: str | None = None
    rel_tol: float = 0.05
    abs_tol: float = 0.0

    @model_validator(mode="after")
    def _one_source(self) -> NumberSpec:
        if (self.ref is None) == (self.value is None):
            raise ValueError("a number needs exactly one of 'ref' or 'value'")
        return self


class Expect(BaseModel):
    """What one answer must contain. Every field is optional; unset fields are not checked.

    Attributes:
        ranks: Ranks the answer must name (all of them), literal or a reference.
        category: Bottleneck category (compute / scheduling / communication / none).
        link: Slow link ``{src_rank, dst_rank, transport}``.
        op: Operator ``{op_type, name, input_shapes}``; the type or name must appear, and the dimensions of
            the first input shape.
        verdict: Verdict (e.g. of a before/after comparison).
        cases: Case ids the answer must cite (recall).
        acceptable_cases: Further case ids that are relevant (count as correct for precision).
        numbers: Key numbers with tolerance.
        tools: Tools that must have been called.
        expect_refusal: The data cannot answer: an honest "not enough signal" is expected.
        refusal_needs: Groups of alternative words; the refusal must contain one word of each group
            (the data that would be needed, e.g. ``[["communication.json", "communication data", "通信数据"]]``).
        forbid_finding_kinds: Finding kinds the answer must not cite (e.g. ``slow_rank`` on a healthy run).
        forbid_patterns: Regular expressions (placeholders allowed) the answer must not match, e.g. a
            wrong claim ``"rank {other_rank} is (?:the )?slow"``.
        max_ungrounded: Ungrounded numbers allowed in the text (``Answer.grounding.ungrounded``).
        culprit: The root cause whose culprit must be named (``"@key:root_cause"`` or a dict with the
            same fields: ``culprit_kind``, ``culprit_ranks``, ``culprit_link``, ``culprit_transport``,
            ``culprit_stage``, ``operator``, ``shape``, ``events``, ``mechanism``).
        victims: Ranks that lose time because of the culprit: none may be called slow or the cause.
        mechanism: The root cause's mechanism (``host_stall``, ``slow_link`` ...) must be stated.
        consistent: No rank is both called "not slow" and blamed / waited for / on the slow link.
        first_sentence: The first sentence answers: names the ``culprit``, gives the ``refusal`` or
            says there is ``none``.
        yes_no: The first sentence gives this verdict of a yes/no question.
        excluded_steps: Data-artifact steps the answer must name as excluded (never as slow).
        strict_language: A Chinese answer may hold no English phrase (identifiers allowed).
        culprits: Several independent root causes (``"@key:root_causes[0]"`` ...): each one's culprit
            must be named as :attr:`culprit` requires (two faults at once).
        evidence: The distinguishing evidence the answer must state: a list of groups, each a list of
            alternatives; every group must match one alternative. An alternative is a regular
            expression, or an ``@key:`` reference whose value must appear literally (a number as a
            whole number, e.g. ``@key:root_cause.evidence.operator`` → ``IndexPutV2``).
        first_suggestion: Regular expressions (English / Chinese alternatives): what the answer puts
            first as the thing to do (its first suggestion, or its first sentence when it carries no
            suggestion) must match one of them.
    """

    model_config = ConfigDict(extra="forbid")

    ranks: list[int | str] | str | None = None
    category: str | None = None
    link: dict[str, Any] | str | None = None
    op: dict[str, Any] | str | None = None
    verdict: str | None = None
    cases: list[str] | str | None = None
    acceptable_cases: list[str] = Field(default_factory=list)
    numbers: list[NumberSpec] = Field(default_factory=list)
    tools: list[str] = Field(default_factory=list)
    expect_refusal: bool = False
    refusal_needs: list[list[str]] = Field(default_factory=list)
    forbid_finding_kinds: list[str] = Field(default_factory=list)
    forbid_patterns: list[str] = Field(default_factory=list)
    max_ungrounded: int = 0
    culprit: dict[str, Any] | str | None = None
    victims: list[int | str] | str | None = None
    mechanism: str | None = None
    consistent: bool = False
    first_sentence: Literal["culprit", "refusal", "none"] | None = None
    yes_no: Literal["yes", "no"] | None = None
    excluded_steps: list[int | str] | str | None = None
    strict_language: bool = False
    culprits: list[dict[str, Any] | str] | None = None
    evidence: list[list[str] | str] | None = None
    first_suggestion: list[str] | str | None = None

    @field_validator("numbers", mode="before")
    @classmethod
    def _numbers(cls, v: Any) -> Any:
        if v is None:
            return []
        if isinstance(v, str | int | float):
            v = [v]
        out: list[Any] = []
        for x in v:
            if isinstance(x, str):
                out.append({"ref": x})
            elif isinstance(x, int | float):
                out.append({"value": float(x)})
            else:
                out.append(x)
        return out

    @field_validator("refusal_needs", mode="before")
    @classmethod
    def _needs(cls, v: Any) -> Any:
        if v is None:
            return []
        if isinstance(v, str):
            return [[v]]
        return [[x] if isinstance(x, str) else x for x in v]


class Turn(BaseModel):
    """One question of a conversation and what its answer must contain."""

    model_config = ConfigDict(extra="forbid")

    q: str
    expect: Expect = Field(default_factory=Expect)


class Variant(BaseModel):
    """A derived copy of a generated profile, to build data that lacks something.

    Attributes:
        keep_ranks: Keep only these ranks' ``*_ascend_pt`` folders (e.g. ``[0]`` for single-rank data).
        drop_files: File names removed from every rank folder (e.g. ``communication.json``), to
            simulate an export without that data (Level0, no trace).
    """

    model_config = ConfigDict(extra="forbid")

    keep_ranks: list[int] | None = None
    drop_files: list[str] = Field(default_factory=list)


class EvalItem(BaseModel):
    """One eval item: a profile source and a conversation of one or more turns.

    Attributes:
        id: Unique id (used in reports and to select items).
        lang: Language of the questions (``en`` / ``zh``); the answer must be in it.
        scenario: Synthetic scenario name (``advisor_chat.synth.SCENARIOS``).
        gen: Keyword arguments of ``advisor_chat.synth.generate`` (ranks, steps, seed, export).
        real: Name of a real sample folder under ``shared/samples/real``.
        profile: Subfolder of the generated/real folder to load (e.g. ``after``).
        baseline: Subfolder loaded as the baseline profile (e.g. ``before``).
        variant: Derived copy (drop files / ranks).
        tags: Free labels (``followup``, ``refusal``, ``real`` ...).
        turns: The conversation.
        split: ``tune`` or ``heldout`` (paraphrase sets: held-out items are never used to tune).
    """

    model_config = ConfigDict(extra="forbid")

    id: str
    lang: Literal["en", "zh"]
    scenario: str | None = None
    gen: dict[str, Any] = Field(default_factory=dict)
    real: str | None = None
    profile: str | None = None
    baseline: str | None = None
    variant: Variant | None = None
    tags: list[str] = Field(default_factory=list)
    turns: list[Turn]
    dataset: str = ""
    split: Literal["tune", "heldout"] | None = None

    @model_validator(mode="before")
    @classmethod
    def _single_turn(cls, data: Any) -> Any:
        if isinstance(data, dict) and "question" in data:
            data = dict(data)
            q = data.pop("question")
            exp = data.pop("expect", {})
            data["turns"] = [{"q": q, "expect": exp}]
        return data

    @model_validator(mode="after")
    def _source(self) -> EvalItem:
        if (self.scenario is None) == (self.real is None):
            raise ValueError(f"item {self.id}: give exactly one of 'scenario' or 'real'")
        if self.real is not None and (self.gen or self.variant):
            raise ValueError(f"item {self.id}: 'gen'/'variant' apply to generated scenarios only")
        if not self.turns:
            raise ValueError(f"item {self.id}: no questions")
        return self

    @property
    def source(self) -> str:
        """The scenario or real sample the item runs on (for per-scenario scores)."""
        return self.scenario or f"real:{self.real}"

    @property
    def is_refusal(self) -> bool:
        """Whether any turn expects an honest refusal."""
        return any(t.expect.expect_refusal for t in self.turns)


def default_dataset_dir() -> Path | None:
    """The repository's ``evals/datasets`` folder, if the package runs from a checkout."""
    here = Path(__file__).resolve().parents[2] / "evals" / "datasets"
    return here if here.is_dir() else None


PARAPHRASE_GLOB = "paraphrase_*.yaml"
"""The paraphrase question sets (issue 12); not part of the default dataset, selected by name."""

NAMED_ONLY_GLOBS = (PARAPHRASE_GLOB, "generalization*.yaml")
"""Question sets run only by name (``--dataset paraphrase``, ``--dataset generalization``), never in
the default set of a folder: the paraphrase sets and the generalization benchmark (issue 22)."""


def _named(p: Path) -> list[Path]:
    """A dataset given by name in the repository's ``evals/datasets``.

    ``{name}.yaml`` when it exists (``diagnosis``, ``generalization``, ``generalization_dev``: the
    benchmark does not pull in its development set), else every ``{name}_*.yaml`` (``paraphrase``).
    """
    d = default_dataset_dir()
    if d is None or p.parent != Path(".") or p.suffix:
        return []
    exact = d / f"{p.name}.yaml"
    return [exact] if exact.is_file() else sorted(d.glob(f"{p.name}_*.yaml"))


def _dataset_files(paths: Iterable[Path]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            found = sorted(p.glob("*.yaml")) + sorted(p.glob("*.yml"))
            # a folder means the default set: the paraphrase / generalization sets are run by name
            files.extend(f for f in found if not any(f.match(g) for g in NAMED_ONLY_GLOBS))
        elif p.is_file():
            files.append(p)
        elif _named(p):
            files.extend(_named(p))
        else:
            raise InputError(
                "eval dataset not found",
                path=p,
                remedy="pass a YAML file, a folder of YAML files, or a dataset name "
                "(e.g. paraphrase) with --dataset",
            )
    if not files:
        raise InputError(
            "no eval dataset files (*.yaml) found",
            remedy="pass --dataset with a YAML file or folder",
        )
    return files


def load_dataset(paths: Path | Iterable[Path] | None = None) -> list[EvalItem]:
    """Load and validate eval items from YAML files or folders.

    Args:
        paths: A YAML file, a folder of ``*.yaml`` files, or several; default: the repository's
            ``evals/datasets``.

    A path that does not exist but names a dataset of the repository (``paraphrase`` → every
    ``evals/datasets/paraphrase_*.yaml``) selects those files. A folder means its default set: every
    YAML file except the paraphrase sets. A file may be a list of items or a mapping with ``items``
    and ``defaults`` (``defaults.expect`` is merged under every turn's ``expect``).

    Returns:
        The items in file order; ``EvalItem.dataset`` holds the file stem.

    Raises:
        InputError: A path is missing, a file is not valid YAML, an item does not fit the schema, or two
            items share an id.
    """
    if paths is None:
        d = default_dataset_dir()
        if d is None:
            raise InputError(
                "no default eval dataset (evals/datasets is not next to the package)",
                remedy="pass --dataset with a YAML file or folder",
            )
        paths = [d]
    elif isinstance(paths, str | Path):
        paths = [Path(paths)]
    items: list[EvalItem] = []
    seen: dict[str, Path] = {}
    for f in _dataset_files(paths):
        try:
            raw = yaml.safe_load(f.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise InputError(f"cannot read eval dataset: {exc}", path=f) from exc
        if raw is None:
            continue
        defaults: dict[str, Any] = {}
        if isinstance(raw, dict):
            defaults = raw.get("defaults") or {}
            raw = raw.get("items", [])
        if not isinstance(raw, list):
            raise InputError("an eval dataset must be a list of items", path=f)
        for entry in raw:
            try:
                if defaults and isinstance(entry, dict):
                    entry = _with_defaults(entry, defaults)
                item = EvalItem.model_validate({**entry, "dataset": f.stem})
            except (ValidationError, TypeError) as exc:
                ident = entry.get("id", "?") if isinstance(entry, dict) else "?"
                raise InputError(f"invalid eval item {ident}: {exc}", path=f) from exc
            if item.id in seen:
                raise InputError(
                    f"duplicate eval item id {item.id!r} (also in {seen[item.id]})", path=f
                )
            seen[item.id] = f
            items.append(item)
    return items


def _with_defaults(entry: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """Merge a file's ``defaults.expect`` under every turn's ``expect`` (the turn's keys win)."""
    exp_defaults = defaults.get("expect") or {}
    e = dict(entry)
    if "question" in e:
        e["expect"] = {**exp_defaults, **(e.get("expect") or {})}
    else:
        e["turns"] = [
            {**t, "expect": {**exp_defaults, **(t.get("expect") or {})}}
            if isinstance(t, dict)
            else t
            for t in e.get("turns") or []
        ]
    return e


def draw_splits(items: Iterable[EvalItem], seed: int, heldout: float = 0.4) -> dict[str, str]:
    """The seeded, stratified held-out draw of a paraphrase set.

    Items are grouped by (scenario or real sample, language); in each group the ids are sorted,
    shuffled with ``random.Random(f"{seed}/{source}/{lang}")`` and the first ``round(heldout * n)``
    are held out. The draw depends only on the seed and the ids, so anyone can recompute it
    (``tests/test_evals_paraphrase.py`` does) and a split cannot be chosen by hand.

    Args:
        items: The items of one file.
        seed: The seed recorded in the file (``split_seed``).
        heldout: Share of each group held out.

    Returns:
        Item id → ``"tune"`` or ``"heldout"``.
    """
    groups: dict[tuple[str, str], list[str]] = {}
    for it in items:
        groups.setdefault((it.source, it.lang), []).append(it.id)
    out: dict[str, str] = {}
    for (src, lang), ids in sorted(groups.items()):
        order = sorted(ids)
        random.Random(f"{seed}/{src}/{lang}").shuffle(order)
        k = round(heldout * len(order))
        for i, ident in enumerate(order):
            out[ident] = "heldout" if i < k else "tune"
    return out


def draw_heldout_kinds(kinds: Iterable[str], seed: int) -> list[str]:
    """The seeded held-out draw of a question set split by kind (the generalization benchmark).

    Half of the kinds (rounded down) are held out: ``random.Random(seed).sample(sorted(kinds),
    len(kinds) // 2)``, returned sorted. It depends only on the seed and the kind names, so anyone
    can recompute it (``tests/test_evals_generalization.py`` does) and it cannot be chosen by hand.
    """
    names = sorted(set(kinds))
    return sorted(random.Random(seed).sample(names, len(names) // 2))


def select_items(
    items: Iterable[EvalItem],
    *,
    split: str | None = None,
    scenario: Iterable[str] | None = None,
) -> list[EvalItem]:
    """Items of one split (``tune`` / ``heldout``) and/or of some scenarios (or ``real:<sample>``).

    Raises:
        InputError: ``split`` is not ``tune``, ``heldout`` or ``all``.
    """
    if split not in (None, "all", "tune", "heldout"):
        raise InputError(f"unknown split {split!r}", remedy="use --split tune, heldout or all")
    wanted = set(scenario or [])
    out = []
    for it in items:
        if split in ("tune", "heldout") and it.split != split:
            continue
        if wanted and it.source not in wanted and (it.real or "") not in wanted:
            continue
        out.append(it)
    return out
