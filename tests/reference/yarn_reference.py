"""Llama 3.1's (_compute_llama3_parameters) and YaRN's rotary frequencies and attention factor written from the public code, for the reference
tests: Hugging Face's _compute_yarn_parameters (modeling_rope_utils.py) and get_mscale, DeepSeek-V3's
DeepseekV3YarnRotaryEmbedding (modeling_deepseek.py) and its softmax scale (DeepseekV3Attention:
softmax_scale * mscale * mscale with mscale = yarn_get_mscale(factor, mscale_all_dim))."""
import math

import torch


def get_mscale(scale, mscale=1):
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def is_yarn(rs):
    return bool(rs) and rs.get("rope_type", rs.get("type")) == "yarn"


def hf_yarn_parameters(rs, base, dim, max_position_embeddings=None, dtype=torch.float32):
    """Hugging Face's _compute_yarn_parameters: (inv_freq [dim / 2], attention_factor); in float32 as
    Hugging Face computes it, or in float64 (dtype) for the exact frequencies."""
    factor = rs["factor"]
    attention_factor = rs.get("attention_factor")
    mscale = rs.get("mscale")
    mscale_all_dim = rs.get("mscale_all_dim")
    original_max_position_embeddings = rs.get("original_max_position_embeddings") or max_position_embeddings
    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = float(get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim))
        else:
            attention_factor = get_mscale(factor)
    beta_fast = rs.get("beta_fast") or 32
    beta_slow = rs.get("beta_slow") or 1

    def find_correction_dim(num_rotations, dim, base, max_position_embeddings):
        return (dim * math.log(max_position_embeddings / (num_rotations * 2 * math.pi))) / (2 * math.log(base))

    def find_correction_range(low_rot, high_rot, dim, base, max_position_embeddings, truncate):
        low = find_correction_dim(low_rot, dim, base, max_position_embeddings)
        high = find_correction_dim(high_rot, dim, base, max_position_embeddings)
        if truncate:
            low = math.floor(low)
            high = math.ceil(high)
        return max(low, 0), min(high, dim - 1)

    def linear_ramp_factor(min, max, dim):
        if min == max:
            max += 0.001
        linear_func = (torch.arange(dim, dtype=dtype) - min) / (max - min)
        return torch.clamp(linear_func, 0, 1)

    pos_freqs = base ** (torch.arange(0, dim, 2).to(dtype=dtype) / dim)
    inv_freq_extrapolation = 1.0 / pos_freqs
    inv_freq_interpolation = 1.0 / (factor * pos_freqs)
    truncate = rs.get("truncate", True)
    low, high = find_correction_range(beta_fast, beta_slow, dim, base, original_max_position_embeddings, truncate)
    inv_freq_extrapolation_factor = 1 - linear_ramp_factor(low, high, dim // 2).to(dtype=dtype)
    inv_freq = (inv_freq_interpolation * (1 - inv_freq_extrapolation_factor)
                + inv_freq_extrapolation * inv_freq_extrapolation_factor)
    return inv_freq, attention_factor


def deepseek_yarn(rs, base, dim):
    """modeling_deepseek.py's DeepseekV3YarnRotaryEmbedding: (inv_freq float32, cos/sin mscale)."""
    factor, original = rs["factor"], rs["original_max_position_embeddings"]
    beta_fast, beta_slow = rs.get("beta_fast", 32), rs.get("beta_slow", 1)
    mscale, mscale_all_dim = rs.get("mscale", 1), rs.get("mscale_all_dim", 0)

    def correction_dim(num_rotations):
        return (dim * math.log(original / (num_rotations * 2 * math.pi))) / (2 * math.log(base))

    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    freq_extra = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    freq_inter = 1.0 / (factor * base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    inv_freq_mask = 1.0 - ramp
    inv_freq = freq_inter * (1 - inv_freq_mask) + freq_extra * inv_freq_mask
    return inv_freq, float(get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim))


def deepseek_softmax_multiplier(rs):
    """DeepseekV3Attention: the softmax scale times mscale^2 where mscale_all_dim is given."""
    if not rs:
        return 1.0
    mscale_all_dim = rs.get("mscale_all_dim", 0)
    if not mscale_all_dim:
        return 1.0
    m = get_mscale(rs["factor"], mscale_all_dim)
    return m * m


def llama3_inv_freq(inv_freq, rs):
    """Llama 3.1's frequencies, as Hugging Face's _compute_llama3_parameters rewrites them."""
    factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    low_freq_wavelen, high_freq_wavelen = old / low, old / high
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, inv_freq_llama)
