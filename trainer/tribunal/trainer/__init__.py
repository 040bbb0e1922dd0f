"""The GRPO trainer (DeepSpeed ZeRO-3); rewards reach it only over HTTP."""
