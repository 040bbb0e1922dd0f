"""The public data sets the docs, the tutorial, the benchmarks and the tests read, and how a
clone gets them: ``tribunal data fetch`` (``make data``).

Each file of the catalogue (``DATASETS``) comes from its public source, a file of a GitHub
repository at a pinned commit (``raw.githubusercontent.com``), over plain HTTPS, and is checked
against its sha256 before it is moved into place: a file that does not match is refused and
removed, never kept. A download that stopped is resumed (an HTTP range request on the kept
``.part`` file). Where those sources cannot be reached, ``--from`` takes the same files from a
copy laid out as ``TRIBUNAL_DATA_DIR`` (a local folder, or an http(s) mirror of one) with the
same checksums. ``SOURCES.md`` beside the data says where each file came from and its licence.

The checksum is of the file's content: of its bytes, or, for a ``.gz`` file, of the bytes it
decompresses to (so that a file re-compressed from its source checks the same). Sources kept in
another form than the file (HumanEval's ``.gz``, MBPP's JSON list) are converted first.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Protocol

import httpx

ROOT = Path(__file__).resolve().parents[3]
"""The checkout (services/tribunal/cli/ is three folders down)."""

FETCH_COMMAND = "tribunal data fetch"
"""The one command that gets the data (``make data`` runs it), named in every missing-data line."""

CHUNK_BYTES = 1 << 16

GITHUB_RAW = "https://raw.githubusercontent.com"
"""Where GitHub serves a repository's files at a commit: ``{GITHUB_RAW}/owner/name/commit/path``."""


def data_dir() -> Path:
    """``$TRIBUNAL_DATA_DIR``, else ``../shared/data`` beside the checkout."""
    return Path(os.environ.get("TRIBUNAL_DATA_DIR", ROOT.parent / "shared" / "data"))


class SourceForm(Enum):
    """How a source's bytes become the file: as they are, decompressed (gzip), or a JSON list
    written as JSON Lines (one ``json.dumps(row, ensure_ascii=False)`` a line)."""

    AS_IS = "as_is"
    GUNZIP = "gunzip"
    JSON_LIST = "json_list"


@dataclass(frozen=True)
class Dataset:
    """One file of the data directory.

    Attributes:
        path: where it lies under the data directory (``math/gsm8k_test.jsonl``).
        sha256: of its content (for a ``.gz`` file, of what it decompresses to).
        repo: its public source, a GitHub repository (``owner/name``); ``None`` for a file
            derived by hand (only a copy or mirror, ``--from``, has it).
        commit: the source's pinned commit (40 hex digits).
        source_path: the file in that repository.
        form: how the source's bytes become the file.
    """

    path: str
    sha256: str
    repo: str | None = None
    commit: str = ""
    source_path: str = ""
    form: SourceForm = SourceForm.AS_IS

    def url(self, github: str = GITHUB_RAW) -> str | None:
        """The source's address at its commit on ``github`` (GitHub's raw files, or a proxy of
        them), or ``None`` for a derived file."""
        if self.repo is None:
            return None
        return f"{github}/{self.repo}/{self.commit}/{self.source_path}"


_RESEARCH = ("AkariAsai/ScholarQABench", "95e6fc52b0a8a0ce0a74956029991e3bb00c38b9")
_SKY_T1 = ("NovaSky-AI/SkyThought", "6840eb7df638ab178d20122099286db08e376851")
_SKY_T1_OUTPUTS = "skythought/Qwen2.5-Math/evaluation/outputs"
_SKY_T1_FILE = "test_Sky-T1_-1_seed0_t0.0_s0_e-1.jsonl"


def _sky_t1(model: str, folder: str, benchmark: str, sha256: str) -> Dataset:
    """One of Sky-T1's evaluation output files (SkyThought's Qwen2.5-Math harness: each row
    a reasoning model's output and the harness's ``score``), stored compressed."""
    return Dataset(
        f"math/sky_t1/{model}_{benchmark}.jsonl.gz",
        sha256,
        *_SKY_T1,
        f"{_SKY_T1_OUTPUTS}/{folder}/{benchmark}_eval/{benchmark}/{_SKY_T1_FILE}",
    )


