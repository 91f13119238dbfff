"""The thirteenth round of models from outside the zoo (``benchmarks/outside_models.py`` runs them):
libraries no earlier round used, each an optional extra, as their users call them: julius' DSP
(fractional resampling, band splitting by sinc low-passes, FFT convolution); asteroid-filterbanks'
STFT and learned parametrised-sinc encoders and their decoder; nnAudio's mel spectrogram and MFCC,
constant-Q transform and STFT with its inverse; lucidrains' single-module libraries: MLP-Mixer,
gMLP, Nystromformer, Conformer, axial attention (reversible), lambda networks, ST-MoE, GateLoop,
Mega, the recurrent memory transformer, memory-efficient (bucketed) attention, CoLT5's routed
attention and feed-forward; FrEIA's invertible networks; and ``transformers`` architectures no
earlier round built (MPNet, BigBird's block-sparse attention, Persimmon, Gemma, the audio
spectrogram transformer, WavLM, SigLIP, PVTv2, the time-series transformer's distribution loss).

A model whose package is not installed is reported as unavailable, with the import error. Kept
apart from ``outside_models.py`` like the rounds before; importing it is cheap (builders import
torch and the libraries when they run).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.outside_models import HF_TOLERANCE, OutsideModel, _call, _hf, _pixels, _randn, _seeded, _tokens
from benchmarks.outside_round7 import _series_inputs
from benchmarks.outside_round9 import _module
from benchmarks.outside_round10 import _tokens as _ids
from benchmarks.outside_round12 import _TOLERANCE, _sequences  # float32 models of a few hundred ops at most

# A transformers model of a round: (name, model class, config class, the output's field or None for
# the whole output, the config, the inputs by shape).
HfCase = tuple[str, str, str, str | None, dict[str, Any], Callable[[int], Any]]


def thirteenth_round() -> list[OutsideModel]:
    """The thirteenth round's models, library by library."""
    return (_audio_models() + _mixer_models() + _attention_models() + _sequence_models() + _flow_models()
            + _transformers_models())  # fmt: skip


def _waves(lengths: tuple[int, int], channels: int | None = 1) -> Callable[[int], Any]:
    """Waveforms of ``lengths[shape]`` samples at batch 1 then 3 (a channel axis unless ``None``)."""

    def make(shape: int) -> Any:
        batch = (1, 3)[shape]
        size = (batch, lengths[shape]) if channels is None else (batch, channels, lengths[shape])
        return _call(_randn(shape, *size))

    return make


