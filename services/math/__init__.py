"""Math verifier library: final-answer extraction and Math-Verify equivalence.

Pure, synchronous and CPU-bound: ``verify_answer`` is meant to run in a killable worker
process (``services.core.pool``); it never sets a timeout of its own.
"""

from services.math.config import MathConfig
from services.math.extract import extract_answer
from services.math.verify import MathScore, verify_answer

__all__ = ["MathConfig", "MathScore", "extract_answer", "verify_answer"]
