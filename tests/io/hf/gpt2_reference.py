#!/usr/bin/env python3
"""An independent GPT-2 for the Hugging Face checkpoint tests, in the Python standard library only.

  gpt2_reference.py write DIR DTYPE SEED   writes DIR/model.safetensors + DIR/config.json: a random tiny GPT-2
                                           laid out as transformers saves GPT2LMHeadModel (Conv1D weights
                                           [in, out], "transformer." prefix, attn.bias mask buffers, a tied
                                           lm_head copy), tensors in DTYPE (F32, F16 or BF16)
  gpt2_reference.py logits DIR ID...       prints the logits of every position, as JSON, from a forward that
                                           follows transformers' modeling_gpt2.py (GPT2Attention, GPT2MLP with
                                           gelu_new, tied head), reading DIR with its own safetensors reader

Written from the safetensors format description and modeling_gpt2.py, not from gpt-train's code; the
Hugging Face library itself is not run (Debian does not package transformers).
"""
import json
import math
import os
import random
import struct
import sys


def read_safetensors(path):
    with open(path, 'rb') as f:
        data = f.read()
    (n,) = struct.unpack('<Q', data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    tensors = {}
    for name, info in header.items():
        if name == '__metadata__':
            continue
        begin, end = info['data_offsets']
        raw = data[base + begin:base + end]
        dtype = info['dtype']
        if dtype == 'F32':
            values = list(struct.unpack('<%df' % (len(raw) // 4), raw))
        elif dtype == 'F16':
            values = list(struct.unpack('<%de' % (len(raw) // 2), raw))
        elif dtype == 'BF16':
            halves = struct.unpack('<%dH' % (len(raw) // 2), raw)
            values = [struct.unpack('<f', struct.pack('<I', h << 16))[0] for h in halves]
        else:
            raise ValueError('%s: dtype %s' % (name, dtype))
        tensors[name] = (info['shape'], values)
    return header.get('__metadata__', {}), tensors


def encode(values, dtype):
    if dtype == 'F32':
        return struct.pack('<%df' % len(values), *values)
    if dtype == 'F16':
        return struct.pack('<%de' % len(values), *values)
    # BF16: round to nearest even from the FP32 bits.
    out = bytearray()
    for v in values:
        (u,) = struct.unpack('<I', struct.pack('<f', v))
        u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
        out += struct.pack('<H', u)
    return bytes(out)


def write(out_dir, dtype, seed):
    rng = random.Random(seed)
    L, H, C, T, V = 2, 2, 16, 8, 61
    os.makedirs(out_dir, exist_ok=True)
    tensors = []

    def add(name, shape, values):
        tensors.append((name, shape, values))

    def rand(n, std):
        return [rng.gauss(0.0, std) for _ in range(n)]

    wte = rand(V * C, 0.3)
    add('transformer.wte.weight', [V, C], wte)
    add('transformer.wpe.weight', [T, C], rand(T * C, 0.1))
    for l in range(L):
        p = 'transformer.h.%d.' % l
        add(p + 'ln_1.weight', [C], [1.0 + x for x in rand(C, 0.1)])
        add(p + 'ln_1.bias', [C], rand(C, 0.1))
        add(p + 'attn.c_attn.weight', [C, 3 * C], rand(C * 3 * C, 0.2))
        add(p + 'attn.c_attn.bias', [3 * C], rand(3 * C, 0.1))
        add(p + 'attn.c_proj.weight', [C, C], rand(C * C, 0.2))
        add(p + 'attn.c_proj.bias', [C], rand(C, 0.1))
        add(p + 'ln_2.weight', [C], [1.0 + x for x in rand(C, 0.1)])
        add(p + 'ln_2.bias', [C], rand(C, 0.1))
        add(p + 'mlp.c_fc.weight', [C, 4 * C], rand(C * 4 * C, 0.2))
        add(p + 'mlp.c_fc.bias', [4 * C], rand(4 * C, 0.1))
        add(p + 'mlp.c_proj.weight', [4 * C, C], rand(4 * C * C, 0.1))
        add(p + 'mlp.c_proj.bias', [C], rand(C, 0.1))
        # The causal mask buffer older transformers versions saved with the weights.
        add(p + 'attn.bias', [1, 1, T, T], [1.0 if j <= i else 0.0 for i in range(T) for j in range(T)])
    add('transformer.ln_f.weight', [C], [1.0 + x for x in rand(C, 0.1)])
    add('transformer.ln_f.bias', [C], rand(C, 0.1))
    add('lm_head.weight', [V, C], wte)

    header = {'__metadata__': {'format': 'pt'}}
    blobs = []
    offset = 0
    for name, shape, values in tensors:
        blob = encode(values, dtype)
        header[name] = {'dtype': dtype, 'shape': shape, 'data_offsets': [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    with open(os.path.join(out_dir, 'model.safetensors'), 'wb') as f:
        f.write(struct.pack('<Q', len(text)) + text + b''.join(blobs))
    config = {'model_type': 'gpt2', 'architectures': ['GPT2LMHeadModel'], 'n_layer': L, 'n_head': H, 'n_embd': C,
              'n_positions': T, 'vocab_size': V, 'layer_norm_epsilon': 1e-5, 'activation_function': 'gelu_new'}
    with open(os.path.join(out_dir, 'config.json'), 'w') as f:
        json.dump(config, f)


def layer_norm(x, w, b, eps):
    mean = sum(x) / len(x)
    var = sum((v - mean) ** 2 for v in x) / len(x)
    r = 1.0 / math.sqrt(var + eps)
    return [(v - mean) * r * wi + bi for v, wi, bi in zip(x, w, b)]


def conv1d(x, w, b, n_in, n_out):
    """transformers' Conv1D: y = x @ W + b with W [n_in, n_out]."""
    return [b[o] + sum(x[i] * w[i * n_out + o] for i in range(n_in)) for o in range(n_out)]


def gelu_new(x):
    return 0.5 * x * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def logits(model_dir, ids):
    with open(os.path.join(model_dir, 'config.json')) as f:
        cfg = json.load(f)
    _, t = read_safetensors(os.path.join(model_dir, 'model.safetensors'))
    pre = 'transformer.' if 'transformer.wte.weight' in t else ''
    W = lambda name: t[pre + name][1]
    L, H, C, V = cfg['n_layer'], cfg['n_head'], cfg['n_embd'], cfg['vocab_size']
    eps = cfg.get('layer_norm_epsilon', 1e-5)
    hd = C // H
    wte, wpe = W('wte.weight'), W('wpe.weight')
    h = [[wte[tok * C + c] + wpe[pos * C + c] for c in range(C)] for pos, tok in enumerate(ids)]
    for l in range(L):
        p = 'h.%d.' % l
        a = [layer_norm(x, W(p + 'ln_1.weight'), W(p + 'ln_1.bias'), eps) for x in h]
        qkv = [conv1d(x, W(p + 'attn.c_attn.weight'), W(p + 'attn.c_attn.bias'), C, 3 * C) for x in a]
        y = [[0.0] * C for _ in ids]
        for head in range(H):
            lo = head * hd
            for i in range(len(ids)):
                q = qkv[i][lo:lo + hd]
                scores = [sum(q[d] * qkv[j][C + lo + d] for d in range(hd)) / math.sqrt(hd) for j in range(i + 1)]
                m = max(scores)
                e = [math.exp(s - m) for s in scores]
                z = sum(e)
                for d in range(hd):
                    y[i][lo + d] = sum(e[j] / z * qkv[j][2 * C + lo + d] for j in range(i + 1))
        y = [conv1d(x, W(p + 'attn.c_proj.weight'), W(p + 'attn.c_proj.bias'), C, C) for x in y]
        h = [[u + v for u, v in zip(x, r)] for x, r in zip(h, y)]
        m = [layer_norm(x, W(p + 'ln_2.weight'), W(p + 'ln_2.bias'), eps) for x in h]
        m = [[gelu_new(v) for v in conv1d(x, W(p + 'mlp.c_fc.weight'), W(p + 'mlp.c_fc.bias'), C, 4 * C)] for x in m]
        m = [conv1d(x, W(p + 'mlp.c_proj.weight'), W(p + 'mlp.c_proj.bias'), 4 * C, C) for x in m]
        h = [[u + v for u, v in zip(x, r)] for x, r in zip(h, m)]
    h = [layer_norm(x, W('ln_f.weight'), W('ln_f.bias'), eps) for x in h]
    head = t['lm_head.weight'][1] if 'lm_head.weight' in t else wte  # tied
    return [[sum(x[c] * head[v * C + c] for c in range(C)) for v in range(V)] for x in h]


if __name__ == '__main__':
    if sys.argv[1] == 'write':
        write(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif sys.argv[1] == 'logits':
        print(json.dumps(logits(sys.argv[2], [int(a) for a in sys.argv[3:]])))
    else:
        sys.exit('usage: gpt2_reference.py write DIR DTYPE SEED | logits DIR ID...')
