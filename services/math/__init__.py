"""Math verifier library: final-answer extraction and Math-Verify equivalence.

Pure, synchronous and CPU-bound: ``verify_answer`` is meant to run in a killable worker
process (``tribunal.core.pool``); it never sets a timeout of its own.
"""

from tribunal.math.config import MathConfig
from tribunal.math.extract import extract_answer
from tribunal.math.verify import MathScore, verify_answer

__all__ = ["MathConfig", "MathScore", "extract_answer", "verify_answer"]
