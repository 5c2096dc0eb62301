# Independent numpy Qwen2 forward (vectorized, HF rotate_half) for golden values.
import numpy as np, json, sys
# `python3 qwen2_np.py [hidden heads kv_heads]`: default 8 4 2 (head dim 2); 16 2 1 gives head dim 8,
# where rotate_half (HF) and interleaved (GPT-J) RoPE and the inv_freq exponents differ.
cfg = dict(hidden_size=8, intermediate_size=12, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
           rms_norm_eps=1e-6, rope_theta=10000.0, vocab_size=11, max_position_embeddings=64, tie_word_embeddings=False)
H, NH, NKV = (int(a) for a in sys.argv[1:4]) if len(sys.argv) > 3 else (8, 4, 2)
I=12; L=2; D=H//NH; V=11
def specs():
    out=[('model.embed_tokens.weight',(V,H))]
    for i in range(L):
        p=f'model.layers.{i}.'
        out+= [(p+'input_layernorm.weight',(H,)),(p+'self_attn.q_proj.weight',(H,H)),(p+'self_attn.q_proj.bias',(H,)),
               (p+'self_attn.k_proj.weight',(NKV*D,H)),(p+'self_attn.k_proj.bias',(NKV*D,)),(p+'self_attn.v_proj.weight',(NKV*D,H)),
               (p+'self_attn.v_proj.bias',(NKV*D,)),(p+'self_attn.o_proj.weight',(H,H)),(p+'post_attention_layernorm.weight',(H,)),
               (p+'mlp.gate_proj.weight',(I,H)),(p+'mlp.up_proj.weight',(I,H)),(p+'mlp.down_proj.weight',(H,I))]
    out+=[('model.norm.weight',(H,)),('lm_head.weight',(V,H))]
    return out
W={}
for k,(n,s) in enumerate(specs()):
    size=int(np.prod(s)); idx=np.arange(size)
    vals=np.sin(idx*0.37+k*1.3)*0.5
    if n.endswith('norm.weight'): vals=1+0.1*np.cos(idx+k)
    W[n]=np.float32(vals).astype(np.float64).reshape(s)
def rms(x,w): return x/np.sqrt((x*x).mean(-1,keepdims=True)+1e-6)*w
def rot(x): h=x.shape[-1]//2; return np.concatenate([-x[...,h:],x[...,:h]],-1)
ids=[3,7,1,10,0,5]; T=len(ids); pos=np.arange(T)
inv=1.0/(10000.0**(np.arange(0,D,2)/D)); fr=np.outer(pos,inv); emb=np.concatenate([fr,fr],-1); cos=np.cos(emb); sin=np.sin(emb)
x=W['model.embed_tokens.weight'][ids]
for l in range(L):
    p=f'model.layers.{l}.'
    h=rms(x,W[p+'input_layernorm.weight'])
    q=(h@W[p+'self_attn.q_proj.weight'].T+W[p+'self_attn.q_proj.bias']).reshape(T,NH,D).transpose(1,0,2)
    k=(h@W[p+'self_attn.k_proj.weight'].T+W[p+'self_attn.k_proj.bias']).reshape(T,NKV,D).transpose(1,0,2)
    v=(h@W[p+'self_attn.v_proj.weight'].T+W[p+'self_attn.v_proj.bias']).reshape(T,NKV,D).transpose(1,0,2)
    q=q*cos+rot(q)*sin; k=k*cos+rot(k)*sin
    k=np.repeat(k,NH//NKV,0); v=np.repeat(v,NH//NKV,0)
    s=q@k.transpose(0,2,1)/np.sqrt(D); s=s+np.triu(np.full((T,T),-np.inf),1)
    a=np.exp(s-s.max(-1,keepdims=True)); a/=a.sum(-1,keepdims=True)
    o=(a@v).transpose(1,0,2).reshape(T,H)
    x=x+o@W[p+'self_attn.o_proj.weight'].T
    h=rms(x,W[p+'post_attention_layernorm.weight'])
    g=h@W[p+'mlp.gate_proj.weight'].T; u=h@W[p+'mlp.up_proj.weight'].T
    x=x+(g/(1+np.exp(-g))*u)@W[p+'mlp.down_proj.weight'].T
x=rms(x,W['model.norm.weight'])
logits=x@W['lm_head.weight'].T
print(json.dumps({'ids':ids,'last':[round(float(v),10) for v in logits[-1]],'first':[round(float(v),10) for v in logits[0]], 'sum': float(logits.sum())}))
