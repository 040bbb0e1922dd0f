"""``tribunal data fetch`` against a real HTTP server on 127.0.0.1 (a thread of this process)
serving a few small files, as GitHub's raw files or as a mirror of the data directory: it
converts and checks each file, refuses a corrupted one, resumes a partial one; and the one
line (exit 2) of a command that finds no data."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import httpx
import pytest

from tribunal.cli.datasets import (
    DATASETS,
    Dataset,
    SourceForm,
    content_sha256,
    data_dir,
    fetch,
)

ROOT = Path(__file__).resolve().parents[2]
COMMIT = "0" * 40
ROWS = [{"id": n, "text": f"ligne {n} — é"} for n in range(50)]
JSONL = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in ROWS).encode()
SHA = hashlib.sha256(JSONL).hexdigest()


class Files(BaseHTTPRequestHandler):
    """GET of ``files[path]``, with ``Range: bytes=N-`` answered 206; every request logged."""

    files: ClassVar[dict[str, bytes]] = {}
    requests: ClassVar[list[tuple[str, str | None]]] = []

    def do_GET(self) -> None:
        self.requests.append((self.path, self.headers.get("Range")))
        body = self.files.get(self.path)
        if body is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        start = 0
        if self.headers.get("Range"):
            start = int(self.headers["Range"].removeprefix("bytes=").rstrip("-"))
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        self.wfile.write(body[start:])

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reads ``requests``."""


@pytest.fixture
def server() -> Iterator[tuple[str, type[Files]]]:
    handler = type("Handler", (Files,), {"files": {}, "requests": []})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    httpd.shutdown()
    httpd.server_close()
    thread.join()


class Recorder:
    """A progress sink that keeps what it was told."""

    def __init__(self) -> None:
        self.started: dict[str, tuple[int | None, int]] = {}
        self.bytes: dict[str, int] = {}

    def start(self, name: str, total_bytes: int | None, done_bytes: int) -> None:
        self.started[name] = (total_bytes, done_bytes)

    def advance(self, name: str, nbytes: int) -> None:
        self.bytes[name] = self.bytes.get(name, 0) + nbytes


def _source(path: str, form: SourceForm = SourceForm.AS_IS) -> Dataset:
    return Dataset(f"set/{path.split('/')[-1]}", SHA, "o/r", COMMIT, path, form)


def test_public_sources_are_converted_checked_and_kept(
    tmp_path: Path, server: tuple[str, type[Files]]
) -> None:
    base, handler = server
    handler.files = {
        f"/o/r/{COMMIT}/a.jsonl": JSONL,
        f"/o/r/{COMMIT}/b.jsonl.gz": gzip.compress(JSONL),
        f"/o/r/{COMMIT}/c.json": json.dumps(ROWS, indent=2).encode(),
    }
    datasets = [
        _source("a.jsonl"),
        Dataset("set/a.jsonl.gz", SHA, "o/r", COMMIT, "a.jsonl"),  # compressed on the way in
        Dataset("set/b.jsonl", SHA, "o/r", COMMIT, "b.jsonl.gz", SourceForm.GUNZIP),
        Dataset("set/c.jsonl", SHA, "o/r", COMMIT, "c.json", SourceForm.JSON_LIST),
    ]
    progress = Recorder()
    done, failed = fetch(tmp_path, progress, datasets=datasets, github=base)
    assert failed == [] and set(done.values()) == {"fetched"}
    assert (tmp_path / "set/a.jsonl").read_bytes() == JSONL
    assert gzip.decompress((tmp_path / "set/a.jsonl.gz").read_bytes()) == JSONL
    assert (tmp_path / "set/b.jsonl").read_bytes() == JSONL
    assert (tmp_path / "set/c.jsonl").read_bytes() == JSONL
    assert progress.bytes["set/b.jsonl"] == len(gzip.compress(JSONL))
    assert sorted(p.name for p in (tmp_path / "set").iterdir()) == [
        "a.jsonl",
        "a.jsonl.gz",
        "b.jsonl",
        "c.jsonl",
    ]
    # A second run finds every file with its checksum and downloads nothing.
    requests = len(handler.requests)
    done, failed = fetch(tmp_path, Recorder(), datasets=datasets, github=base)
    assert failed == [] and set(done.values()) == {"kept"}
    assert len(handler.requests) == requests


