// Philox4x32-10 counter-based random numbers (Salmon et al., "Parallel random numbers:
// as easy as 1, 2, 3", SC 2011), with the constants cuRAND and PyTorch use. Counter-based
// means any element's numbers are a pure function of (seed, counter): no sequential
// state, so eager CPU/CUDA kernels and generated code produce the same stream.
//
// Note [Philox stream]
// kiln's random-number contract; every random op on every device follows it.
//  - A generator's state is (seed, offset). offset counts 128-bit Philox blocks already
//    handed out. A random op producing n elements of type T takes base = offset and
//    advances the generator by philox_blocks<T>(n) = ceil(n / philox_per_block<T>).
//  - Element i (the op's logical row-major element index: independent of strides,
//    devices, thread layout or fusion) reads block b = base + i / philox_per_block<T>:
//    Philox4x32-10 with key = seed (k0 = low word, k1 = high word) and 128-bit counter
//    (c0, c1) = low/high word of b, (c2, c3) = 0 (the upper 64 bits are reserved).
//  - 32-bit draws (philox_u32; uniform float/Half/BFloat16): 4 per block, lane i % 4.
//  - 64-bit draws (philox_u64; uniform double): 2 per block, element i % 2 uses lanes
//    (2j, 2j+1) as (low, high) words, j = i % 2.
//  - normal float/Half/BFloat16: 4 per block; the lane pair p = (i % 4) / 2, i.e. lanes
//    (2p, 2p+1), gives (u1, u2) for Box-Muller; even i takes r cos(theta), odd i r sin(theta).
//  - normal double: 2 per block; u1 from lanes (0, 1), u2 from lanes (2, 3); even i takes
//    r cos(theta), odd i r sin(theta).
//  - Uniforms in [0, 1) take the top k bits of the draw, k = the type's significand bits
//    (float 24, double 53, Half 11, BFloat16 8), times 2^-k: exact in T, never 1.0.
// Integer draws and uniforms are bit-identical everywhere. Normals go through log/sin/cos,
// which the host libm and CUDA's libdevice may round differently in the last bit, so
// CPU and CUDA normals can differ by an ulp; the same device always agrees with itself.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/half.h"

namespace kiln {

struct uint4x32 {
  uint32_t x, y, z, w;
  // Lane by index without an indexed array (which CUDA would place in local memory).
  KILN_HD uint32_t lane(uint32_t l) const { return l == 0 ? x : l == 1 ? y : l == 2 ? z : w; }
};

namespace detail {

inline constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
inline constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;  // golden ratio
inline constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;  // sqrt(3) - 1

KILN_HD inline uint32_t mulhi32(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
  return __umulhi(a, b);
#else
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
#endif
}

KILN_HD inline float philox_log(float x) { return ::logf(x); }
KILN_HD inline double philox_log(double x) { return ::log(x); }
KILN_HD inline float philox_sqrt(float x) { return ::sqrtf(x); }
KILN_HD inline double philox_sqrt(double x) { return ::sqrt(x); }
KILN_HD inline float philox_sin(float x) { return ::sinf(x); }
KILN_HD inline double philox_sin(double x) { return ::sin(x); }
KILN_HD inline float philox_cos(float x) { return ::cosf(x); }
KILN_HD inline double philox_cos(double x) { return ::cos(x); }

}  // namespace detail

// Philox4x32 with 10 rounds on counter (c0..c3) and key (k0, k1). Each round multiplies
// words 0 and 2 by the two constants and mixes the high/low halves with the other words
// and the key; the key is bumped by the Weyl constants between rounds.
KILN_HD inline uint4x32 philox4x32_10(uint4x32 ctr, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += detail::kPhiloxW0;
      k1 += detail::kPhiloxW1;
    }
    const uint32_t hi0 = detail::mulhi32(detail::kPhiloxM0, ctr.x);
    const uint32_t lo0 = detail::kPhiloxM0 * ctr.x;
    const uint32_t hi1 = detail::mulhi32(detail::kPhiloxM1, ctr.z);
    const uint32_t lo1 = detail::kPhiloxM1 * ctr.z;
    ctr = uint4x32{hi1 ^ ctr.y ^ k0, lo1, hi0 ^ ctr.w ^ k1, lo0};
  }
  return ctr;
}

// key = seed; counter = (counter_hi << 64) | counter_lo, little-endian words.
KILN_HD inline uint4x32 philox4x32(uint64_t key, uint64_t counter_hi, uint64_t counter_lo) {
  const uint4x32 ctr{static_cast<uint32_t>(counter_lo), static_cast<uint32_t>(counter_lo >> 32),
                     static_cast<uint32_t>(counter_hi), static_cast<uint32_t>(counter_hi >> 32)};
  return philox4x32_10(ctr, static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32));
}

