"""Math-Verify's "Timeout is disabled" warning is not shown: its timeouts are off on purpose
(the pool's hard deadline replaces them), so on every start it was noise (issue 7)."""

from __future__ import annotations

import logging

import math_verify.grader
import math_verify.parser
import pytest

from tribunal.math import verify  # noqa: F401  (importing it installs the filter)


def test_the_timeout_disabled_warning_is_filtered(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(math_verify.parser, "TIMEOUT_WARNING_SHOWN", False)
    monkeypatch.setattr(math_verify.grader, "TIMEOUT_WARNING_SHOWN", False)
    with caplog.at_level(logging.WARNING):
        gold = math_verify.parse("\\boxed{1}", parsing_timeout=None)
        assert math_verify.verify(gold, gold, timeout_seconds=None)
    assert "Timeout is disabled" not in caplog.text
