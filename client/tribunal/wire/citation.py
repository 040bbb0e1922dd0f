"""Pydantic models of the citation verifier's payload: the item, its options, its details."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tribunal.wire.citation_verdicts import Relevance, SupportVerdict
from tribunal.wire.envelope import ScoreItem

PresetName = Literal["tribunal", "dr_tulu"]
"""The citation reward's presets: Tribunal's own, or DR Tulu's formula."""

SupportMode = Literal["judge", "lexical", "nli", "none"]
"""How support is decided: an LLM (``judge``), token overlap (``lexical``), or not at all
(``none``: format and id checks only)."""

MAX_TEXT_CHARS = 2_000_000
MAX_SNIPPETS = 2_000


class CitationOptions(BaseModel):
    """Per-item choices (unset fields keep the service's defaults)."""

    model_config = ConfigDict(extra="forbid")

    support: SupportMode | None = Field(
        default=None,
        description="judge (LLM) | lexical (extractive evidence only, no model) | nli (a local "
        "NLI cross-encoder, TRIBUNAL_CITATION_NLI_MODEL) | none (format and ids only). Service "
        "default: judge when a backend is configured, else lexical.",
    )
    preset: PresetName | None = Field(
        default=None,
        description="Reward formula: tribunal (gate · mean claim F1) or dr_tulu "
        "(0.6·F1 + 0.4·valid id share). Service default: tribunal.",
    )


class CitationItem(ScoreItem):
    """One answer whose citations are checked against the evidence it could cite."""

    response: str = Field(
        max_length=MAX_TEXT_CHARS,
        description="The completion. Claims are read from its final <answer>…</answer> block: "
        '<snippet id=A,B>claim</snippet> or <cite id="A,B">claim</cite> (id= or ids=, quoted '
        "or not).",
    )
    evidence: dict[str, str] | None = Field(
        default=None,
        description="The snippets the answer may cite, {id: text} (this or tool_output is "
        "required).",
    )
    tool_output: str | None = Field(
        default=None,
        max_length=MAX_TEXT_CHARS,
        description="Raw search-tool output holding <snippet id=…>, <snippets id=…> or "
        "<webpage id=…> tags, harvested into evidence. Evidence comes from the request only "
        "(evidence, tool_output): an item with neither is refused (bad_input, evidence); "
        "<tool_output> blocks inside the response are never read.",
    )
    question: str | None = Field(
        default=None,
        max_length=100_000,
        description="The question; judges read it, and claims that only repeat it earn 0.",
    )
    options: CitationOptions | None = Field(default=None, description="Per-item choices.")

    @field_validator("evidence")
    @classmethod
    def _bounded_evidence(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is None:
            return None
        if len(value) > MAX_SNIPPETS:
            raise ValueError(f"evidence holds {len(value)} snippets; at most {MAX_SNIPPETS}")
        if sum(len(k) + len(v) for k, v in value.items()) > MAX_TEXT_CHARS:
            raise ValueError(f"evidence is longer than {MAX_TEXT_CHARS} characters")
        return value


class FormatDetails(BaseModel):
    """The deterministic format gate."""

    valid: bool = Field(description="One closed answer block, citation tags balanced, not nested.")
    has_answer: bool
    answer_blocks: int
    answer_closed: bool
    tag_problems: list[str] = Field(
        description="kind@offset: nested, unclosed, unopened, mismatched, empty_ids, empty_claim."
    )


class ClaimResult(BaseModel):
    """One claim of the answer and how it scored."""

    index: int
    text: str
    cited: bool = Field(description="Carries a citation tag (else an uncited sentence).")
    ids: list[str] = Field(description="Every id it cites, in order.")
    invalid_ids: list[str] = Field(description="Cited ids absent from the evidence.")
    gate: (
        Literal[
            "invalid_ids", "restates_question", "contradicts_evidence", "duplicate", "off_topic"
        ]
        | None
    ) = Field(
        default=None,
        description="A deterministic rule: invalid_ids, restates_question and "
        "contradicts_evidence (judge mode) score 0 without a model call; duplicate (tribunal "
        "preset) is not counted; off_topic (tribunal preset, no content word of the question) "
        "is judged and earns nothing: left out when supported, F1 0 otherwise.",
    )
    support: SupportVerdict | None = Field(
        default=None, description="supported (recall 1) / partial (0.5) / unsupported (0)."
    )
    relevance: dict[str, Relevance] = Field(
        default_factory=dict, description="Per valid cited id: relevant or not (precision)."
    )
    needs_citation: bool | None = Field(
        default=None, description="Uncited sentence: states a fact that needs a citation."
    )
    precision: float | None = None
    recall: float | None = None
    f1: float | None = None
    counted: bool = Field(description="Enters the aggregate recall and F1.")
    reason: str | None = Field(default=None, description="The judge's short reason.")
    cached: bool = False
    decided_by: Literal["extractive", "judge", "lexical", "nli"] | None = Field(
        default=None,
        description="Who decided its support: extractive (judge mode: every valid cited "
        "snippet states it, checked without the judge, which is asked its topic at most), "
        "the support mode, or null (gated, or mode none).",
    )


class CitationUsage(BaseModel):
    """Model calls spent on one item."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_claims: int = 0
    extractive_claims: int = Field(
        default=0,
        description="Judge mode: cited claims the extractive check verified, whose support "
        "and relevance were not asked of the judge.",
    )


class CitationDetails(BaseModel):
    """``details`` of a citation result."""

    support_mode: SupportMode
    preset: PresetName
    format: FormatDetails
    evidence_ids: int = Field(description="Snippets in the evidence.")
    cited_ids: list[str] = Field(description="Distinct cited ids, in order.")
    invalid_ids: list[str]
    valid_id_share: float = Field(description="Share of distinct cited ids that exist, [0, 1].")
    precision: float | None = Field(description="Mean claim precision over cited claims.")
    recall: float | None = Field(description="Mean claim recall over counted claims.")
    f1: float | None = Field(description="Mean claim F1 over counted claims.")
    f1_term: float | None = Field(description="The F1 the preset pays.")
    gate_passed: bool
    claims: list[ClaimResult]
    judge_model: str | None = None
    prompt_version: str | None = None
    usage: CitationUsage = Field(default_factory=CitationUsage)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready details dict of an ``ItemOutcome``."""
        return self.model_dump(mode="json")