def _audio_models() -> list[OutsideModel]:
    """julius, asteroid-filterbanks and nnAudio: signal processing as layers."""
    import torch

    class Julius(torch.nn.Module):
        """julius as a speech front end calls it: resample 16 kHz to 12 kHz by its function
        (a fractional ratio: windowed-sinc kernels made at every call), split into 4 mel-spaced
        bands by a ``SplitBands`` built once (a sinc low-pass per cutoff, by FFT convolution),
        and a learned filter by ``fft_conv1d`` with stride. (The functional ``split_bands(x,
        sr, n_bands=4)`` builds its cutoffs as tensors at every call and tests them in an ``if``:
        ``torch.export`` refuses it.)"""

        def __init__(self) -> None:
            super().__init__()
            self.bands = _module("julius").SplitBands(16000, n_bands=4, fft=True)
            self.weight = torch.nn.Parameter(torch.randn(4, 1, 33) * 0.1)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            julius = _module("julius")
            resampled = julius.resample_frac(x, 16000, 12000)
            return resampled, self.bands(x), julius.fft_conv1d(x, self.weight, stride=2, padding=16)

    class Asteroid(torch.nn.Module):
        """asteroid-filterbanks' STFT encoder and its pseudo-inverse decoder around a mask
        (``make_enc_dec``), beside a parametrised-sinc encoder (learned band edges, filters made
        in forward)."""

        def __init__(self) -> None:
            super().__init__()
            filterbanks = _module("asteroid_filterbanks")
            self.encoder, self.decoder = filterbanks.make_enc_dec("stft", n_filters=64, kernel_size=32, stride=16)
            self.sinc = filterbanks.Encoder(filterbanks.ParamSincFB(16, 33, stride=8, sample_rate=8000))
            self.mask = torch.nn.Conv1d(66, 66, 1)  # 33 bins' real and imaginary parts

        def forward(self, wave: torch.Tensor) -> dict[str, torch.Tensor]:
            spec = self.encoder(wave)
            masked = spec * torch.sigmoid(self.mask(spec))
            return {"estimate": self.decoder(masked), "sinc": self.sinc(wave)}

    class NnAudio(torch.nn.Module):
        """nnAudio's feature layers (Fourier and constant-Q kernels as convolution weights): a
        mel spectrogram in dB, MFCCs, a constant-Q transform's magnitude, and an STFT and back
        (its ``inverse``, length given)."""

        def __init__(self) -> None:
            super().__init__()
            features = _module("nnAudio.features")
            self.mel = features.MelSpectrogram(sr=8000, n_fft=256, n_mels=32, hop_length=64, verbose=False)
            self.mfcc = features.MFCC(sr=8000, n_mfcc=13, n_fft=256, n_mels=32, hop_length=64, verbose=False)
            self.cqt = features.CQT1992v2(sr=8000, hop_length=64, fmin=440, n_bins=24, bins_per_octave=24,
                                          verbose=False)  # fmt: skip
            self.stft = features.STFT(n_fft=128, hop_length=32, iSTFT=True, output_format="Complex", verbose=False)

        def forward(self, wave: torch.Tensor) -> tuple[torch.Tensor, ...]:
            spec = self.stft(wave)
            back = self.stft.inverse(spec, length=wave.shape[-1])
            return (10 * torch.log10(self.mel(wave) + 1e-6), self.mfcc(wave), self.cqt(wave), back)

    return [
        OutsideModel("julius_dsp", "julius resample_frac (16 kHz to 12 kHz), SplitBands by FFT sinc "
                     "low-passes, a learned fft_conv1d with stride", Julius, _waves((800, 1130)), **_TOLERANCE),
        OutsideModel("asteroid_filterbanks", "asteroid-filterbanks STFT encoder, a mask and its pseudo-inverse "
                     "decoder; a parametrised-sinc encoder: a dict out", Asteroid, _waves((512, 800)),
                     **_TOLERANCE),
        OutsideModel("nnaudio_features", "nnAudio MelSpectrogram (dB), MFCC, CQT1992v2 and STFT with its inverse",
                     NnAudio, _waves((1024, 1600), channels=None), rtol=1e-3, atol=1e-3),
    ]  # fmt: skip


