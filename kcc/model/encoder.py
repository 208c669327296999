"""The text side up to the duration predictor: ALBERT embeddings, the phoneme encoder (PL-BERT
ALBERT + bert_encoder) and the TextEncoder (CNN + BiLSTM)."""
from __future__ import annotations

from kcc.model.circuit import Block, Circuit
from kcc.model.kokoro import ALBERT_HEADS, ALBERT_LAYERS, ALBERT_LN_EPS, CONTEXT_TOKENS, MAX_BATCH
from kcc.model.layers import bilstm

TOKENS = ("batch", "token", "channel")
TOKEN_DIMS = {"B": (1, MAX_BATCH), "T": (1, CONTEXT_TOKENS)}

EMBEDDING_DESCRIPTION = (
    "ALBERT phoneme-encoder embeddings: word + token type + position lookups, LayerNorm over the "
    "sum.")

PHONEME_ENCODER_DESCRIPTION = (
    "ALBERT phoneme encoder (upstream KModel.bert + bert_encoder) -> d_en [B, T, hidden_dim], "
    "time-major. Embedding + LayerNorm, the 128 -> hidden projection, the one shared ALBERT layer"
    " run 12 times (Q/K/V linears; attention with keys at positions >= lengths[b] masked; "
    "attention.dense; residual + LayerNorm; ffn with gelu_new; ffn_output; residual + full-layer "
    "LayerNorm), then bert_encoder. Padded positions are computed as upstream does (their queries"
    " attend to the valid keys). heads is keyed by hidden width (768: the real model's 12; 64: "
    "the small test config's 4) since checkpoints do not record it. Arena: planned once at B = 4,"
    " T = 512 (ALBERT's 512 positions: 510 phonemes + 2 boundary tokens); every activation is "
    "sized at those maxima and slots are reused by liveness, so any B <= 4, T <= 512 runs in the "
    "same arena with the same library, no recompile; T > 512 is refused before the call.")

TEXT_ENCODER_DESCRIPTION = (
    "Kokoro TextEncoder (modules.py): embedding -> mask -> 3 x [weight-normed conv1d k=5 pad 2 ->"
    " LayerNorm over channels (gamma/beta, eps 1e-5) -> leaky_relu 0.2 -> mask] -> bidirectional "
    "LSTM with pack_padded_sequence semantics (padded rows come out 0, which is upstream's final "
    "masked_fill). Time-major throughout: t_en [B, T, C] is upstream's [B, C, T] output "
    "transposed. Upstream's dropout is inactive at inference and omitted.")


def albert_embeddings(c: Circuit, b: Block, ln: str) -> str:
    """bert.embeddings: word + position + token type lookups and their LayerNorm (one op)."""
    w = {"word": c.weight("word", "bert.embeddings.word_embeddings.weight"),
         "position": c.weight("position", "bert.embeddings.position_embeddings.weight"),
         "type": c.weight("token_type", "bert.embeddings.token_type_embeddings.weight"),
         "gamma": c.weight(f"{ln}_gamma", "bert.embeddings.LayerNorm.weight"),
         "beta": c.weight(f"{ln}_beta", "bert.embeddings.LayerNorm.bias")}
    out = b.op("embedding_three_table_layer_norm", {"ids": "input_ids", "type_ids": "token_type_ids"}, "emb",
               w=w, attrs={"eps": ALBERT_LN_EPS})
    b.checkpoint("kokoro.phoneme_encoder.embeddings", out, TOKENS, layout="token_major")
    return out


def embedding() -> Circuit:
    c = Circuit("kokoro_embedding", EMBEDDING_DESCRIPTION, TOKEN_DIMS, capture="embedding")
    c.input("input_ids", "i32", ["B", "T"])
    c.input("token_type_ids", "i32", ["B", "T"])
    albert_embeddings(c, c.block("embeddings"), ln="ln")
    c.outputs = ["emb"]
    return c


def _linear(c: Circuit, b: Block, name: str, ref: str, x: str, out: str, act: str | None = None) -> str:
    w = {"weight": c.weight(f"{name}_w", f"{ref}.weight"), "bias": c.weight(f"{name}_b", f"{ref}.bias")}
    return b.op("linear", {"x": x}, out, w=w, attrs=None if act is None else {"act": act})


