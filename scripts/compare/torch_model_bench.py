#!/usr/bin/python3
"""The work of `turnwise bench model`, in PyTorch, on the same generated model folder.

Reads the folder's config.json and BF16 safetensors (no transformers or safetensors package
needed), widens the weights to float32 (what both sides compute in on a CPU) and measures, each
with the peak RSS of its phase:
  load: folder to the first sampled token;
  prefill: `prefill` tokens in one forward pass, the last position's logits sampled;
  decode: `decode_steps` tokens sampled at temperature 1 after `context` tokens of context, through
    a preallocated KV cache (keys and values written in place), at batch 1 and `decode_batch`
    (the batch's cache copied from the batch-1 context, as forked sequences are), each figure the
    median of `decode_repeats` timed calls;
  LoRA training: r `lora_r`, alpha `lora_alpha`, on every linear layer of every block, rows of
    `train_seq` tokens: token-level clipped policy-gradient loss, global-norm clipping at 1, AdamW;
    the mean of `train_steps` steps after an untimed first one.
Grouped-query attention groups the query heads under their key-value head (no repeated K/V),
eager softmax attention (PyTorch 1.13 has no fused kernel). Prints one JSON object; progress lines
go to stderr as "progress: ...".

    /usr/bin/python3 scripts/compare/torch_model_bench.py '{"dir": "...", "threads": 2, ...}'

Run by `turnwise bench model` with OPENBLAS_NUM_THREADS=<threads>. Debian's PyTorch calls
OpenBLAS for matrix products, so it keeps one PyTorch thread (the two pools otherwise fight over
the cores); a PyTorch on MKL (the x86-64 wheels) gets <threads> threads of its own.
"""
import json
import math
import os
import re
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

A = json.loads(sys.argv[1])
torch.manual_seed(A.get("seed", 0))
# Debian's PyTorch (BLAS_INFO=generic) hands its matrix products to the system's BLAS, OpenBLAS,
# whose own threads (OPENBLAS_NUM_THREADS) do the work: PyTorch's pool stays at one thread. The
# x86-64 wheels (BLAS_INFO=mkl) run MKL on PyTorch's own pool, which then gets the threads.
OWN_POOL = "BLAS_INFO=mkl" in torch.__config__.show()
THREADS = int(A.get("threads") or os.environ.get("OPENBLAS_NUM_THREADS", "1"))
torch.set_num_threads(THREADS if OWN_POOL else 1)
DIR = A["dir"]


def progress(msg):
    print("progress: " + msg, file=sys.stderr, flush=True)


def reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def peak_mb():
    try:
        with open("/proc/self/status") as f:
            m = re.search(r"VmHWM:\s+(\d+) kB", f.read())
            return round(int(m.group(1)) / 1024)
    except OSError:
        import resource
        return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def read_safetensors(path):
    out = {}
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        base = 8 + n
        for name, info in header.items():
            if name == "__metadata__":
                continue
            a, b = info["data_offsets"]
            f.seek(base + a)
            raw = f.read(b - a)
            shape = info["shape"]
            if info["dtype"] == "BF16":
                bits = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
                arr = bits.view(np.float32)
            elif info["dtype"] == "F16":
                arr = np.frombuffer(raw, dtype=np.float16).astype(np.float32)
            elif info["dtype"] == "F32":
                arr = np.frombuffer(raw, dtype=np.float32).copy()
            else:
                raise SystemExit(f"{path}: tensor {name} has dtype {info['dtype']}")
            out[name] = torch.from_numpy(arr.reshape(shape))
    return out


def load_folder(d):
    cfg = json.load(open(os.path.join(d, "config.json")))
    index = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) else ["model.safetensors"]
    w = {}
    for f in files:
        w.update(read_safetensors(os.path.join(d, f)))
    return cfg, w


