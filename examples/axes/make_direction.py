# A direction axis made from transformers' hidden states: per layer l, the mean residual stream
# entering layer l (hidden_states[l], averaged over each sentence's tokens) of certain sentences
# minus that of uncertain ones — a difference-of-means probe, one row per layer. Written as
# [layers, hidden] to a safetensors file for `headsep run --model DIR --direction-axes FILE`.
#   python examples/axes/make_direction.py MODEL_DIR certainty.safetensors
# Needs torch, transformers, safetensors (PyPI).
import json
import os
import sys

import numpy as np
import torch
import transformers
from safetensors.numpy import save_file

model_dir, out = sys.argv[1], sys.argv[2]
here = os.path.dirname(os.path.abspath(__file__))
texts = [json.loads(line) for line in open(os.path.join(here, "corpus.jsonl"))]
groups = {"c": [t["text"] for t in texts if t["report_id"].startswith("c")],
          "u": [t["text"] for t in texts if t["report_id"].startswith("u")]}
tok = transformers.AutoTokenizer.from_pretrained(model_dir)
model = transformers.AutoModel.from_pretrained(model_dir).eval()


def mean_states(sentences):
    """[layers, hidden]: per layer, the mean over sentences of the mean over their tokens."""
    per = []
    for s in sentences:
        with torch.no_grad():
            hs = model(**tok(s, return_tensors="pt"), output_hidden_states=True).hidden_states
        per.append(np.stack([h[0].mean(0).numpy() for h in hs[:-1]]))  # entering layers 0..L-1
    return np.mean(per, axis=0)


direction = (mean_states(groups["c"]) - mean_states(groups["u"])).astype(np.float32)
save_file({"certain_minus_uncertain": direction}, out)
print(out, direction.shape)
