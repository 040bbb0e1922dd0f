"""extract.py: the program of a raw completion is its last fenced block of the item's language.

Real completions: the ``response`` field of LeetCodeDataset v0.3.1 (newfacade/LeetCodeDataset,
``TRIBUNAL_DATA_DIR``/code; skipped when absent), the reference answers written by a model in
Markdown, and its ``completion`` field (bare code, no fence).
"""

from __future__ import annotations

from bench.code_data import DATA, jsonl
from tests.conftest import need_data
from tribunal.code.extract import extract_program


def _rows() -> dict[str, dict[str, str]]:
    need_data(DATA / "leetcodedataset_v0.3.1_test.jsonl.gz")
    return {row["task_id"]: row for row in jsonl("leetcodedataset_v0.3.1_test.jsonl.gz")}


def test_one_fenced_block_is_the_program() -> None:
    row = _rows()["shortest-distance-after-road-addition-queries-i"]
    found = extract_program(row["response"], "python")
    assert found.code is not None and found.reason is None
    assert found.code.startswith("from typing import List\nimport heapq\n\nclass Solution:")
    assert found.code.rstrip().endswith("return results")
    assert "Explanation" not in found.code and "```" not in found.code


def test_several_blocks_the_last_one_wins() -> None:
    # The model answers, says its overlap computation was wrong, and writes a corrected
    # version: the correction (the second block) is the program.
    response = _rows()["count-substrings-that-satisfy-k-constraint-i"]["response"]
    assert response.count("```python") == 2
    found = extract_program(response, "python")
    assert found.code is not None
    first, second = (part.split("```", 1)[0] for part in response.split("```python")[1:])
    assert found.code == second.lstrip("\n")
    assert found.code != first.lstrip("\n")
    assert "& count_valid_substrings_with_char_limit" in first
    assert "& count_valid_substrings_with_char_limit" not in found.code


def test_a_trailing_usage_example_is_taken_as_is() -> None:
    # Known issue (shared with open-instruct and verl): the last block is a usage example.
    response = _rows()["minimum-division-operations-to-make-array-non-decreasing"]["response"]
    found = extract_program(response, "python")
    assert found.code is not None and found.code.startswith("sol = Solution()\n")


def test_unfenced_code_has_no_program() -> None:
    bare = _rows()["shortest-distance-after-road-addition-queries-i"]["completion"]
    assert "```" not in bare and "class Solution" in bare
    found = extract_program(bare, "python")
    assert found.code is None
    assert found.reason == "no fenced ```python block in response"


def test_another_languages_block_is_never_run() -> None:
    response = _rows()["shortest-distance-after-road-addition-queries-i"]["response"]
    found = extract_program(response, "cpp")
    assert found.code is None
    assert found.reason == "no ```cpp block in response (found only: python)"


def test_labels_and_the_unlabelled_fallback() -> None:
    both = "```cpp\nint main() {}\n```\nor in Python:\n```py\nprint(1)\n```\n```c++\nint x;\n```"
    assert extract_program(both, "python").code == "print(1)\n"
    assert extract_program(both, "cpp").code == "int x;\n"
    plain = "Here:\n```\nprint(2)\n```\nand output\n```\n2\n```\n"
    assert extract_program(plain, "python").code == "2\n"  # the last unlabelled block
    mixed = "```python\nprint(3)\n```\n```\n3\n```"
    assert extract_program(mixed, "python").code == "print(3)\n"  # labelled beats unlabelled
    assert extract_program("```Python3 title\nx = 1\n```", "python").code == "x = 1\n"


def test_reasoning_and_unclosed_fences_are_skipped() -> None:
    thinking = "<think>\n```python\nprint('draft')\n```\n</think>\n```python\nprint('final')\n```"
    assert extract_program(thinking, "python").code == "print('final')\n"
    only_draft = "<think>\n```python\nprint('draft')\n```\n</think>\nThe answer is above."
    assert extract_program(only_draft, "python").code is None
    cut_off = "Solution:\n```python\ndef f(x):\n    return x +"
    assert extract_program(cut_off, "python").code is None
    longer = "````python\nprint('```')\n```\nstill code\n````"
    assert extract_program(longer, "python").code == "print('```')\n```\nstill code\n"
