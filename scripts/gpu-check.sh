#!/usr/bin/env bash
# GPU readiness on a machine with an NVIDIA GPU, in one JSON summary:
#   1. the environment check (turnwise doctor --json)
#   2. logits on CUDA and WebGPU against the CPU's, for a model at the Qwen2.5-0.5B shape
#   3. turnwise bench model --provider cuda, then webgpu (PyTorch off: its GPU build is not Debian's)
#   4. a two-iteration training run on the demo workspace with that model on CUDA (needs Docker)
# Each step's output and log go to OUT_DIR; the summary is OUT_DIR/summary.json (and stdout).
# Usage: scripts/gpu-check.sh [OUT_DIR]    (run from the repository root after `npm run build`)
# The CUDA provider needs CUDA 12 + cuDNN 9 and onnxruntime-node's CUDA libraries:
#   npm rebuild onnxruntime-node --onnxruntime-node-install=cuda12
set -uo pipefail
OUT="${1:-gpu-check-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
SHAPE=qwen2.5-0.5b
fail() { echo "gpu-check: $*" >&2; exit 1; }

command -v nvidia-smi >/dev/null 2>&1 || fail "no nvidia-smi: this machine has no NVIDIA driver (the check needs an NVIDIA GPU)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1 || fail "nvidia-smi found no GPU: $(cat "$OUT/gpu.txt")"
[ -f dist/cli.js ] || fail "dist/cli.js is missing: run npm run build first"

step() { # name, then the command; records its exit code and wall time
  local name="$1"; shift
  local t0=$(date +%s)
  "$@" > "$OUT/$name.json" 2> "$OUT/$name.log"
  local rc=$?
  echo "{\"step\":\"$name\",\"rc\":$rc,\"seconds\":$(( $(date +%s) - t0 ))}" >> "$OUT/steps.jsonl"
  echo "gpu-check: $name exited $rc ($OUT/$name.log)" >&2
}

: > "$OUT/steps.jsonl"
step doctor node dist/cli.js doctor --json
step logits npx tsx scripts/gpu-check-model.ts --shape "$SHAPE" --out "$OUT/model" --providers cuda,webgpu
step bench-cuda node dist/cli.js bench model --shape "$SHAPE" --provider cuda --torch off --json
step bench-webgpu node dist/cli.js bench model --shape "$SHAPE" --provider webgpu --torch off --json
step train node dist/cli.js train --workspace examples/demo-python --model "$OUT/model" --iterations 2 --provider cuda --runs "$OUT/runs" --json

python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
def load(name):
    try:
        text = open(os.path.join(out, name + ".json")).read().strip()
        return json.loads(text.splitlines()[-1]) if text else None
    except (OSError, ValueError):
        return None
steps = [json.loads(l) for l in open(os.path.join(out, "steps.jsonl"))]
summary = {
    "schema": "turnwise/gpu-check@1",
    "gpu": open(os.path.join(out, "gpu.txt")).read().strip(),
    "steps": steps,
    "doctor": load("doctor"),
    "logits": load("logits"),
    "bench_cuda": load("bench-cuda"),
    "bench_webgpu": load("bench-webgpu"),
    "train_ok": next(s["rc"] for s in steps if s["step"] == "train") == 0,
    "ok": all(s["rc"] == 0 for s in steps),
}
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=2)
print(json.dumps(summary, indent=2))
sys.exit(0 if summary["ok"] else 1)
PY