def test_a_corrupted_file_is_refused_and_the_others_still_come(
    tmp_path: Path, server: tuple[str, type[Files]]
) -> None:
    base, handler = server
    flipped = bytearray(JSONL)
    flipped[100] ^= 1  # one bit: a meaning-changing mutation of the same size
    handler.files = {"/set/good.jsonl": JSONL, "/set/bad.jsonl": bytes(flipped)}
    datasets = [Dataset("set/bad.jsonl", SHA), Dataset("set/good.jsonl", SHA)]
    done, failed = fetch(tmp_path, Recorder(), mirror=base, datasets=datasets)
    assert done == {"set/good.jsonl": "fetched"}
    assert len(failed) == 1 and failed[0].startswith("set/bad.jsonl: the file from ")
    assert f"does not match its checksum (sha256 {SHA}, got " in failed[0]
    # Nothing of the bad file is kept: no file, no part to resume from.
    assert sorted(p.name for p in (tmp_path / "set").iterdir()) == ["good.jsonl"]
    # A source that is not in its declared form (not gzip) is refused the same way.
    handler.files[f"/o/r/{COMMIT}/b.jsonl.gz"] = JSONL
    gunzip = Dataset("set/b.jsonl", SHA, "o/r", COMMIT, "b.jsonl.gz", SourceForm.GUNZIP)
    done, failed = fetch(tmp_path, Recorder(), datasets=[gunzip], github=base)
    assert done == {} and failed[0].startswith(f"set/b.jsonl: {base}/o/r/{COMMIT}/b.jsonl.gz is ")
    assert not (tmp_path / "set/b.jsonl.part").exists()
    # A local copy is checked the same way.
    (tmp_path / "copy/set").mkdir(parents=True)
    (tmp_path / "copy/set/bad.jsonl").write_bytes(bytes(flipped))
    done, failed = fetch(tmp_path / "out", Recorder(), str(tmp_path / "copy"), datasets[:1])
    assert done == {} and "does not match its checksum" in failed[0]
    assert not (tmp_path / "out/set/bad.jsonl").exists()


def test_a_partial_download_resumes_where_it_stopped(
    tmp_path: Path, server: tuple[str, type[Files]]
) -> None:
    base, handler = server
    handler.files = {f"/o/r/{COMMIT}/a.jsonl": JSONL}
    half = len(JSONL) // 2
    (tmp_path / "set").mkdir()
    (tmp_path / "set/a.jsonl.part").write_bytes(JSONL[:half])
    progress = Recorder()
    done, failed = fetch(tmp_path, progress, datasets=[_source("a.jsonl")], github=base)
    assert failed == [] and done == {"set/a.jsonl": "fetched"}
    assert handler.requests == [(f"/o/r/{COMMIT}/a.jsonl", f"bytes={half}-")]
    assert progress.started["set/a.jsonl"] == (len(JSONL), half)
    assert progress.bytes["set/a.jsonl"] == len(JSONL) - half
    assert (tmp_path / "set/a.jsonl").read_bytes() == JSONL
    assert not (tmp_path / "set/a.jsonl.part").exists()


def test_an_unreachable_source_fails_its_file_with_the_way_out(tmp_path: Path) -> None:
    with httpx.Client(timeout=5) as client:
        done, failed = fetch(
            tmp_path,
            Recorder(),
            datasets=[_source("a.jsonl"), Dataset("set/derived.jsonl", SHA)],
            client=client,
            github="http://127.0.0.1:9",  # the discard port: nothing listens
        )
    assert done == {}
    assert failed[0].startswith("set/a.jsonl: http://127.0.0.1:9/o/r/")
    assert failed[0].endswith("run again to resume, or take a copy with --from")
    assert failed[1] == "set/derived.jsonl: derived, not downloadable; take it from a copy (--from)"


def test_the_catalogue_checksums_are_those_of_the_shared_copy() -> None:
    # Each file the copy has (a machine's copy may predate a later entry: the Sky-T1 outputs).
    present = [d for d in DATASETS if (data_dir() / d.path).is_file()]
    if not present:
        pytest.skip(f"no shared copy under {data_dir()}")
    assert {d.path: content_sha256(data_dir() / d.path) for d in present} == {
        d.path: d.sha256 for d in present
    }


