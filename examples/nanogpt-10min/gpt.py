"""The hill's GPT, nanoGPT style: the one architecture the scoring phase
builds from a checkpoint. Submissions choose its sizes (CONFIG_BOUNDS) and
everything about training; the scorer never runs submitted code, so the
module that turns weights into predictions is this one."""

import math

import torch
import torch.nn as nn
from torch.nn import functional as F

VOCAB_SIZE = 256  # byte-level
# Each size a checkpoint's config may set, with its bounds.
CONFIG_BOUNDS = {"n_layer": (1, 64), "n_head": (1, 64), "n_embd": (8, 8192), "block_size": (8, 8192)}


def check_config(config):
    """The config as ints, or ValueError naming the first problem."""
    if not isinstance(config, dict):
        raise ValueError(f"the checkpoint's 'config' must be a mapping, got {type(config).__name__}")
    unknown = sorted(set(config) - set(CONFIG_BOUNDS) - {"vocab_size", "bias"})
    if unknown:
        raise ValueError(f"unknown config key '{unknown[0]}' (allowed: {', '.join(CONFIG_BOUNDS)}, vocab_size, bias)")
    checked = {}
    for key, (low, high) in CONFIG_BOUNDS.items():
        value = config.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"config '{key}' must be an integer from {low} to {high}, got {value!r}")
        checked[key] = value
    if config.get("vocab_size", VOCAB_SIZE) != VOCAB_SIZE:
        raise ValueError(f"config 'vocab_size' must be {VOCAB_SIZE} (the corpus is bytes)")
    if checked["n_embd"] % checked["n_head"]:
        raise ValueError("config 'n_embd' must be a multiple of 'n_head'")
    checked["vocab_size"] = VOCAB_SIZE
    checked["bias"] = bool(config.get("bias", False))
    return checked


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.n_head = config["n_head"]
        self.c_attn = nn.Linear(config["n_embd"], 3 * config["n_embd"], bias=config["bias"])
        self.c_proj = nn.Linear(config["n_embd"], config["n_embd"], bias=config["bias"])

    def forward(self, x):
        batch, steps, channels = x.size()
        q, k, v = self.c_attn(x).split(channels, dim=2)
        q, k, v = (t.view(batch, steps, self.n_head, channels // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(batch, steps, channels))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config["n_embd"], 4 * config["n_embd"], bias=config["bias"])
        self.c_proj = nn.Linear(4 * config["n_embd"], config["n_embd"], bias=config["bias"])

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config["n_embd"], bias=config["bias"])
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config["n_embd"], bias=config["bias"])
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = check_config(config)
        config = self.config
        self.wte = nn.Embedding(config["vocab_size"], config["n_embd"])
        self.wpe = nn.Embedding(config["block_size"], config["n_embd"])
        self.blocks = nn.ModuleList(Block(config) for _ in range(config["n_layer"]))
        self.ln_f = nn.LayerNorm(config["n_embd"], bias=config["bias"])
        self.lm_head = nn.Linear(config["n_embd"], config["vocab_size"], bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as in GPT-2
        self.apply(self._init_weights)
        for name, parameter in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(parameter, mean=0.0, std=0.02 / math.sqrt(2 * config["n_layer"]))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def parameter_count(self):
        return sum(parameter.numel() for parameter in self.parameters())

    def forward(self, idx, targets=None):
        steps = idx.size(1)
        if steps > self.config["block_size"]:
            raise ValueError(f"a sequence of {steps} tokens is longer than block_size {self.config['block_size']}")
        positions = torch.arange(steps, device=idx.device)
        x = self.wte(idx) + self.wpe(positions)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))