def _mixer_models() -> list[OutsideModel]:
    """lucidrains' MLP-style and lambda layers on images and tokens."""
    import torch

    def mixer() -> Any:
        return _module("mlp_mixer_pytorch").MLPMixer(image_size=32, channels=3, patch_size=8, dim=32, depth=2,
                                                      num_classes=10)  # fmt: skip

    def gmlp() -> Any:
        return _module("g_mlp_pytorch").gMLP(num_tokens=64, dim=32, depth=2, seq_len=16, attn_dim=16, causal=True,
                                             circulant_matrix=True, shift_tokens=1)  # fmt: skip

    class Lambda(torch.nn.Module):
        """A lambda layer with local contexts (a 3-D convolution over positions, ``r=5``) and
        intra-depth ``dim_u=2``, between two convolutions."""

        def __init__(self) -> None:
            super().__init__()
            self.stem = torch.nn.Conv2d(3, 16, 3, padding=1)
            self.layer = _module("lambda_networks").LambdaLayer(dim=16, dim_out=32, r=5, dim_k=8, heads=4, dim_u=2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.layer(torch.relu(self.stem(x))).mean((2, 3))

    return [
        OutsideModel("mlp_mixer", "mlp-mixer-pytorch MLPMixer (patches by einops Rearrange, token-mixing by "
                     "1x1 Conv1d)", mixer, lambda shape: _call(_randn(shape, (1, 3)[shape], 3, 32, 32)),
                     **_TOLERANCE),
        OutsideModel("gmlp_causal_lm", "g-mlp-pytorch causal gMLP LM: spatial gating by a circulant matrix, "
                     "tiny attention, token shift", gmlp, _ids((11, 16)), **_TOLERANCE),
        OutsideModel("lambda_local", "lambda-networks LambdaLayer with local contexts (Conv3d over positions), "
                     "dim_u 2", Lambda, lambda shape: _call(_randn(shape, (1, 3)[shape], 3, (8, 12)[shape],
                                                                     (8, 12)[shape])), **_TOLERANCE),
    ]  # fmt: skip


def _masked_sequence(lengths: tuple[int, int], width: int) -> Callable[[int], Any]:
    """Features of ``lengths[shape]`` steps and a boolean mask (the last sample padded)."""

    def make(shape: int) -> Any:
        import torch

        batch, length = (1, 3)[shape], lengths[shape]
        mask = torch.ones(batch, length, dtype=torch.bool)
        mask[-1, length - 3 :] = False
        return _call(_randn(shape, batch, length, width), mask=mask)

    return make


def _attention_models() -> list[OutsideModel]:
    """lucidrains' attention variants: landmarks, axial, bucketed, routed."""
    import torch

    def nystrom() -> Any:
        return _module("nystrom_attention").Nystromformer(dim=32, depth=2, dim_head=8, heads=4, num_landmarks=4,
                                                          attn_values_residual_conv_kernel=5)  # fmt: skip

    class Axial(torch.nn.Module):
        """An ``AxialImageTransformer`` (reversible: its coupling's ``autograd.Function``) with
        axial positional embeddings, then ``AxialAttention`` over a video's three axes."""

        def __init__(self) -> None:
            super().__init__()
            axial = _module("axial_attention")
            self.image = axial.AxialImageTransformer(dim=16, depth=2, heads=4, reversible=True,
                                                     axial_pos_emb_shape=(8, 8))  # fmt: skip
            self.video = axial.AxialAttention(dim=16, num_dimensions=3, heads=4, dim_index=2)

        def forward(self, image: torch.Tensor, video: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return self.image(image), self.video(video)

    def axial_inputs(shape: int) -> Any:
        batch = (1, 3)[shape]
        return _call(_randn(shape, batch, 16, 8, 8), _randn(shape + 1, batch, (3, 4)[shape], 16, 6, 6))

    class Bucketed(torch.nn.Module):
        """memory-efficient-attention-pytorch's ``Attention`` by query and key buckets (4 and 8,
        not dividing the lengths), a key mask and an additive bias, beside its plain path."""

        def __init__(self) -> None:
            super().__init__()
            attention = _module("memory_efficient_attention_pytorch")
            self.attention = attention.Attention(dim=32, heads=4, dim_head=8, memory_efficient=True,
                                                 q_bucket_size=4, k_bucket_size=8)  # fmt: skip

        def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            bias = torch.arange(x.shape[1], dtype=x.dtype) * -0.1
            bias = (bias[:, None] - bias[None, :]).abs().neg()[None, None]
            bucketed = self.attention(x, mask=mask, attn_bias=bias)
            return bucketed, self.attention(x, mask=mask, attn_bias=bias, memory_efficient=False)

    class Routed(torch.nn.Module):
        """CoLT5's conditionally routed attention (light local attention; heavy attention on the
        tokens a coordinate-descent router picks, under a mask) and routed feed-forward."""

        def __init__(self) -> None:
            super().__init__()
            colt5 = _module("colt5_attention")
            self.attention = colt5.ConditionalRoutedAttention(dim=32, num_heavy_tokens_q=4, num_heavy_tokens_kv=4,
                                                              light_dim_head=8, light_heads=2, light_window_size=4,
                                                              heavy_dim_head=8, heavy_heads=4)  # fmt: skip
            self.feedforward = colt5.ConditionalRoutedFeedForward(dim=32, num_heavy_tokens=4)

        def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            x = x + self.attention(x, mask=mask)
            return x + self.feedforward(x)

    return [
        OutsideModel("nystrom_masked", "nystrom-attention Nystromformer (4 landmarks, iterative pseudo-inverse, "
                     "padding to a multiple of them) with a boolean mask", nystrom, _masked_sequence((10, 13), 32),
                     **_TOLERANCE),
        OutsideModel("axial_reversible", "axial-attention AxialImageTransformer (reversible, axial positional "
                     "embedding) and AxialAttention over a video's 3 axes", Axial, axial_inputs, **_TOLERANCE),
        OutsideModel("memory_efficient_attention", "memory-efficient-attention-pytorch bucketed attention (buckets "
                     "4 and 8, checkpointed) with a mask and a bias, and its plain path", Bucketed,
                     _masked_sequence((10, 19), 32), **_TOLERANCE),
        OutsideModel("colt5_routed", "CoLT5 conditionally routed attention and feed-forward (coordinate-descent "
                     "router, top-k heavy tokens) under a mask", Routed, _masked_sequence((12, 16), 32),
                     **_TOLERANCE),
    ]  # fmt: skip


def _sequence_models() -> list[OutsideModel]:
    """Sequence models: Conformer, ST-MoE, GateLoop, Mega, the recurrent memory transformer."""
    import torch

    def conformer() -> Any:
        return _module("conformer").Conformer(dim=32, depth=2, dim_head=8, heads=4, conv_kernel_size=7)

    class Experts(torch.nn.Module):
        """An ST-MoE ``SparseMoEBlock`` (top-2 of 4 experts, capacity by the eval factor, a
        feed-forward after): its output and its three auxiliary losses."""

        def __init__(self) -> None:
            super().__init__()
            moe = _module("st_moe_pytorch")
            self.block = moe.SparseMoEBlock(moe.MoE(dim=32, num_experts=4, gating_top_n=2, expert_hidden_mult=2))

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return tuple(self.block(x))

    def gateloop() -> Any:
        return _module("gateloop_transformer").Transformer(dim=32, num_tokens=64, depth=2, dim_head=8, heads=4,
                                                           checkpoint_gate_looped_attn=False)  # fmt: skip

    def mega() -> Any:
        return _module("mega_pytorch").Mega(dim=32, num_tokens=64, depth=2, ema_heads=4, attn_dim_qk=16,
                                            attn_dim_value=32, laplacian_attn_fn=True)  # fmt: skip

    class Memory(torch.nn.Module):
        """The recurrent memory transformer as its README calls it: a segment, then the next one
        given the first's read memories and XL memories: both logits and the final memories."""

        def __init__(self) -> None:
            super().__init__()
            rmt = _module("recurrent_memory_transformer_pytorch")
            self.model = rmt.RecurrentMemoryTransformer(dim=32, num_tokens=64, depth=2, num_memory_tokens=4,
                                                        seq_len=16, dim_head=8, heads=4)  # fmt: skip

        def forward(self, first: torch.Tensor, second: torch.Tensor) -> tuple[torch.Tensor, ...]:
            logits, memories, xl = self.model(first)
            next_logits, memories, _ = self.model(second, memories, xl_memories=xl)
            return logits, next_logits, memories

    def segments(shape: int) -> Any:
        batch, length = (1, 3)[shape], (10, 16)[shape]
        ids = torch.randint(0, 64, (batch, 2 * length), generator=_seeded(shape))
        return _call(ids[:, :length], ids[:, length:])

    return [
        OutsideModel("conformer_blocks", "conformer Conformer (macaron feed-forwards, Shaw relative positions, "
                     "depthwise GLU convolution)", conformer, _sequences((10, 14), 32), **_TOLERANCE),
        OutsideModel("st_moe_block", "st-moe-pytorch SparseMoEBlock, top-2 of 4 experts by capacity: output "
                     "and its balance and router z losses", Experts, _sequences((10, 14), 32), **_TOLERANCE),
        OutsideModel("gateloop_lm", "gateloop-transformer LM: gate-looped attention by an associative scan "
                     "(complex gates)", gateloop, _ids((9, 13)), **_TOLERANCE),
        OutsideModel("mega_lm", "Mega-pytorch LM: multi-headed EMA by FFT convolution, Laplace attention, "
                     "T5 relative bias", mega, _ids((9, 13)), **_TOLERANCE),
        OutsideModel("recurrent_memory_lm", "recurrent-memory-transformer-pytorch: two segments, the second "
                     "given the first's read and XL memories", Memory, segments, **_TOLERANCE),
    ]  # fmt: skip


def _flow_models() -> list[OutsideModel]:
    """FrEIA's invertible networks: the forward map with its log-Jacobian and the inverse."""
    import torch

    class Invertible(torch.nn.Module):
        """A conditional ``SequenceINN``: two ``AllInOneBlock``s (soft permutations drawn by
        numpy at build, ActNorm-like global affine) and a ``GLOWCouplingBlock``, conditioned
        on a context; ``z, log_jac_det`` and the inverse of ``z``."""

        def __init__(self) -> None:
            super().__init__()
            framework, modules = _module("FrEIA.framework"), _module("FrEIA.modules")

            def subnet(inputs: int, outputs: int) -> torch.nn.Module:
                return torch.nn.Sequential(torch.nn.Linear(inputs, 32), torch.nn.ReLU(), torch.nn.Linear(32, outputs))

            self.inn = framework.SequenceINN(8)
            self.inn.append(modules.AllInOneBlock, cond=0, cond_shape=(4,), subnet_constructor=subnet,
                            permute_soft=True)  # fmt: skip
            self.inn.append(modules.AllInOneBlock, subnet_constructor=subnet)
            self.inn.append(modules.GLOWCouplingBlock, cond=0, cond_shape=(4,), subnet_constructor=subnet)

        def forward(self, x: torch.Tensor, context: torch.Tensor) -> tuple[torch.Tensor, ...]:
            z, log_jac_det = self.inn(x, c=[context])
            back, _ = self.inn(z, c=[context], rev=True)
            return z, log_jac_det, back

    return [
        OutsideModel("freia_conditional_inn", "FrEIA SequenceINN: AllInOneBlocks and a GLOW coupling, "
                     "conditioned; z, log-Jacobian and the inverse", Invertible,
                     lambda shape: _call(_randn(shape, (1, 3)[shape], 8), _randn(shape + 1, (1, 3)[shape], 4)),
                     **_TOLERANCE),
    ]  # fmt: skip


def _transformers_models() -> list[OutsideModel]:
    """transformers architectures no earlier round built, from small configs."""
    encoder = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=1000)
    decoder = dict(encoder, use_cache=False)
    audio = dict(encoder, conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
                 num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4)  # fmt: skip
    models: list[HfCase] = [
        ("hf_mpnet", "MPNetModel", "MPNetConfig", "last_hidden_state", encoder, _tokens(1000)),
        ("hf_big_bird_block_sparse", "BigBirdModel", "BigBirdConfig", "last_hidden_state",
         dict(encoder, attention_type="block_sparse", block_size=4, num_random_blocks=2, max_position_embeddings=128),
         _tokens(1000, (60, 44))),
        ("hf_persimmon", "PersimmonForCausalLM", "PersimmonConfig", "logits",
         dict(decoder, partial_rotary_factor=0.5, qk_layernorm=True), _tokens(1000)),
        ("hf_gemma", "GemmaForCausalLM", "GemmaConfig", "logits", dict(decoder, num_key_value_heads=1, head_dim=16),
         _tokens(1000)),
        ("hf_audio_spectrogram", "ASTModel", "ASTConfig", "pooler_output",
         dict(encoder, patch_size=8, frequency_stride=8, time_stride=8, max_length=48, num_mel_bins=32),
         lambda shape: _call(input_values=_randn(shape, (1, 3)[shape], 48, 32))),
        ("hf_wavlm", "WavLMModel", "WavLMConfig", "last_hidden_state",
         dict(audio, num_buckets=32, max_bucket_distance=64),
         lambda shape: _call(input_values=_randn(shape, (1, 3)[shape], (800, 1200)[shape]))),
        ("hf_siglip", "SiglipModel", "SiglipConfig", None,
         dict(text_config=dict(encoder, max_position_embeddings=32, pad_token_id=0, bos_token_id=1, eos_token_id=2),
              vision_config=dict(encoder, image_size=32, patch_size=8)),
         _tokens(1000, (16, 16), pixels=32, mask=False)),
        ("hf_pvt_v2", "PvtV2Model", "PvtV2Config", "last_hidden_state",
         dict(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[4, 2], hidden_sizes=[16, 32], patch_sizes=[7, 3],
              strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2]), _pixels((32, 48))),
        ("hf_time_series_loss", "TimeSeriesTransformerForPrediction", "TimeSeriesTransformerConfig", "loss",
         dict(prediction_length=4, context_length=16, lags_sequence=[1, 2, 3], num_time_features=2, d_model=16,
              encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
              encoder_ffn_dim=32, decoder_ffn_dim=32, distribution_output="student_t"), _series_inputs),
    ]  # fmt: skip
    return _hf_cases(models)


def _hf_cases(models: list[HfCase]) -> list[OutsideModel]:
    """One case per :data:`HfCase`, called as a user calls it, at the transformers tolerance."""
    return [
        OutsideModel(name, f"transformers {cls}, small, {out or 'its whole output'}",
                     _hf(cls, config_class, out, **cfg), inputs, **HF_TOLERANCE)
        for name, cls, config_class, out, cfg, inputs in models
    ]  # fmt: skip
