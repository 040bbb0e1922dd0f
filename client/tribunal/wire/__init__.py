"""The wire models: what a client sends to Tribunal's services and what it gets back, importable
with pydantic alone.

``envelope`` (the batch, the item result, the job), ``errors`` (the error classes a result
carries), one module per verifier's payload (``math``, ``code``, ``judge``, ``citation``) and the
gateway's (``gateway``), and ``ports`` (where each shipped service listens by default).
"""