def phoneme_encoder() -> Circuit:
    c = Circuit("kokoro_phoneme_encoder", PHONEME_ENCODER_DESCRIPTION, TOKEN_DIMS, capture="phoneme_encoder")
    c.input("input_ids", "i32", ["B", "T"])
    c.input("token_type_ids", "i32", ["B", "T"])
    c.input("lengths", "i32", ["B"])
    b = c.block("embeddings")
    emb = albert_embeddings(c, b, ln="emb_ln")
    proj = _linear(c, b, "map", "bert.encoder.embedding_hidden_mapping_in", emb, "proj")
    b.checkpoint("kokoro.phoneme_encoder.projection", proj, TOKENS, layout="token_major")

    # ALBERT shares one layer's weights across all its passes: one block, repeated.
    layer = "bert.encoder.albert_layer_groups.0.albert_layers.0"
    # The shared layer's weights, in the order the circuit has always listed them.
    names = {"q": "attention.query", "k": "attention.key", "v": "attention.value",
             "dense": "attention.dense", "ffn": "ffn", "ffn_out": "ffn_output"}
    lin = {n: {"weight": c.weight(f"{n}_w", f"{layer}.{r}.weight"), "bias": c.weight(f"{n}_b", f"{layer}.{r}.bias")}
           for n, r in names.items()}
    ln = {n: {"gamma": c.weight(f"{n}_ln_gamma", f"{layer}.{r}.weight"),
              "beta": c.weight(f"{n}_ln_beta", f"{layer}.{r}.bias")}
          for n, r in (("attn", "attention.LayerNorm"), ("full", "full_layer_layer_norm"))}
    b = c.block("albert", repeat=ALBERT_LAYERS, carry=("h", proj), output="out")
    q, k, v = (b.op("linear", {"x": "h"}, n, w=lin[n]) for n in ("q", "k", "v"))
    ctx = b.op("attention", {"q": q, "k": k, "v": v, "lengths": "lengths"}, "ctx",
               attrs={"heads": {str(width): h for width, h in ALBERT_HEADS.items()}})
    a = b.op("linear", {"x": ctx}, "attn_proj", w=lin["dense"])
    attn = b.op("layer_norm", {"x": a, "res": "h"}, "attn", w=ln["attn"], attrs={"eps": ALBERT_LN_EPS})
    f = b.op("linear", {"x": attn}, "ffn", w=lin["ffn"], attrs={"act": "gelu_new"})
    f = b.op("linear", {"x": f}, "ffn_out", w=lin["ffn_out"])
    out = b.op("layer_norm", {"x": f, "res": attn}, "out", w=ln["full"], attrs={"eps": ALBERT_LN_EPS})
    b.checkpoint("kokoro.phoneme_encoder.layer{i}.attention", attn, TOKENS, layout="token_major")
    b.checkpoint("kokoro.phoneme_encoder.layer{i}.ffn", out, TOKENS, layout="token_major")

    b = c.block("head")
    d_en = _linear(c, b, "enc", "bert_encoder", "albert", "d_en")
    b.checkpoint("kokoro.phoneme_encoder.bert_encoder", d_en, TOKENS, layout="token_major")
    c.outputs = [d_en]
    return c


def text_encoder() -> Circuit:
    c = Circuit("kokoro_text_encoder", TEXT_ENCODER_DESCRIPTION, TOKEN_DIMS, capture="middle_t12")
    c.input("input_ids", "i32", ["B", "T"])
    c.input("lengths", "i32", ["B"])
    table = c.weight("embedding", "text_encoder.embedding.weight")
    convs = [({"weight": c.weight(f"conv{i}_w", f"text_encoder.cnn.{i}.0", weight_norm=True),
               "bias": c.weight(f"conv{i}_b", f"text_encoder.cnn.{i}.0.bias")},
              {"gamma": c.weight(f"ln{i}_g", f"text_encoder.cnn.{i}.1.gamma"),
               "beta": c.weight(f"ln{i}_b", f"text_encoder.cnn.{i}.1.beta")}) for i in range(3)]
    b = c.block("embed")
    e = b.op("embedding", {"ids": "input_ids"}, "emb", w={"table": table})
    x = b.op("sequence_mask", {"x": e, "lengths": "lengths"}, "x0")
    for i, (conv, norm) in enumerate(convs):
        b = c.block(f"cnn{i}")
        h = b.op("conv1d", {"x": x}, f"c{i}", w=conv, attrs={"padding": 2})
        h = b.op("layer_norm", {"x": h}, f"n{i}", w=norm, attrs={"eps": 1e-5})
        h = b.op("leaky_relu", {"x": h}, f"a{i}", attrs={"slope": 0.2})
        x = b.op("sequence_mask", {"x": h, "lengths": "lengths"}, f"x{i + 1}")
        b.checkpoint(f"kokoro.text_encoder.cnn.{i}", x, TOKENS)
    b = c.block("lstm")
    t_en = bilstm(c, b, "lstm", "text_encoder.lstm", x, "lengths", "t_en", packed=True, gates="gates",
                  by_direction=True)
    b.checkpoint("kokoro.text_encoder.output", t_en, TOKENS)
    c.outputs = [t_en]
    return c