def inv_freq(cfg, d):
    base = [1 / cfg["rope_theta"] ** (2 * i / d) for i in range(d // 2)]
    s = cfg.get("rope_scaling")
    if not s:
        return torch.tensor(base)
    low = s["original_max_position_embeddings"] / s["low_freq_factor"]
    high = s["original_max_position_embeddings"] / s["high_freq_factor"]
    out = []
    for f in base:
        wl = 2 * math.pi / f
        if wl < high:
            out.append(f)
        elif wl > low:
            out.append(f / s["factor"])
        else:
            sm = (s["original_max_position_embeddings"] / wl - s["low_freq_factor"]) / (s["high_freq_factor"] - s["low_freq_factor"])
            out.append((1 - sm) * f / s["factor"] + sm * f)
    return torch.tensor(out)


class Model:
    """Qwen2 / Llama decoder over a dict of float32 weights (Hugging Face names); Linear weights
    are kept transposed ([in, out]) so every projection is one matmul, as in the ONNX graphs."""

    LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

    def __init__(self, cfg, w):
        self.cfg = cfg
        self.H = cfg["hidden_size"]
        self.nh = cfg["num_attention_heads"]
        self.nkv = cfg["num_key_value_heads"]
        self.d = cfg.get("head_dim") or self.H // self.nh
        self.L = cfg["num_hidden_layers"]
        self.eps = cfg["rms_norm_eps"]
        self.inv = inv_freq(cfg, self.d)
        self.embed = w["model.embed_tokens.weight"]
        self.head = self.embed if cfg.get("tie_word_embeddings") else w["lm_head.weight"]
        self.norm = w["model.norm.weight"]
        self.layers = []
        for l in range(self.L):
            p = f"model.layers.{l}."
            layer = {"in_norm": w[p + "input_layernorm.weight"], "post_norm": w[p + "post_attention_layernorm.weight"]}
            for m in self.LINEARS:
                part = "self_attn" if m in ("q_proj", "k_proj", "v_proj", "o_proj") else "mlp"
                layer[m] = w[f"{p}{part}.{m}.weight"].t().contiguous()
                b = w.get(f"{p}{part}.{m}.bias")
                if b is not None:
                    layer[m + ".bias"] = b
            self.layers.append(layer)
        self.lora = None

    def rms(self, x, wt):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * wt

    def proj(self, x, layer, l, m):
        y = x @ layer[m]
        b = layer.get(m + ".bias")
        if b is not None:
            y = y + b
        if self.lora is not None:
            a, bb = self.lora[(l, m)]
            y = y + (x @ a) @ bb * self.lora_scale
        return y

    def rope(self, x, cos, sin):
        h = self.d // 2
        x1, x2 = x[..., :h], x[..., h:]
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin

    def forward(self, ids, pos, cache=None, filled=0, last_only=False):
        """ids, pos [B, T]. cache: per layer (K [B, nkv, C, d], V [B, nkv, C, d]), written at
        filled..filled+T; attention over slots 0..filled+T (causal within the new tokens)."""
        B, T = ids.shape
        g = self.nh // self.nkv
        x = self.embed[ids]
        ang = pos.to(torch.float32)[..., None] * self.inv
        ang = torch.cat((ang, ang), dim=-1)
        cos, sin = ang.cos()[:, None], ang.sin()[:, None]
        S = filled + T
        causal = torch.full((T, S), float("-inf")).triu(filled + 1)
        for l, layer in enumerate(self.layers):
            xn = self.rms(x, layer["in_norm"])
            q = self.proj(xn, layer, l, "q_proj").view(B, T, self.nh, self.d).transpose(1, 2)
            k = self.proj(xn, layer, l, "k_proj").view(B, T, self.nkv, self.d).transpose(1, 2)
            v = self.proj(xn, layer, l, "v_proj").view(B, T, self.nkv, self.d).transpose(1, 2)
            q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
            if cache is not None:
                K, V = cache[l]
                K[:, :, filled:S] = k
                V[:, :, filled:S] = v
                k, v = K[:, :, :S], V[:, :, :S]
            qg = q.reshape(B, self.nkv, g, T, self.d)
            s = (qg @ k.unsqueeze(2).transpose(-1, -2)) / math.sqrt(self.d) + causal
            ctx = torch.softmax(s, dim=-1) @ v.unsqueeze(2)
            ctx = ctx.reshape(B, self.nh, T, self.d).transpose(1, 2).reshape(B, T, self.nh * self.d)
            x = x + self.proj(ctx, layer, l, "o_proj")
            xn = self.rms(x, layer["post_norm"])
            gate = self.proj(xn, layer, l, "gate_proj")
            x = x + self.proj(F.silu(gate) * self.proj(xn, layer, l, "up_proj"), layer, l, "down_proj")
        if last_only:
            x = x[:, -1:]
        return self.rms(x, self.norm) @ self.head.t()

    def new_cache(self, B, C):
        return [(torch.zeros(B, self.nkv, C, self.d), torch.zeros(B, self.nkv, C, self.d)) for _ in range(self.L)]


def sample(logits):
    """One token per row at temperature 1 from [B, V] logits, with its log-prob."""
    lp = torch.log_softmax(logits.double(), dim=-1)
    ids = torch.multinomial(lp.exp(), 1)
    return ids, lp.gather(-1, ids)


def rand_ids(*shape):
    return torch.randint(0, 256, shape)


res = {"torch_version": torch.__version__, "threads": THREADS, "blas": "torch" if OWN_POOL else "openblas"}
with torch.no_grad():
    progress("loading the folder")
    reset_peak()
    t0 = time.perf_counter()
    cfg, w = load_folder(DIR)
    model = Model(cfg, w)
    del w
    ids = rand_ids(1, 4)
    sample(model.forward(ids, torch.arange(4)[None], last_only=True)[:, -1])
    res["load_s"] = round(time.perf_counter() - t0, 2)
    res["load_peak_rss_mb"] = peak_mb()

    P, Cx, N, NB = A["prefill"], A["context"], A["decode_steps"], A["decode_batch"]
    progress(f"prefill of {P} tokens")
    reset_peak()
    cap = max(P, Cx) + N + 4
    cache = model.new_cache(1, cap)
    t = time.perf_counter()
    logits = model.forward(rand_ids(1, P), torch.arange(P)[None], cache, 0, last_only=True)
    sample(logits[:, -1])
    res["prefill_tokens_per_s"] = round(P / (time.perf_counter() - t), 1)
    res["prefill_peak_rss_mb"] = peak_mb()

    progress(f"decode: {N} steps at {Cx} tokens of context, batch 1 and {NB}")
    reset_peak()
    if Cx > P:  # extend the context to Cx tokens
        model.forward(rand_ids(1, Cx - P), torch.arange(P, Cx)[None], cache, P, last_only=True)

    def decode(rows, steps):
        c = [(K.expand(rows, -1, -1, -1).clone(), V.expand(rows, -1, -1, -1).clone()) for K, V in cache]
        tok = rand_ids(rows, 1)
        t = time.perf_counter()
        for i in range(steps):
            logits = model.forward(tok, torch.full((rows, 1), Cx + i), c, Cx + i)
            tok, _ = sample(logits[:, -1])
        return time.perf_counter() - t

    # the median of `decode_repeats` timed calls, as the Turnwise side measures
    reps = A.get("decode_repeats", 1)

    def timed(rows):
        return statistics.median([decode(rows, N) for _ in range(reps)])

    decode(1, 2)
    res["decode_tokens_per_s_b1"] = round(N / timed(1), 2)
    decode(NB, 2)
    res["decode_tokens_per_s_batch"] = round(NB * N / timed(NB), 2)
    res["decode_peak_rss_mb"] = peak_mb()
    del cache

progress(f"LoRA training step on {A['train_rows']} x {A['train_seq']} tokens")
r, alpha = A["lora_r"], A["lora_alpha"]
model.lora_scale = alpha / r
model.lora = {}
params = []
for l, layer in enumerate(model.layers):
    for m in Model.LINEARS:
        i, o = layer[m].shape
        a = (torch.rand(i, r) * 2 - 1) * (1 / math.sqrt(i))  # PEFT: kaiming-uniform A, zero B
        b = torch.zeros(r, o)
        a.requires_grad_(True)
        b.requires_grad_(True)
        model.lora[(l, m)] = (a, b)
        params += [a, b]
opt = torch.optim.AdamW(params, lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
R, T = A["train_rows"], A["train_seq"]
ids = rand_ids(R, T)
pos = torch.arange(T)[None].expand(R, -1)
mask = (torch.arange(T) >= T // 2).float()[None].expand(R, -1)[:, 1:]
adv = torch.rand(R, T - 1) * 2 - 1
old = torch.full((R, T - 1), -math.log(cfg["vocab_size"]))


def train_step():
    t = time.perf_counter()
    logits = model.forward(ids, pos)[:, :-1]
    logp = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:, None])[..., 0]
    ratio = torch.exp(logp - old)
    pg = -torch.min(ratio * adv, torch.clamp(ratio, 0.8, 1.2) * adv)
    loss = (pg * mask).sum() / mask.sum()
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    return time.perf_counter() - t


reset_peak()
train_step()
times = [train_step() for _ in range(A["train_steps"])]
step_s = sum(times) / len(times)
res["train_step_s"] = round(step_s, 2)
res["lora_train_tokens_per_s"] = round(R * T / step_s, 1)
res["train_step_peak_rss_mb"] = peak_mb()

src = np.ones(2**25)  # 256 MiB, numpy's single-threaded copy
dst = np.empty_like(src)
copies = []
for _ in range(5):
    t0 = time.perf_counter()
    np.copyto(dst, src)
    copies.append(time.perf_counter() - t0)
res["memory_bandwidth_gbs"] = round(2 * src.nbytes / min(copies) / 1e9, 2)
print(json.dumps(res))