def _run(args: list[str], data: Path) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"TRIBUNAL_DATA_DIR": str(data)}
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("args", "missing"),
    [
        (["-m", "tribunal.cli", "data", "path", "math/gsm8k_test.jsonl"], "math/gsm8k_test.jsonl"),
        (["-m", "bench.training_data", "out", "--rows", "2"], "research/"),
    ],
)
def test_a_command_without_data_says_which_command_gets_it(
    tmp_path: Path, args: list[str], missing: str
) -> None:
    done = _run(args, tmp_path / "empty")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"no data at {tmp_path / 'empty'}/{missing}")
    assert "run `tribunal data fetch`" in lines[0]
    assert not (ROOT / "out").exists()


def test_fetch_from_a_copy_through_the_command(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    (copy / "research").mkdir(parents=True)
    (copy / "research/prometheus_rubrics_v8.json").write_text("[]")
    done = _run(["-m", "tribunal.cli", "data", "fetch", "--from", str(copy)], tmp_path / "d")
    # Every file but the one there is missing from the copy, and that one is corrupted.
    assert done.returncode == 1
    assert f"{tmp_path / 'd'}: nothing; {len(DATASETS)} failed" in done.stderr
    assert "research/prometheus_rubrics_v8.json: the file from " in done.stderr
    assert f"math/gsm8k_test.jsonl: not in {copy}" in done.stderr


@pytest.mark.slow
def test_train_without_its_dataset_says_which_commands_make_it(tmp_path: Path) -> None:
    config = ROOT / "trainer/tribunal/trainer/configs/stack_rloo_cpu.yaml"
    args = ["-m", "tribunal.cli", "train", "--config", str(config), "--output-dir", "out"]
    done = subprocess.run(
        [sys.executable, *args], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tribunal train: no dataset at runs/stack-data")
    assert "`tribunal data fetch`" in lines[0] and "bench.training_data" in lines[0]
    assert not (tmp_path / "out").exists()


def test_make_dev_and_make_data_run_what_the_readme_says() -> None:
    # `make -n -B`: every command of the target, printed, none run.
    def commands(*args: str) -> list[str]:
        # Run from `make test`, this make is a sub-make: without these it would print the
        # directory it enters and leaves, and take the outer make's flags.
        env = {k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MAKELEVEL", "MFLAGS"}}
        done = subprocess.run(
            ["make", "--no-print-directory", "-n", "-B", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    cuda = "https://download.pytorch.org/whl/cu128"
    dev = commands("dev", f"TORCH_INDEX={cuda}")
    torch = [line for line in dev if "requirements/torch.txt" in line]
    assert len(torch) == 1 and f"--no-deps --index-url {cuda} -r requirements/torch.txt" in torch[0]
    assert not any("pytest" in line for line in dev)
    assert dev[-1] == "PYTHON=python3 scripts/setup-tools.sh --browser"
    default = [line for line in commands("dev") if "requirements/torch.txt" in line]
    assert "--index-url https://download.pytorch.org/whl/cpu -r" in default[0]
    fetch = ".venv/bin/tribunal data fetch"
    assert commands("data", "DATA_FROM=../copy")[-1] == f"{fetch} --from ../copy"
    assert commands("data")[-1] == fetch


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq not installed")
def test_getting_started_gsm8k_lines_stop_without_data(tmp_path: Path) -> None:
    # The example's two first commands (the data, then jq), as the page writes them.
    page = (ROOT / "docs/getting-started.md").read_text()
    [block] = [b for b in re.findall(r"```sh\n(.*?)```", page, re.S) if "data path" in b]
    lines = block.splitlines()
    start = next(n for n, line in enumerate(lines) if "tribunal data path" in line)
    script = "\n".join(lines[start : start + 3]) + "\n"
    assert script.rstrip().endswith("> rollouts.jsonl"), script
    env = os.environ | {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    empty = env | {"TRIBUNAL_DATA_DIR": str(tmp_path / "none")}
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=empty, capture_output=True)
    assert done.returncode == 2 and b"run `tribunal data fetch`" in done.stderr
    assert not (tmp_path / "rollouts.jsonl").exists()  # no empty file for `tribunal score`
    (tmp_path / "d/math").mkdir(parents=True)
    rows = [{"question": "q", "answer": f"so\n#### {n}"} for n in range(3)]
    (tmp_path / "d/math/gsm8k_test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    env |= {"TRIBUNAL_DATA_DIR": str(tmp_path / "d")}
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True)
    assert done.returncode == 0, done.stderr
    items = [json.loads(line) for line in (tmp_path / "rollouts.jsonl").read_text().splitlines()]
    assert [(i["id"], i["ground_truth"]) for i in items] == [
        (f"gsm8k-{n + 1}", str(n)) for n in range(3)
    ]
