"""Kokoro-82M's fixed numbers, named once: the circuit builder reads them here.

These are properties of the upstream model (kokoro==0.9.4, config.json of Kokoro-82M) and of
its voice packs, not of kcc. A number the model does not record in its checkpoint (ALBERT's
head count, iSTFTNet's upsampling plan) is stated here with where it comes from.
"""
from __future__ import annotations

import math

# -- text side: ALBERT's positions ----------------------------------------------------------
CONTEXT_TOKENS = 512                     # ALBERT max_position_embeddings
BOUNDARY_TOKENS = 2                      # the pad id (0) KModel puts before and after the phonemes
MAX_PHONEMES = CONTEXT_TOKENS - BOUNDARY_TOKENS   # 510: the longest chunk one forward takes
MAX_BATCH = 4                            # sequences per call the text-side circuits are planned for
ALBERT_LAYERS = 12                       # the one shared ALBERT layer runs this often
ALBERT_HEADS = {64: 4, 768: 12}          # by hidden width: the small test config's 4, the real 12
ALBERT_LN_EPS = 1e-12
HIDDEN = 512                             # hidden_dim: d_en (bert_encoder), text encoder, predictor

# -- style vectors: a voice pack row is 256 floats, split 128 | 128 ------------------------
STYLE_DIM = 128                          # style_dim: each half of a voice-pack row
REF_S_DIM = 2 * STYLE_DIM                # a voice-pack row, ref_s
STYLE_DEC = slice(0, STYLE_DIM)          # ref_s[:, :128]: the decoder / generator style
STYLE_PRED = slice(STYLE_DIM, REF_S_DIM)  # ref_s[:, 128:]: the predictor style
VOICE_PACK_ROWS = MAX_PHONEMES           # one style row per phoneme count (510 x 1 x 256)
PREDICTOR_IN = HIDDEN + STYLE_DIM        # d: hidden + style_pred channels (640)

# -- speaking rate ---------------------------------------------------------------------------
# The speeds kcc speaks at, everywhere (say, synth, serve, batch, the Python API): OpenAI's
# 0.25-4. The duration op itself accepts (0, 5] (kcc.ops.duration: a guard on its input, not
# a promise); outside 0.25-4 durations round to silence or smear, so nothing offers them.
MIN_SPEED, MAX_SPEED = 0.25, 4.0
# The sine source's noise seed: the C RNG takes a non-negative 31-bit integer.
MAX_SEED = 2**31 - 1

# -- audio side: frames and samples --------------------------------------------------------
SAMPLE_RATE = 24000
STFT_N_FFT = 20                          # gen_istft_n_fft
STFT_HOP = 5                             # gen_istft_hop_size
UPSAMPLE_RATES = (10, 6)                 # iSTFTNet generator ups
UPSAMPLE_KERNELS = (20, 12)
RESBLOCK_KERNELS = (3, 7, 11)            # the three AdaINResBlock1 after each upsampling
RESBLOCK_DILATIONS = (1, 3, 5)
NOISE_RES_KERNELS = (7, 11)              # the source branch's AdaINResBlock1, per stage
GEN_CHANNELS = 512                       # upsample_initial_channel
HARMONICS = 8                            # SineGen harmonic_num: 9 sine channels with the fundamental
SOURCE_UPSAMPLE = math.prod(UPSAMPLE_RATES) * STFT_HOP    # 300 samples per f0 frame
F0_FRAMES_PER_FRAME = 2                  # the predictor's F0 / N curves run at 2x the alignment rate
SAMPLES_PER_FRAME = F0_FRAMES_PER_FRAME * SOURCE_UPSAMPLE  # 600 samples per alignment frame
SINE_AMP, NOISE_STD, VOICED_THRESHOLD = 0.1, 0.003, 10.0   # SourceModuleHnNSF / SineGen defaults

# Planned maxima of the frame dims (the runtime re-plans a stage past them, see pipeline).
MAX_FRAMES = 2048                        # alignment frames F in the prosody circuit
MAX_DECODER_FRAMES = 4096
MAX_F0_FRAMES = 1024                     # N = 2F in the generator and its noise source

# -- stage order --------------------------------------------------------------------------
# FRONT runs per chunk up to the integer durations; BACK needs F = sum(durations) first.
FRONT = ("kokoro_phoneme_encoder", "kokoro_text_encoder", "kokoro_duration")
BACK = ("kokoro_prosody", "kokoro_decoder", "kokoro_source_noise", "kokoro_generator")
NOISE = "kokoro_source_noise"            # parity runs replace it with upstream's own random draws
