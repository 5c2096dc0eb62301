#!/usr/bin/env bash
# The GPU check, in one JSON summary (OUT_DIR/summary.json, also printed):
#   env      the GPU (nvidia-smi), the CUDA, cuDNN and ONNX Runtime CUDA libraries on the machine,
#            the Vulkan drivers installed
#   doctor   turnwise doctor --json (providers, the WebGPU adapter)
#   logits   a model at the bench shape on each GPU provider against the CPU: logits, greedy
#            tokens, and which nodes each provider would leave on the CPU
#   bench    turnwise bench model on the CPU (all cores) and on each GPU provider, same machine
#   loop     a short LoRA RL loop at that shape on scripted episodes, per GPU provider (no Docker)
#
# In a checkout:   scripts/gpu-check.sh --bundle DIR   builds DIR, a folder (< 60 MB) that runs
#                  with plain node on a machine with no npm packages and no network; then there:
#                  bash DIR/run.sh [OUT_DIR] [--shape S] [--providers cuda,webgpu] [--steps env,doctor,logits,bench,loop]
#                  scripts/gpu-check.sh [OUT_DIR] [options] builds the bundle into OUT_DIR/bundle and runs it.
# --no-gpu runs without an NVIDIA GPU (a software WebGPU adapter, for testing the check itself).
# The CUDA provider needs CUDA 12 + cuDNN 9 and onnxruntime-node's CUDA libraries beside its
# binding (npm rebuild onnxruntime-node --onnxruntime-node-install=cuda12, see docs/gpus.md).
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
fail() { echo "gpu-check: $*" >&2; exit 1; }

OUT="" SHAPE=qwen2.5-0.5b PROVIDERS=cuda,webgpu STEPS=env,doctor,logits,bench,loop NO_GPU=0 BUNDLE=""
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle) BUNDLE="$2"; shift 2 ;;
    --shape) SHAPE="$2"; shift 2 ;;
    --providers) PROVIDERS="$2"; shift 2 ;;
    --steps) STEPS="$2"; shift 2 ;;
    --no-gpu) NO_GPU=1; shift ;;
    -*) fail "unknown option $1" ;;
    *) OUT="$1"; shift ;;
  esac
done

if [ ! -f "$HERE/cli.js" ]; then
  # In a checkout: build the bundle (and run it, unless only the bundle was asked for).
  command -v npm >/dev/null 2>&1 || fail "npm is needed to build the bundle"
  if [ -n "$BUNDLE" ]; then exec node "$HERE/gpu-bundle.mjs" "$BUNDLE"; fi
  OUT="${OUT:-gpu-check-$(date +%Y%m%d-%H%M%S)}"
  node "$HERE/gpu-bundle.mjs" "$OUT/bundle" || fail "the bundle could not be built"
  args=(--shape "$SHAPE" --providers "$PROVIDERS" --steps "$STEPS")
  [ "$NO_GPU" = 1 ] && args+=(--no-gpu)
  exec bash "$OUT/bundle/run.sh" "$OUT" "${args[@]}"
fi

OUT="${OUT:-gpu-check-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
command -v node >/dev/null 2>&1 || fail "node is needed (any version from 20)"
if [ "$NO_GPU" = 0 ]; then
  command -v nvidia-smi >/dev/null 2>&1 || fail "no nvidia-smi: this machine has no NVIDIA driver (run with --no-gpu to check without one)"
fi
has() { case ",$STEPS," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
: > "$OUT/steps.jsonl"
step() { # name, then the command: its stdout to NAME.json, stderr to NAME.log, exit code and time to steps.jsonl
  local name="$1"; shift
  local t0; t0=$(date +%s)
  "$@" > "$OUT/$name.json" 2> "$OUT/$name.log"
  local rc=$?
  echo "{\"step\":\"$name\",\"rc\":$rc,\"seconds\":$(( $(date +%s) - t0 ))}" >> "$OUT/steps.jsonl"
  echo "gpu-check: $name exited $rc after $(( $(date +%s) - t0 )) s ($OUT/$name.log)" >&2
}

if has env; then
  {
    echo "## nvidia-smi"; nvidia-smi 2>&1 || echo "(none)"
    echo "## nvidia-smi --query-gpu"; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 || echo "(none)"
    echo "## ONNX Runtime CUDA provider libraries"; timeout 120 find / -xdev \( -name 'libonnxruntime_providers_cuda.so*' -o -name 'libonnxruntime_providers_shared.so*' \) 2>/dev/null || true
    echo "## CUDA"; ls -d /usr/local/cuda* 2>/dev/null; cat /usr/local/cuda/version.json 2>/dev/null | head -20
    echo "## CUDA and cuDNN libraries (ldconfig)"; ldconfig -p 2>/dev/null | grep -E 'libcudart|libcudnn|libcublas' || echo "(none)"
    echo "## Vulkan drivers"; ls /usr/share/vulkan/icd.d /etc/vulkan/icd.d 2>/dev/null
    echo "## node"; node --version
  } > "$OUT/env.txt" 2>&1
fi
has doctor && step doctor node "$HERE/cli.js" doctor --json
IFS=',' read -r -a GPUS <<< "$PROVIDERS"
has logits && step logits node "$HERE/gpu-check-model.js" --shape "$SHAPE" --out "$OUT/model" --providers "$PROVIDERS"
if has bench; then
  # The CPU at float32 only; each GPU provider with its float16 decode beside float32 (bench model's default there).
  step bench-cpu node "$HERE/cli.js" bench model --shape "$SHAPE" --provider cpu --torch off --precisions none --json
  for p in "${GPUS[@]}"; do step "bench-$p" node "$HERE/cli.js" bench model --shape "$SHAPE" --provider "$p" --torch off --json; done
fi
if has loop; then
  for p in "${GPUS[@]}"; do step "loop-$p" node "$HERE/gpu-check-loop.js" --shape "$SHAPE" --provider "$p"; done
fi

node - "$OUT" <<'JS'
const fs = require('fs');
const path = require('path');
const out = process.argv[2];
const read = (f) => { try { return fs.readFileSync(path.join(out, f), 'utf8'); } catch { return null; } };
const json = (name) => {
  const t = (read(`${name}.json`) || '').trim();
  for (const text of [t, t.split('\n').pop()]) {
    try { return JSON.parse(text); } catch { /* not this form */ }
  }
  return null;
};
const steps = (read('steps.jsonl') || '').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
const summary = { schema: 'turnwise/gpu-check@2', date: new Date().toISOString(), env: read('env.txt'), steps };
for (const s of steps) summary[s.step.replace(/-/g, '_')] = json(s.step);
// The doctor reports (a GPU machine may have no Docker); every other step must succeed.
summary.ok = steps.every((s) => s.rc === 0 || s.step === 'doctor');
fs.writeFileSync(path.join(out, 'summary.json'), JSON.stringify(summary, null, 2) + '\n');
process.stdout.write(JSON.stringify(summary, null, 2) + '\n');
process.exit(summary.ok ? 0 : 1);
JS