DATASETS: tuple[Dataset, ...] = (
    Dataset(
        "math/gsm8k_test.jsonl",
        "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14",
        "openai/grade-school-math",
        "3101c7d5072418e28b9008a6636bde82a006892c",
        "grade_school_math/data/test.jsonl",
    ),
    # MATH-500: its sha256 is prm800k's LFS oid; the bytes from a repository that keeps them.
    Dataset(
        "math/math500_test.jsonl",
        "35dc41080a3680858b27fa7e0533d2d547825316fc5dafe5d316f4ccc5a06132",
        "hkust-nlp/simpleRL-reason",
        "cf1c7858bfc145a27aa733e75d930d34f0d318a6",
        "examples/simplelr_math_eval/data/math500/test.jsonl",
    ),
    # Reasoning-model outputs with their harness's labels (SOURCES.md): the ``math`` tests'.
    _sky_t1(
        "Sky-T1-math-correct-5K-27B",
        "home/ubuntu/skyov1-dl/Sky-T1-math-correct-5K-27B",
        "math500",
        "0be2b72f3354feef557c8be4982284afecfadfe3fb40684ab48619715ad80c40",
    ),
    _sky_t1(
        "Sky-T1-math-reflection-0.2-32B",
        "icml_models/Sky-T1-math-reflection-0.2-32B",
        "aime24",
        "6ab818aaf018f2a010df03406bf653a2cb64ed04effed7e48d2ceecf6d196537",
    ),
    _sky_t1(
        "Sky-T1-math-reflection-1.0-32B",
        "icml_models/Sky-T1-math-reflection-1.0-32B",
        "aime24",
        "61e764ad763a567b31328625ceff518b52301e85e052dff802169de7ebb10775",
    ),
    _sky_t1(
        "Sky-T1-math-corrupt-0.2-32B",
        "icml_models/Sky-T1-math-corrupt-0.2-32B",
        "aime24",
        "24d592e952adedbd1db8cc68b728c8e17e0e80f8b4bd694268bc99ee35d016ae",
    ),
    _sky_t1(
        "Sky-T1-math-corrupt-0.5-32B",
        "icml_models/Sky-T1-math-corrupt-0.5-32B",
        "aime24",
        "2c53e24c968bf8d24fb06fd0ba227a6e167ced29aff79bb227d1f8e98ebe0f41",
    ),
    _sky_t1(
        "Sky-T1-math-correct-5K-32B-checkpoint-140",
        "icml_models/Sky-T1-math-correct-5K-32B-ckpts/checkpoint-140",
        "aime24",
        "53019a111e2a0af924611bedfb220216206331aa6aa8bcfe275bc8082033657d",
    ),
    _sky_t1(
        "Sky-T1-math-corrupt-0.2-32B",
        "icml_models/Sky-T1-math-corrupt-0.2-32B",
        "amc23",
        "f945a633b8855955560fa1787f9fb2378f626e87f6f986df2328775ab23a315d",
    ),
    Dataset(
        "code/humaneval.jsonl",
        "1d49078ba3e2b196b9344535bef34a43021f038fad9561d6ee7c53450609a6a2",
        "openai/human-eval",
        "6d43fb980f9fee3c892a914eda09951f772ad10d",
        "data/HumanEval.jsonl.gz",
        SourceForm.GUNZIP,
    ),
    Dataset(
        "code/mbpp_sanitized.jsonl",
        "7a76be064e2b9ca27ccb80896caadb253ff911343acc61eb4870968e2ec88350",
        "mrigankpawagi/PropertyEval",
        "b2be813dcff867cc350c61b8d3ea57ec088ce1ac",
        "sanitized-mbpp.json",
        SourceForm.JSON_LIST,
    ),
    Dataset(
        "code/leetcodedataset_v0.3.1_test.jsonl.gz",
        "aec951945feb555b4c72783519452a7a0437ca8c6e5624a83d0ae888718fa4ed",
        "newfacade/LeetCodeDataset",
        "182cd19fd53161efd70a1ef074fe1056b659bfa3",
        "data/LeetCodeDataset-v0.3.1-test.jsonl.gz",
    ),
    Dataset(
        "code/cruxeval.jsonl",
        "8368b81047dc5014e4caf5a2f97604eff7644e0ecd7415e3ceeb184bbc2e0c96",
        "facebookresearch/cruxeval",
        "190faf16d175b5847b0af05d937872b1fb395942",
        "data/cruxeval.jsonl",
    ),
    # Derived (CRUXEval joined with CodeLlama-7B's scored predictions; SOURCES.md): a copy only.
    Dataset(
        "code/cruxeval_output_predictions_codellama7b_scored.jsonl",
        "054241b9f1c2cb2d70c91a8e693b873226f3460acaaba0e972ebb90da11e3d72",
    ),
    Dataset(
        "research/drtulu_style_pubmed_trajectories.jsonl.gz",
        "93cae54e0b5929ad87d4115498046a851665a1460077c9e5ac8920b3cbb5ce9d",
        "liyc-sys/dr-tulu",
        "bf73bd726acc9b99ccdeb94d82046e81117b3653",
        "pubmed_training_data/pubmed_trajectory_20251216_155711_incremental.jsonl",
    ),
    Dataset(
        "research/scholarqa_cs_rubrics.json",
        "61cd2d82c0a4bf2a4a474a033c61311f927ecb7a0bfe31fcf4570f3333dce830",
        *_RESEARCH,
        "data/scholarqa_cs/test_configs_snippets.json",
    ),
    Dataset(
        "research/scholarqa_cs_answers_gpt4o.jsonl.gz",
        "a7efa1a6b5948001b7db255b8f3e6aaf9dc6e7f1fb7ab39077261833fcfe09d2",
        *_RESEARCH,
        "data/scholarqa_cs/src_answers/gpt-4o-ai2_rubric_reranking_pes2o_top_15_reranking_you"
        "_feedback_no_post_edit.jsonl",
    ),
    Dataset(
        "research/prometheus_rubrics_v8.json",
        "cc45aa2f15c07a8cb9e3de9c71a3bdeeefd6a262c32a2bca38a69ce25cc0538d",
        *_RESEARCH,
        "rubrics/prometheus_rubrics_v8.json",
    ),
    Dataset(
        "research/scifact_claims_test.jsonl",
        "f2ef58b77295453385d5528a146af9a0839bd9cc57c9e7f6b06ca9df45d08d5d",
        *_RESEARCH,
        "data/single_paper_tasks/scifact_test.jsonl",
    ),
)


