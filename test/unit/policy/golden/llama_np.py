# Independent numpy Llama forward (vectorized, HF rotate_half, Llama 3 rope scaling) for golden values.
import numpy as np, json, sys
# `python3 llama_np.py [bias]`: hidden 8, head_dim 8 (not hidden/heads = 4), 2 query heads over 1 KV
# head, untied head, rope_theta 10000 with Llama 3 scaling (factor 4, low_freq_factor 1,
# high_freq_factor 8, original_max_position_embeddings 256), so the four frequencies fall in all
# three bands: kept (wavelength 6.3 < 32), blended (62.8), divided (628, 6283). `bias` adds
# attention_bias (q, k, v, o) and mlp_bias (gate, up, down).
BIAS = len(sys.argv) > 1 and sys.argv[1] == 'bias'
H=8; NH=2; NKV=1; D=8; I=12; L=2; V=11
THETA=10000.0; FACTOR=4.0; LOW=1.0; HIGH=8.0; OLD=256
def specs():
    out=[('model.embed_tokens.weight',(V,H))]
    def lin(p, n, o, i):
        r=[(p+n+'.weight',(o,i))]
        if BIAS: r.append((p+n+'.bias',(o,)))
        return r
    for l in range(L):
        p=f'model.layers.{l}.'
        out+=[(p+'input_layernorm.weight',(H,))]
        out+=lin(p,'self_attn.q_proj',NH*D,H)+lin(p,'self_attn.k_proj',NKV*D,H)+lin(p,'self_attn.v_proj',NKV*D,H)+lin(p,'self_attn.o_proj',H,NH*D)
        out+=[(p+'post_attention_layernorm.weight',(H,))]
        out+=lin(p,'mlp.gate_proj',I,H)+lin(p,'mlp.up_proj',I,H)+lin(p,'mlp.down_proj',H,I)
    out+=[('model.norm.weight',(H,)),('lm_head.weight',(V,H))]
    return out
W={}
for k,(n,s) in enumerate(specs()):
    size=int(np.prod(s)); idx=np.arange(size)
    vals=np.sin(idx*0.37+k*1.3)*0.5
    if n.endswith('norm.weight'): vals=1+0.1*np.cos(idx+k)
    W[n]=np.float32(vals).astype(np.float64).reshape(s)
def b(n): return W[n] if BIAS else 0.0
def rms(x,w): return x/np.sqrt((x*x).mean(-1,keepdims=True)+1e-6)*w
def rot(x): h=x.shape[-1]//2; return np.concatenate([-x[...,h:],x[...,:h]],-1)
# Llama 3 frequencies, written from the published formula (not from Turnwise's code).
inv=1.0/(THETA**(np.arange(0,D,2)/D))
wavelen=2*np.pi/inv
low_wl=OLD/LOW; high_wl=OLD/HIGH
scaled=np.where(wavelen>low_wl, inv/FACTOR, inv)
smooth=(OLD/wavelen-LOW)/(HIGH-LOW)
blended=(1-smooth)*scaled/FACTOR+smooth*scaled
medium=(wavelen>=high_wl)&(wavelen<=low_wl)
inv=np.where(medium, blended, scaled)
ids=[3,7,1,10,0,5,2,9,4,8]*4; T=len(ids); pos=np.arange(T)
fr=np.outer(pos,inv); emb=np.concatenate([fr,fr],-1); cos=np.cos(emb); sin=np.sin(emb)
x=W['model.embed_tokens.weight'][ids]
for l in range(L):
    p=f'model.layers.{l}.'
    h=rms(x,W[p+'input_layernorm.weight'])
    q=(h@W[p+'self_attn.q_proj.weight'].T+b(p+'self_attn.q_proj.bias')).reshape(T,NH,D).transpose(1,0,2)
    k=(h@W[p+'self_attn.k_proj.weight'].T+b(p+'self_attn.k_proj.bias')).reshape(T,NKV,D).transpose(1,0,2)
    v=(h@W[p+'self_attn.v_proj.weight'].T+b(p+'self_attn.v_proj.bias')).reshape(T,NKV,D).transpose(1,0,2)
    q=q*cos+rot(q)*sin; k=k*cos+rot(k)*sin
    k=np.repeat(k,NH//NKV,0); v=np.repeat(v,NH//NKV,0)
    s=q@k.transpose(0,2,1)/np.sqrt(D); s=s+np.triu(np.full((T,T),-np.inf),1)
    a=np.exp(s-s.max(-1,keepdims=True)); a/=a.sum(-1,keepdims=True)
    o=(a@v).transpose(1,0,2).reshape(T,NH*D)
    x=x+o@W[p+'self_attn.o_proj.weight'].T+b(p+'self_attn.o_proj.bias')
    h=rms(x,W[p+'post_attention_layernorm.weight'])
    g=h@W[p+'mlp.gate_proj.weight'].T+b(p+'mlp.gate_proj.bias'); u=h@W[p+'mlp.up_proj.weight'].T+b(p+'mlp.up_proj.bias')
    x=x+(g/(1+np.exp(-g))*u)@W[p+'mlp.down_proj.weight'].T+b(p+'mlp.down_proj.bias')
x=rms(x,W['model.norm.weight'])
logits=x@W['lm_head.weight'].T
print(json.dumps({'inv_freq':[float(f) for f in inv],'last':[round(float(v),10) for v in logits[-1]],'first':[round(float(v),10) for v in logits[0]], 'sum': float(logits.sum())}))