// The block for stream position `block` (see Note [Philox stream]).
KILN_HD inline uint4x32 philox_block(uint64_t seed, uint64_t block) { return philox4x32(seed, 0, block); }

// ---------------------------------------------------------------------------------
// Bits -> uniform [0, 1)

KILN_HD inline float uniform_float(uint32_t u) {
  return static_cast<float>(u >> 8) * 5.9604644775390625e-8f;  // 24 bits * 2^-24
}

KILN_HD inline double uniform_double(uint32_t lo, uint32_t hi) {
  const uint64_t u = (static_cast<uint64_t>(hi) << 32) | lo;
  return static_cast<double>(u >> 11) * 1.1102230246251565404e-16;  // 53 bits * 2^-53
}

// Top `digits` bits of u scaled into [0, 1); exact in T (so never rounds up to 1).
template <class T>
KILN_HD inline T uniform_from_bits(uint32_t u) {
  if constexpr (std::is_same_v<T, float>) {
    return uniform_float(u);
  } else if constexpr (std::is_same_v<T, Half>) {
    return Half(static_cast<float>(u >> 21) * 4.8828125e-4f);  // 11 bits * 2^-11
  } else {
    static_assert(std::is_same_v<T, BFloat16>, "uniform_from_bits: float, Half or BFloat16");
    return BFloat16(static_cast<float>(u >> 24) * 3.90625e-3f);  // 8 bits * 2^-8
  }
}

// Box-Muller: one of the two normals from uniforms u1, u2 in [0, 1). 1 - u1 lies in
// (0, 1] and is exact, so the log never sees 0.
template <class C>
KILN_HD inline C box_muller(C u1, C u2, bool use_sin) {
  const C r = detail::philox_sqrt(C(-2) * detail::philox_log(C(1) - u1));
  const C theta = C(6.283185307179586476925) * u2;
  return r * (use_sin ? detail::philox_sin(theta) : detail::philox_cos(theta));
}

// ---------------------------------------------------------------------------------
// Per-element access (Note [Philox stream])

template <class T>
inline constexpr uint64_t philox_per_block = std::is_same_v<T, double> || std::is_same_v<T, uint64_t> ? 2 : 4;

// How far a random op producing n values of T advances the generator's offset.
template <class T>
KILN_HD inline constexpr uint64_t philox_blocks(uint64_t n) {
  return (n + philox_per_block<T> - 1) / philox_per_block<T>;
}

KILN_HD inline uint32_t philox_u32(uint64_t seed, uint64_t offset, uint64_t i) {
  return philox_block(seed, offset + i / 4).lane(static_cast<uint32_t>(i % 4));
}

KILN_HD inline uint64_t philox_u64(uint64_t seed, uint64_t offset, uint64_t i) {
  const uint4x32 b = philox_block(seed, offset + i / 2);
  return (i % 2) == 0 ? (static_cast<uint64_t>(b.y) << 32 | b.x) : (static_cast<uint64_t>(b.w) << 32 | b.z);
}

// Uniform in [0, 1): T = float, double, Half or BFloat16.
template <class T>
KILN_HD inline T philox_uniform(uint64_t seed, uint64_t offset, uint64_t i) {
  if constexpr (std::is_same_v<T, double>) {
    const uint64_t u = philox_u64(seed, offset, i);
    return uniform_double(static_cast<uint32_t>(u), static_cast<uint32_t>(u >> 32));
  } else {
    return uniform_from_bits<T>(philox_u32(seed, offset, i));
  }
}

// Standard normal: T = float, double, Half or BFloat16 (the last two via float).
template <class T>
KILN_HD inline T philox_normal(uint64_t seed, uint64_t offset, uint64_t i) {
  const bool use_sin = (i % 2) != 0;
  if constexpr (std::is_same_v<T, double>) {
    const uint4x32 b = philox_block(seed, offset + i / 2);
    return box_muller(uniform_double(b.x, b.y), uniform_double(b.z, b.w), use_sin);
  } else {
    static_assert(std::is_same_v<T, float> || is_reduced_float_v<T>,
                  "philox_normal: float, double, Half or BFloat16");
    const uint4x32 b = philox_block(seed, offset + i / 4);
    const uint32_t pair = static_cast<uint32_t>(i % 4) / 2;
    const float n = box_muller(uniform_float(b.lane(2 * pair)), uniform_float(b.lane(2 * pair + 1)), use_sin);
    return T(n);
  }
}

}  // namespace kiln