class DataError(Exception):
    """A data set could not be fetched or checked; the message names the file and the cause."""


class DataMissing(DataError):
    """A data file a command needs is not in the data directory."""


def missing_line(path: Path) -> str:
    """The one line every command that finds no data prints: what is missing and the command
    that gets it."""
    return (
        f"no data at {path}: run `{FETCH_COMMAND}` (or `make data`; `--from DIR` takes a copy) "
        f"or set TRIBUNAL_DATA_DIR"
    )


def require(*paths: str, root: Path | None = None) -> Path:
    """The data directory, once every file of ``paths`` (relative to it) is there.

    Raises:
        DataMissing: a file is not there; its message is :func:`missing_line`.
    """
    base = data_dir() if root is None else root
    for relative in paths:
        if not (base / relative).is_file():
            raise DataMissing(missing_line(base / relative))
    return base


def content_sha256(path: Path) -> str:
    """sha256 of a file's content: of its bytes, or of what a ``.gz`` file decompresses to."""
    digest = hashlib.sha256()
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


class Progress(Protocol):
    """What a fetch reports its bytes to (a rich progress bar in the CLI)."""

    def start(self, name: str, total_bytes: int | None, done_bytes: int) -> None: ...

    def advance(self, name: str, nbytes: int) -> None: ...


def _download(client: httpx.Client, url: str, part: Path, name: str, progress: Progress) -> None:
    """Append ``url``'s bytes to ``part``, from where an earlier try stopped (a range request;
    a server that answers the whole file instead makes it start over)."""
    have = part.stat().st_size if part.exists() else 0
    headers = {"Range": f"bytes={have}-"} if have else {}
    with client.stream("GET", url, headers=headers) as reply:
        if reply.status_code == 416 and have:  # the part is already whole
            progress.start(name, have, have)
            return
        if reply.status_code not in (200, 206):
            raise DataError(f"{name}: {url} answered HTTP {reply.status_code}")
        if reply.status_code == 200:
            have = 0
        length = reply.headers.get("content-length")
        progress.start(name, have + int(length) if length else None, have)
        with part.open("ab" if have else "wb") as out:
            for chunk in reply.iter_bytes(CHUNK_BYTES):
                out.write(chunk)
                progress.advance(name, len(chunk))


