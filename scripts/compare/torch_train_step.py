#!/usr/bin/python3
"""The `turnwise bench train` training step, written in PyTorch, for a side-by-side comparison.

Same model (turnwise-tiny: Qwen2 layout, hidden 256, 4 layers, 4 query / 2 key-value heads,
SwiGLU 768, byte vocabulary 260, tied embeddings), same batch (4 x 128, random ids, loss on the
second half of each row), same loss (ppo-token with clip 0.2, entropy and approx-KL metrics),
global-norm clipping at 1 and AdamW. Prints one JSON object.

Not part of the test suite: it needs PyTorch (Debian: `apt-get install python3-torch`).
    /usr/bin/python3 scripts/compare/torch_train_step.py [--threads 2] [--batch 4] [--seq 128]

Debian 12's PyTorch 1.13.1 is built against the generic BLAS interface: with the reference BLAS
(the default) a step takes ~2.5 s on 2 cores; install libopenblas0-pthread, and run with
OPENBLAS_NUM_THREADS=<cores> --threads 1 (the BLAS threads and PyTorch's OpenMP threads otherwise
fight over the cores: ~600 ms instead of ~240 ms). A PyTorch wheel from PyPI (MKL, oneDNN) is the
fairer comparison where PyPI is reachable.
"""
import argparse
import json
import math
import os
import statistics
import time

import torch
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--threads", type=int, default=os.cpu_count())
p.add_argument("--batch", type=int, default=4)
p.add_argument("--seq", type=int, default=128)
p.add_argument("--steps", type=int, default=8)
p.add_argument("--compile", action="store_true", help="torch.compile the step (needs a C++ compiler)")
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(0)

H, I, L, NH, NKV, V, EPS, THETA = 256, 768, 4, 4, 2, 260, 1e-6, 10000.0
D = H // NH


class RMSNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(H))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * self.weight


def rotate_half(x):
    x1, x2 = x[..., : D // 2], x[..., D // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def attention(q, k, v):
    if hasattr(F, "scaled_dot_product_attention"):  # PyTorch >= 2.0: the fused kernel
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    T = q.shape[2]  # PyTorch 1.x (Debian bookworm): eager attention, as Hugging Face's "eager"
    causal = torch.full((T, T), float("-inf")).triu(1)
    return torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(D) + causal, -1) @ v


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm = RMSNorm()
        self.post_attention_layernorm = RMSNorm()
        self.q_proj = torch.nn.Linear(H, NH * D)
        self.k_proj = torch.nn.Linear(H, NKV * D)
        self.v_proj = torch.nn.Linear(H, NKV * D)
        self.o_proj = torch.nn.Linear(NH * D, H, bias=False)
        self.gate_proj = torch.nn.Linear(H, I, bias=False)
        self.up_proj = torch.nn.Linear(H, I, bias=False)
        self.down_proj = torch.nn.Linear(I, H, bias=False)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        h = self.input_layernorm(x)
        q = self.q_proj(h).view(B, T, NH, D).transpose(1, 2)
        k = self.k_proj(h).view(B, T, NKV, D).transpose(1, 2)
        v = self.v_proj(h).view(B, T, NKV, D).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(NH // NKV, dim=1)
        v = v.repeat_interleave(NH // NKV, dim=1)
        att = attention(q, k, v)
        x = x + self.o_proj(att.transpose(1, 2).reshape(B, T, H))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(V, H)
        self.layers = torch.nn.ModuleList([Layer() for _ in range(L)])
        self.norm = RMSNorm()

    def forward(self, ids):
        T = ids.shape[1]
        inv = 1.0 / (THETA ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
        f = torch.outer(torch.arange(T, dtype=torch.float32), inv)
        emb = torch.cat((f, f), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.norm(x) @ self.embed_tokens.weight.t()


model = Model()
params = sum(t.numel() for t in model.parameters())
decay = [t for t in model.parameters() if t.dim() >= 2]
no_decay = [t for t in model.parameters() if t.dim() < 2]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.0}, {"params": no_decay, "weight_decay": 0.0}], lr=1e-4)

B, T = a.batch, a.seq
g = torch.Generator().manual_seed(1)
ids = torch.randint(0, 256, (B, T), generator=g)
mask = (torch.arange(T) >= T // 2).float().expand(B, T)[:, 1:]
adv = (torch.rand(B, T, generator=g) * 2 - 1)[:, 1:]
old = torch.full((B, T - 1), -5.5)


def step():
    logits = model(ids)[:, :-1]
    lsm = torch.log_softmax(logits, -1)
    logp = lsm.gather(2, ids[:, 1:, None]).squeeze(2)
    n = mask.sum().clamp(min=1)
    log_ratio = logp - old
    ratio = log_ratio.exp()
    l1 = -adv * ratio
    l2 = -adv * ratio.clamp(0.8, 1.2)
    loss = (torch.max(l1, l2) * mask).sum() / n
    with torch.no_grad():  # metrics, as the ONNX graph reports them
        entropy = (-(lsm.exp() * lsm).sum(-1) * mask).sum() / n
        clip_frac = ((l2 > l1).float() * mask).sum() / n
        approx_kl = (-log_ratio * mask).sum() / n
    opt.zero_grad(set_to_none=True)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return float(loss), float(norm), float(entropy), float(clip_frac), float(approx_kl)


run = torch.compile(step) if a.compile else step
for _ in range(2):
    run()
times = []
for _ in range(a.steps):
    t0 = time.perf_counter()
    run()
    times.append((time.perf_counter() - t0) * 1000)
ms = statistics.median(times)
print(json.dumps({
    "framework": f"pytorch {torch.__version__}",
    "parameters": params,
    "threads": torch.get_num_threads(),
    "blas": torch.__config__.show().split("BLAS_INFO=")[1].split(",")[0] if "BLAS_INFO=" in torch.__config__.show() else "?",
    "openblas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
    "batch": B,
    "seq": T,
    "loss": "ppo-token",
    "train_step_ms": round(ms, 1),
    "tokens_per_s": round(B * T / (ms / 1000)),
    "load_avg_1m": round(os.getloadavg()[0], 2),
}))
