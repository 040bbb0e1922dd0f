"""Old log-probabilities of HF ``generate`` rollouts: each decoding step's logits kept by
``generate`` (``output_logits``, the trainer before) against one forward pass after sampling
(``HFBackend.generate`` now), on the same sampled tokens. Prints one JSON object: seconds per
call of each (median of ``--rounds``), the peak GPU memory of each (on a GPU), and the
largest difference between the two sets of log-probabilities, and writes it (to
``bench/results/NAME.json`` for the docs with ``--record NAME``).

    python bench/hf_logprobs.py                      # a random Qwen3, Qwen's vocabulary, CPU
    python bench/hf_logprobs.py --hidden 896 --layers 24 --n 8 --tokens 256   # on a GPU
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=151936)
    parser.add_argument("--n", type=int, default=8, help="completions per prompt")
    parser.add_argument("--tokens", type=int, default=128, help="new tokens per completion")
    parser.add_argument("--rounds", type=int, default=3)
    results.add_record_argument(parser)
    args = parser.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tribunal.testing.tiny_model import TinyModelConfig, build_tiny_model
    from tribunal.trainer.rollout import HFBackend, SamplingConfig

    device = "cuda" if torch.cuda.is_available() else "cpu"
    head_dim = 16 if args.hidden <= 128 else 64
    shape = TinyModelConfig(
        hidden_size=args.hidden,
        num_layers=args.layers,
        num_heads=args.hidden // head_dim,
        num_kv_heads=2,
        head_dim=head_dim,
        intermediate_size=args.hidden * 4,
        model_vocab_size=args.vocab,
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = build_tiny_model(shape, ["How many eggs does Janet sell?"] * 8, Path(tmp), 0)
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path).to(device).eval()
    # No end of sequence: every completion runs its full length in both ways.
    model.generation_config.eos_token_id = None
    backend = HFBackend(model, tokenizer, SamplingConfig(temperature=1.0))
    backend.tokenizer.eos_token_id = None
    prompt = tokenizer.encode("<|im_start|>user\nHow many eggs?<|im_end|>\n<|im_start|>assistant\n")
    ids = torch.tensor([prompt] * args.n, device=device)

    def per_step(seed: int) -> Any:
        torch.manual_seed(seed)
        with torch.no_grad():
            out = model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                do_sample=True,
                top_k=0,
                max_new_tokens=args.tokens,
                min_new_tokens=args.tokens,
                pad_token_id=tokenizer.pad_token_id,
                return_dict_in_generate=True,
                output_logits=True,
            )
            new = out.sequences[:, ids.shape[1] :]
            logits = torch.stack(out.logits, dim=1).float()
            return torch.log_softmax(logits, -1).gather(-1, new.unsqueeze(-1)).squeeze(-1)

    def one_pass(seed: int) -> Any:
        return backend.generate(prompt, args.n, args.tokens, seed)

    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    result: dict[str, Any] = {"device": name, **vars(args)}
    outputs = {}
    for name, run in (("per_step", per_step), ("one_pass", one_pass)):
        run(0)  # warm-up
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        times = []
        for seed in range(1, args.rounds + 1):
            start = time.perf_counter()
            outputs[name] = run(seed)
            times.append(time.perf_counter() - start)
        result[f"{name}_s"] = round(statistics.median(times), 4)
        if device == "cuda":
            result[f"{name}_peak_gpu_mib"] = round(torch.cuda.max_memory_allocated() / 2**20)
    steps = outputs["per_step"]
    result["max_abs_logprob_diff"] = max(
        abs(a - b)
        for i, generated in enumerate(outputs["one_pass"])
        for a, b in zip(generated.logprobs, steps[i].tolist(), strict=False)
    )
    result["speed_up"] = round(result["per_step_s"] / result["one_pass_s"], 2)
    print(json.dumps(result))
    memory = (
        f"{result['per_step_peak_gpu_mib']:,} / {result['one_pass_peak_gpu_mib']:,} MiB"
        if device == "cuda"
        else ""
    )
    row = [
        result["device"],
        f"hidden {args.hidden}, {args.layers} layers, vocabulary {args.vocab:,}",
        f"{args.n} x {args.tokens}",
        f"{result['per_step_s']:.2f}",
        f"{result['one_pass_s']:.2f}",
        f"{result['speed_up']:.1f}x",
        f"{result['max_abs_logprob_diff']:.1e}",
        memory,
    ]
    columns = [
        "device",
        "random Qwen3",
        "completions x tokens",
        "every step's logits kept, s / call",
        "one pass after sampling, s / call",
        "speed-up",
        "largest log-probability difference",
        "peak GPU memory (kept / one pass)",
    ]
    results.record(
        args.record or "hf_logprobs",
        result,
        [results.table(columns, [row])],
        asked=args.record is not None,
    )


if __name__ == "__main__":
    main()