def _convert(part: Path, dataset: Dataset, target: Path) -> None:
    """Write the source's bytes in ``part`` as the file ``target`` (see :class:`SourceForm`);
    a ``.gz`` file whose source is not compressed is compressed (no name or time in it)."""
    if dataset.form is SourceForm.GUNZIP:
        data = gzip.decompress(part.read_bytes())
    elif dataset.form is SourceForm.JSON_LIST:
        rows = json.loads(part.read_bytes())
        data = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()
    else:
        data = part.read_bytes()
    if target.suffix == ".gz" and not data.startswith(b"\x1f\x8b"):
        data = gzip.compress(data, mtime=0)
    target.write_bytes(data)


def _sha256_or_why(path: Path) -> str:
    """:func:`content_sha256`, or why the file cannot be read (a truncated or corrupted
    ``.gz``)."""
    try:
        return content_sha256(path)
    except (OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError
        return f"unreadable ({exc})"


def _check(candidate: Path, dataset: Dataset, where: str) -> None:
    """Refuse (remove, then raise) a file whose content is not the catalogue's."""
    got = _sha256_or_why(candidate)
    if got != dataset.sha256:
        candidate.unlink(missing_ok=True)
        raise DataError(
            f"{dataset.path}: the file from {where} does not match its checksum (sha256 "
            f"{dataset.sha256}, got {got}); removed, run the command again"
        )


def fetch_one(
    dataset: Dataset,
    root: Path,
    client: httpx.Client,
    progress: Progress,
    mirror: str | None = None,
    github: str = GITHUB_RAW,
) -> str:
    """Put one file into ``root`` unless it is there with its checksum; returns what was done
    (``kept``, ``fetched``, ``copied``).

    Args:
        mirror: a folder or an http(s) URL laid out as the data directory; ``None`` for the
            file's public source.
        github: where GitHub's raw files are served (see :data:`GITHUB_RAW`).

    Raises:
        DataError: the source could not be read, or its file did not match its checksum.
    """
    target = root / dataset.path
    if target.is_file() and _sha256_or_why(target) == dataset.sha256:
        return "kept"
    target.parent.mkdir(parents=True, exist_ok=True)
    incoming = target.with_name(f".new-{target.name}")  # the same suffix: .gz reads as gzip
    if mirror is not None and not mirror.startswith(("http://", "https://")):
        source = Path(mirror) / dataset.path
        if not source.is_file():
            raise DataError(f"{dataset.path}: not in {mirror}")
        shutil.copyfile(source, incoming)
        _check(incoming, dataset, str(source))
        incoming.replace(target)
        return "copied"
    if mirror is not None:
        url, as_is = f"{mirror.rstrip('/')}/{dataset.path}", True
    elif (source_url := dataset.url(github)) is not None:
        url, as_is = source_url, False
    else:
        raise DataError(f"{dataset.path}: derived, not downloadable; take it from a copy (--from)")
    part = target.with_name(target.name + ".part")
    try:
        _download(client, url, part, dataset.path, progress)
    except httpx.HTTPError as exc:
        raise DataError(
            f"{dataset.path}: {url} cannot be read ({exc}); run again to resume, "
            f"or take a copy with --from"
        ) from exc
    if as_is:
        part.replace(incoming)
    else:
        try:
            _convert(part, dataset, incoming)
        except (OSError, EOFError, ValueError) as exc:  # not gzip, not a JSON list
            incoming.unlink(missing_ok=True)
            raise DataError(f"{dataset.path}: {url} is not {dataset.form.value}: {exc}") from exc
        finally:
            part.unlink(missing_ok=True)
    _check(incoming, dataset, url)
    incoming.replace(target)
    return "fetched"


def fetch(
    root: Path,
    progress: Progress,
    mirror: str | None = None,
    datasets: Iterable[Dataset] = DATASETS,
    client: httpx.Client | None = None,
    github: str = GITHUB_RAW,
) -> tuple[dict[str, str], list[str]]:
    """Fetch every data set into ``root`` (see :func:`fetch_one`); one that fails does not stop
    the others.

    Returns:
        what was done per path, and one line per file that failed.
    """
    own = client is None
    http = httpx.Client(timeout=60, follow_redirects=True) if client is None else client
    done: dict[str, str] = {}
    failed: list[str] = []
    try:
        for dataset in datasets:
            try:
                done[dataset.path] = fetch_one(dataset, root, http, progress, mirror, github)
            except DataError as exc:
                failed.append(str(exc))
    finally:
        if own:
            http.close()
    return done, failed
