// Float32 CPU kernels for the decode engine (AVX2 + FMA, and AVX-512 for the matrix
// products where the CPU has it, chosen at run time), built on first use by
// gen/engine/kernels.py. Every kernel computes each output row from its own input row
// in one fixed order of operations, so a row's result never depends on how many other
// rows share the call (batch invariance, bit for bit), nor on how the work is split
// between threads.
//
// Built with -ffp-contract=off: a multiply followed by an add rounds twice, as the
// PyTorch operations they replace do (rotary is bitwise the same as the PyTorch form).

#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

namespace {

// ------------------------------------------------------------ the instruction set in use

constexpr int kIsaAvx2 = 0, kIsaAvx512 = 1;
const char* const kIsaNames[] = {"avx2", "avx512"};

// does the CPU have AVX-512 F, BW, VL and DQ, and does the OS keep their registers?
// (__builtin_cpu_supports checks both)
bool has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

// AVX-512 where the machine takes it, unless GEN_KERNELS=avx2 says to stay at AVX2
int detect_isa() {
  const char* cap = std::getenv("GEN_KERNELS");
  if (cap != nullptr && std::strcmp(cap, "avx2") == 0) return kIsaAvx2;
  return has_avx512() ? kIsaAvx512 : kIsaAvx2;
}

int g_isa = detect_isa();

// f(std::integral_constant<int, rows>()) for a run-time count of rows from 1 to MB: the
// kernels' tile sizes are template parameters
template <int MB, class F>
inline void with_rows(int64_t rows, F&& f) {
  if (rows == MB) return f(std::integral_constant<int, MB>());
  if constexpr (MB > 1) with_rows<MB - 1>(rows, f);
}

// ---------------------------------------------------------------- linear: y = x W^T + b

// the 8 lanes of a dot-product accumulator, added in a fixed order
inline float fold(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// fold() of four accumulators at once: lane i of the result is fold(v_i), bit for bit
// ((t0 + t2) + (t1 + t3) with t = low half + high half, transposed so one add serves four)
inline __m128 fold4(__m256 a, __m256 b, __m256 c, __m256 d) {
  __m128 ta = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  __m128 tb = _mm_add_ps(_mm256_castps256_ps128(b), _mm256_extractf128_ps(b, 1));
  __m128 tc = _mm_add_ps(_mm256_castps256_ps128(c), _mm256_extractf128_ps(c, 1));
  __m128 td = _mm_add_ps(_mm256_castps256_ps128(d), _mm256_extractf128_ps(d, 1));
  _MM_TRANSPOSE4_PS(ta, tb, tc, td);  // ta = lane 0 of each, tb = lane 1, ...
  return _mm_add_ps(_mm_add_ps(ta, tc), _mm_add_ps(tb, td));
}

// fold() of each of n accumulators into sums, four at a time (fold4: the same additions
// as fold(), fewer instructions)
inline void fold_all(const __m256* acc, int n, float* sums) {
  int c = 0;
  for (; c + 4 <= n; c += 4) _mm_storeu_ps(sums + c, fold4(acc[c], acc[c + 1], acc[c + 2], acc[c + 3]));
  for (; c < n; ++c) sums[c] = fold(acc[c]);
}

// MB rows of x against NB rows of W. Each output is one accumulator: x[m, k:k+8] *
// W[n, k:k+8] summed lane-wise over k in steps of 8, then folded, then the tail
// k % 8 added one by one, then the bias. The blocking only decides which outputs are
// computed together, never the order within one.
template <int MB, int NB>
inline void dot_block(const float* x, int64_t ldx, const float* w, int64_t K, float* y,
                      int64_t ldy, const float* bias) {
  __m256 acc[MB][NB];
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < NB; ++j) acc[i][j] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    if ((k & 15) == 0)  // the next block's weight rows, while this one computes
      for (int j = 0; j < NB; ++j) _mm_prefetch(reinterpret_cast<const char*>(w + (NB + j) * K + k), _MM_HINT_T0);
    __m256 wv[NB];
    for (int j = 0; j < NB; ++j) wv[j] = _mm256_loadu_ps(w + j * K + k);
    for (int i = 0; i < MB; ++i) {
      const __m256 xv = _mm256_loadu_ps(x + i * ldx + k);
      for (int j = 0; j < NB; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
  float sums[MB * NB];
  fold_all(&acc[0][0], MB * NB, sums);
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < NB; ++j) {
      float s = sums[i * NB + j];
      for (int64_t t = k; t < K; ++t) s += x[i * ldx + t] * w[j * K + t];
      if (bias != nullptr) s += bias[j];
      y[i * ldy + j] = s;
    }
}

// MB rows of x against W's rows [n0, n1)
template <int MB>
void dot_rows(const float* x, int64_t K, const float* w, const float* bias, float* y,
              int64_t N, int64_t n0, int64_t n1) {
  // one row streams best against many weight rows at once; four rows share each load
  constexpr int NB = MB == 1 ? 8 : (MB == 2 ? 6 : 3);
  int64_t n = n0;
  for (; n + NB <= n1; n += NB)
    dot_block<MB, NB>(x, K, w + n * K, K, y + n, N, bias == nullptr ? nullptr : bias + n);
  for (; n < n1; ++n)
    dot_block<MB, 1>(x, K, w + n * K, K, y + n, N, bias == nullptr ? nullptr : bias + n);
}

void linear_range16(const float* x, int64_t M, int64_t K, const float* w, const float* bias,
                    float* y, int64_t N, int64_t n0, int64_t n1);

void linear_range(const float* x, int64_t M, int64_t K, const float* w, const float* bias,
                  float* y, int64_t N, int64_t n0, int64_t n1) {
  if (g_isa == kIsaAvx512) return linear_range16(x, M, K, w, bias, y, N, n0, n1);
  // a slab of W small enough to stay in L2 while a tile of x's rows passes over it
  const int64_t slab = std::max<int64_t>(24, (96 * 1024) / (K * 4) / 24 * 24);
  constexpr int64_t kTile = 64;  // rows of x per pass over a slab
  for (int64_t s0 = n0; s0 < n1; s0 += slab) {
    const int64_t s1 = std::min(n1, s0 + slab);
    for (int64_t m0 = 0; m0 < M; m0 += kTile) {
      const int64_t m1 = std::min(M, m0 + kTile);
      int64_t m = m0;
      for (; m + 4 <= m1; m += 4) dot_rows<4>(x + m * K, K, w, bias, y + m * N, N, s0, s1);
      switch (m1 - m) {
        case 3: dot_rows<3>(x + m * K, K, w, bias, y + m * N, N, s0, s1); break;
        case 2: dot_rows<2>(x + m * K, K, w, bias, y + m * N, N, s0, s1); break;
        case 1: dot_rows<1>(x + m * K, K, w, bias, y + m * N, N, s0, s1); break;
        default: break;
      }
    }
  }
}


// ------------------------------------------- quantised linear: GGUF blocks, read in place
//
// W's rows as a GGUF file stores them: blocks of 32 weights, each with its float16
// scale (and, for Q4_1 and Q5_1, its minimum), or the K-quants' superblocks of 256
// weights (Q4_K, Q5_K: eight sub-blocks of 32, each with a 6-bit scale and minimum under
// the superblock's float16 ones; Q6_K: sixteen of 16 with an 8-bit scale each), or plain
// float16 or bfloat16 numbers (F16, BF16: taken 32 at a time, as if blocks). A block is turned into float32 weights in registers, by exactly the formulas
// of gguf-py's dequantize (d * q, or d * q + m, each operation rounded once), and those
// weights go through the same accumulation as dot_block above. So a quantised product
// equals, bit for bit, the float32 product over the dequantised matrix, while reading a
// sixth (Q4) to a quarter (Q8_0) of the bytes. These serve blocks as the file has them:
// embedding lookups, and matrices whose row count is not a multiple of 8 (the rest are
// packed at load: below).

// ggml's type numbers
enum QType : int {
  kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kBF16 = 30
};

constexpr int64_t kBlock = 32;

// weights in a block as the file stores it: 32, or a K-quant's superblock of 256
constexpr int64_t block_weights(int64_t t) { return t == kQ4_K || t == kQ5_K || t == kQ6_K ? 256 : kBlock; }
// what a type's blocks hold besides quants and d: a minimum (Q4_1, Q5_1), fifth bits (Q5),
// Q4_K's 6-bit scales and minimums (Q4_K, Q5_K)
constexpr bool has_min(int64_t t) { return t == kQ4_1 || t == kQ5_1; }
constexpr bool fifth_bits(int64_t t) { return t == kQ5_0 || t == kQ5_1 || t == kQ5_K; }
constexpr bool k_scales(int64_t t) { return t == kQ4_K || t == kQ5_K; }
// numbers, not blocks: widened in registers, never packed
constexpr bool plain(int64_t t) { return t == kF16 || t == kBF16; }

// the bytes of a block; 0: not a type the kernels read
constexpr int64_t block_bytes(int64_t t) {
  switch (t) {
    case kQ4_0: return 18;
    case kQ4_1: return 20;
    case kQ5_0: return 22;
    case kQ5_1: return 24;
    case kQ8_0: return 34;
    case kQ4_K: return 144;
    case kQ5_K: return 176;
    case kQ6_K: return 210;
    case kF16:
    case kBF16: return 2 * kBlock;
    default: return 0;
  }
}

// f(std::integral_constant<int, T>()) for block type t, one the kernels read
template <class F>
inline void with_type(int64_t t, F&& f) {
  switch (t) {
    case kQ4_0: return f(std::integral_constant<int, kQ4_0>());
    case kQ4_1: return f(std::integral_constant<int, kQ4_1>());
    case kQ5_0: return f(std::integral_constant<int, kQ5_0>());
    case kQ5_1: return f(std::integral_constant<int, kQ5_1>());
    case kQ8_0: return f(std::integral_constant<int, kQ8_0>());
    case kQ4_K: return f(std::integral_constant<int, kQ4_K>());
    case kQ5_K: return f(std::integral_constant<int, kQ5_K>());
    case kQ6_K: return f(std::integral_constant<int, kQ6_K>());
    case kF16: return f(std::integral_constant<int, kF16>());
    case kBF16: return f(std::integral_constant<int, kBF16>());
    default: TORCH_CHECK(false, "unsupported block type ", t);
  }
}

inline float half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// the eight bytes at p as int32 lanes (zero-extended)
inline __m256i bytes8(const uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

// the 6-bit scale and minimum of sub-block j (0..7) from a Q4_K or Q5_K superblock's
// twelve scale bytes s (gguf-py's get_scale_min)
inline void scale_min(const uint8_t* s, int j, int& sc, int& mn) {
  if (j < 4) {
    sc = s[j] & 63;
    mn = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
    mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// a block's scales as dequant8 takes them, each made by gguf-py's formula in float32:
// d (and the minimum m of Q4_1, Q5_1) for a block of 32; Q4_K's and Q5_K's d * sc and
// dmin * min for each sub-block of 32, Q6_K's d * sc for each of 16, exact products (an
// 11-bit significand times a 6- or 8-bit integer)
struct Scales {
  float d[16], m[8];
};

template <int T>
inline Scales block_scales(const uint8_t* b) {
  Scales s{};
  if constexpr (plain(T)) {
    return s;
  } else if constexpr (k_scales(T)) {
    const float d = half(b), dmin = half(b + 2);
    for (int j = 0; j < 8; ++j) {
      int sc, mn;
      scale_min(b + 4, j, sc, mn);
      s.d[j] = d * static_cast<float>(sc);
      s.m[j] = dmin * static_cast<float>(mn);
    }
  } else if constexpr (T == kQ6_K) {
    const float d = half(b + 208);
    for (int j = 0; j < 16; ++j) s.d[j] = d * static_cast<float>(static_cast<int8_t>(b[192 + j]));
  } else {
    s.d[0] = half(b);
    s.m[0] = has_min(T) ? half(b + 2) : 0.0f;
  }
  return s;
}

// 8 weights of a block as float32: group g (weights 8g .. 8g + 7; 4 groups in a block of
// 32, 32 in a superblock), by gguf-py's formulas. The bytes are zero- or sign-extended
// straight from memory; a Q4 or Q5 weight j < 16 has its low four bits in the low nibble
// of byte j, weight 16 + j in its high nibble, and a Q5 weight j its fifth bit in bit j
// of the block's 32-bit qh; Q4_K's and Q5_K's sub-block 2c takes the low nibbles of its
// bytes 32c .. 32c + 31, sub-block 2c + 1 their high nibbles, and Q5_K's weight l of
// sub-block j its fifth bit in bit j of qh[l]; Q6_K's weight 128h + 32t + l
// takes its low four bits from a nibble of ql[64h + 32 (t % 2) + l] (the low one for
// t < 2) and its top two from bits 2t, 2t + 1 of qh[32h + l], and is less 32. d * q is
// exact in float32 (at most 19 bits times 6), so d * q + m rounds once either way: one
// fused multiply-add (or multiply-subtract) gives the result of gguf-py's two
// operations. A float16 or bfloat16 number widens to float32 exactly.
template <int T>
inline __m256 dequant8(const uint8_t* b, int g, const Scales& s) {
  const __m256i low = _mm256_set1_epi32(0x0F);
  if constexpr (T == kF16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16 * g)));
  } else if constexpr (T == kBF16) {  // the top half of a float32
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16 * g)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  } else if constexpr (T == kQ8_0) {
    const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 2 + 8 * g));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), _mm256_set1_ps(s.d[0]));
  } else if constexpr (k_scales(T)) {
    const int j = g / 4, l = 8 * (g % 4);  // the sub-block, the weight in it
    const __m256i bytes = bytes8(b + (T == kQ4_K ? 16 : 48) + 32 * (j / 2) + l);
    __m256i v = j % 2 == 0 ? _mm256_and_si256(bytes, low) : _mm256_srli_epi32(bytes, 4);
    if constexpr (T == kQ5_K) {
      const __m256i fifth = _mm256_and_si256(_mm256_srl_epi32(bytes8(b + 16 + l), _mm_cvtsi32_si128(j)), _mm256_set1_epi32(1));
      v = _mm256_or_si256(v, _mm256_slli_epi32(fifth, 4));
    }
    return _mm256_fmsub_ps(_mm256_set1_ps(s.d[j]), _mm256_cvtepi32_ps(v), _mm256_set1_ps(s.m[j]));
  } else if constexpr (T == kQ6_K) {
    const int h = g / 16, t = g / 4 % 4, l = 8 * (g % 4);  // weights 128h + 32t + l ..
    const __m256i bytes = bytes8(b + 64 * h + 32 * (t % 2) + l);
    const __m256i low4 = t < 2 ? _mm256_and_si256(bytes, low) : _mm256_srli_epi32(bytes, 4);
    const __m256i top2 = _mm256_and_si256(_mm256_srl_epi32(bytes8(b + 128 + 32 * h + l), _mm_cvtsi32_si128(2 * t)),
                                          _mm256_set1_epi32(3));
    const __m256i v = _mm256_sub_epi32(_mm256_or_si256(low4, _mm256_slli_epi32(top2, 4)), _mm256_set1_epi32(32));
    return _mm256_mul_ps(_mm256_set1_ps(s.d[g / 2]), _mm256_cvtepi32_ps(v));
  } else {
    constexpr int64_t at = (has_min(T) ? 4 : 2) + (fifth_bits(T) ? 4 : 0);  // the nibbles
    const __m256i bytes = bytes8(b + at + 8 * (g & 1));
    __m256i v = g < 2 ? _mm256_and_si256(bytes, low) : _mm256_srli_epi32(bytes, 4);
    if constexpr (fifth_bits(T)) {
      uint32_t qh;
      std::memcpy(&qh, b + at - 4, 4);
      const __m256i bit = _mm256_add_epi32(_mm256_set1_epi32(8 * g), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      const __m256i fifth = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(qh)), bit), _mm256_set1_epi32(1));
      v = _mm256_or_si256(v, _mm256_slli_epi32(fifth, 4));
    }
    if constexpr (T == kQ4_0) v = _mm256_sub_epi32(v, _mm256_set1_epi32(8));
    if constexpr (T == kQ5_0) v = _mm256_sub_epi32(v, _mm256_set1_epi32(16));
    const __m256 d = _mm256_set1_ps(s.d[0]);
    if constexpr (has_min(T)) return _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(v), _mm256_set1_ps(s.m[0]));
    return _mm256_mul_ps(d, _mm256_cvtepi32_ps(v));
  }
}

// dot_block's sums over NB quantised rows of W (row j's blocks at w + j * row_bytes):
// each accumulator takes x[k:k+8] * W[j, k:k+8] for k in steps of 8, in order, as there
template <int T, int MB, int NB>
inline void qdot_block(const float* x, int64_t ldx, const uint8_t* w, int64_t row_bytes,
                       int64_t K, float* y, int64_t ldy, const float* bias) {
  constexpr int64_t bb = block_bytes(T), bw = block_weights(T);
  __m256 acc[MB][NB];
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < NB; ++j) acc[i][j] = _mm256_setzero_ps();
  for (int64_t k = 0, o = 0; k < K; k += bw, o += bb) {
    Scales s[NB];
    for (int j = 0; j < NB; ++j) {
      const uint8_t* b = w + j * row_bytes + o;
      for (int64_t line = 0; line < bb; line += 64)
        _mm_prefetch(reinterpret_cast<const char*>(b + (bb > 64 ? bb : 4 * bb) + line), _MM_HINT_T0);
      if constexpr (!plain(T)) s[j] = block_scales<T>(b);
    }
    for (int g = 0; g < bw / 8; ++g)  // the rows side by side: NB independent chains
      for (int j = 0; j < NB; ++j) {
        const __m256 wv = dequant8<T>(w + j * row_bytes + o, g, s[j]);
        for (int i = 0; i < MB; ++i)
          acc[i][j] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i * ldx + k + 8 * g), wv, acc[i][j]);
      }
  }
  float sums[MB * NB];
  fold_all(&acc[0][0], MB * NB, sums);
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < NB; ++j) {
      float s = sums[i * NB + j];
      if (bias != nullptr) s += bias[j];
      y[i * ldy + j] = s;
    }
}

template <int T, int MB>
void qdot_rows(const float* x, int64_t K, const uint8_t* w, int64_t row_bytes,
               const float* bias, float* y, int64_t N, int64_t n0, int64_t n1) {
  // measured best on a 2-core AVX2 EPYC (F16 and BF16, one row: as many as linear's)
  constexpr int NB = MB == 1 ? (plain(T) ? 8 : (T == kQ8_0 ? 4 : 2)) : 2;
  int64_t n = n0;
  for (; n + NB <= n1; n += NB)
    qdot_block<T, MB, NB>(x, K, w + n * row_bytes, row_bytes, K, y + n, N,
                          bias == nullptr ? nullptr : bias + n);
  for (; n < n1; ++n)
    qdot_block<T, MB, 1>(x, K, w + n * row_bytes, row_bytes, K, y + n, N,
                         bias == nullptr ? nullptr : bias + n);
}

// rows [n0, n1) of W, written out as float32 (row-major, K per row)
template <int T>
void dequant_rows(const uint8_t* w, int64_t row_bytes, int64_t K, int64_t n0, int64_t n1, float* out) {
  constexpr int64_t bb = block_bytes(T), bw = block_weights(T);
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t k = 0, o = 0; k < K; k += bw, o += bb) {
      const uint8_t* b = w + n * row_bytes + o;
      const Scales s = block_scales<T>(b);
      for (int g = 0; g < bw / 8; ++g) _mm256_storeu_ps(out + (n - n0) * K + k + 8 * g, dequant8<T>(b, g, s));
    }
}

template <int T>
void qlinear_range(const float* x, int64_t M, int64_t K, const uint8_t* w, int64_t row_bytes,
                   const float* bias, float* y, int64_t N, int64_t n0, int64_t n1) {
  if (M <= 4) {  // decoding: each block is dequantised in registers, for all M rows at once
    switch (M) {
      case 4: qdot_rows<T, 4>(x, K, w, row_bytes, bias, y, N, n0, n1); break;
      case 3: qdot_rows<T, 3>(x, K, w, row_bytes, bias, y, N, n0, n1); break;
      case 2: qdot_rows<T, 2>(x, K, w, row_bytes, bias, y, N, n0, n1); break;
      default: qdot_rows<T, 1>(x, K, w, row_bytes, bias, y, N, n0, n1); break;
    }
    return;
  }
  // prompts and batches: a slab of W written out in float32 (it stays in L2) and run
  // through the float32 kernel, which sums in the same order
  const int64_t slab = std::max<int64_t>(24, (96 * 1024) / (K * 4) / 24 * 24);
  std::vector<float> buf(slab * K);
  for (int64_t s0 = n0; s0 < n1; s0 += slab) {
    const int64_t s1 = std::min(n1, s0 + slab);
    dequant_rows<T>(w, row_bytes, K, s0, s1, buf.data());
    // the float kernel indexes W and bias by absolute row: shift both to the slab
    linear_range(x, M, K, buf.data() - s0 * K, bias, y, N, s0, s1);
  }
}

// ---------------------------------------- packed blocks: eight rows side by side (at load)
//
// Decoding one row costs the work of turning blocks into floats and the bytes read (the
// layers' weights come from memory every token). Packed once at load, eight rows' blocks
// k sit together, in two layouts, and the blocks kPrefetch* ahead are fetched early.
//
// Q8_0: the eight float16 scales, then each row's 32 bytes as they are. A block costs one
// conversion of eight scales instead of one per row, one row of x meets eight rows of W
// with its block in registers, and the next blocks are fetched early (the matrix streams
// from memory half again as fast). The weights are made by dequant8's formula and summed
// in dot_block's order: the same bits as the float32 kernel over the dequantised matrix.
//
// The others (Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K): rows in lanes, in blocks of 32
// weights. A packed block of eight rows holds its high bits, then sixteen times eight
// bytes: byte r of the kk-th eight is row r's quants kk (low nibble) and 16 + kk (high
// nibble) of the block, GGUF's own byte for the blocks of 32; the K-quants' sub-blocks
// are regrouped that way at load. High bits: Q5's rows' 32-bit qh (bit i: weight i's
// fifth bit; Q5_K's gathered at load from its qh bytes); Q6_K's two
// sets of eight 32-bit words (bits 2i, 2i + 1 of the first: weight i's top two bits, of
// the second: weight 16 + i's, the upper bit flipped: as a signed 2-bit number, the top
// bits less 2, which a sign-extending shift puts in place with the quant's offset of
// 32 already taken). Before the blocks, their scales: the eight float16 d; (Q4_1, Q5_1)
// the eight minimums; a superblock's eight blocks follow the eight d and, for Q4_K and
// Q5_K, the eight dmin and the rows' twelve scale bytes as three 32-bit words each (the
// first four bytes of the eight rows, then the next four, then the last), for Q6_K the
// rows' sixteen int8 scales (scale s of row r at byte 8s + r). The bytes are the file's,
// rearranged: 144 for 256 Q4_K weights, 176 for Q5_K, 210 for Q6_K. One widening load
// and two conversions (Q5, Q6_K: and the high bits shifted in) give weights kk and
// 16 + kk of all eight rows, and each meets one element of x, broadcast. A block's sum is
// factored as gguf-py's formula allows, sum_k x_k (d q_k + m) = d sum_k x_k q_k +
// m sum_k x_k (Q4_0: m = -8 d, Q5_0: m = -16 d; a Q4_K or Q5_K sub-block's d is d * sc
// and its m is -dmin * min, gguf-py's exact products), so the quants are used as the small integers
// they are and no weight is ever made: per eight weights one conversion and one fused
// multiply-add, not one and two, and no horizontal sums. Q6_K's block is two sub-blocks
// of 16, each with its scale d * sc, and its quants come less 32 (signed). Every
// output is summed in one order, whatever its batch (fdot_block):
//   lo = x_0 q_0 + ... + x_15 q_15 and hi = x_16 q_16 + ... + x_31 q_31, each a chain of
//   fused multiply-adds from 0; then acc = fma(d, lo + hi, acc), acc = fma(m, sx, acc)
//   (Q6_K: acc = fma(d_lo, lo, acc), acc = fma(d_hi, hi, acc)), block after block along
//   K from acc = 0 (sx: the block's sum of x, block_sums); then + bias.
// The arithmetic is not the float32 kernel's (a block's terms are grouped differently),
// so the last bits of a product differ from it; the weights are the same numbers.

constexpr int kPacked = 0x100;  // flag on a block type: the blocks are packed
constexpr int64_t kPackRows = 8;
// how many packed blocks of 32 ahead to fetch (measured on the bundled model, 2 cores: the
// Q4_1 layers' products 5.2 ms with 4 ahead, 3.97 with 16, 3.41 with 32; Q8_0 the same
// from 16)
constexpr int64_t kPrefetchQ4 = 32, kPrefetchQ8 = 16;

// a packed unit of eight rows: a block of 32, or a K-quant's superblock of eight
template <int T>
constexpr int64_t pack_subs() { return block_weights(T) / kBlock; }
// the unit's scales: d, and the minimums (Q4_1, Q5_1), or a superblock's d and dmin and
// scale words (Q4_K, Q5_K) or int8 scales (Q6_K)
template <int T>
constexpr int64_t pack_head() {
  switch (T) {
    case kQ4_1:
    case kQ5_1: return 2 * 2 * kPackRows;
    case kQ4_K:
    case kQ5_K: return 2 * 2 * kPackRows + 12 * kPackRows;
    case kQ6_K: return 2 * kPackRows + 16 * kPackRows;
    default: return 2 * kPackRows;
  }
}
// a block's high bits (Q5's qh, Q6_K's two words a row), before its quants
template <int T>
constexpr int64_t pack_high() { return fifth_bits(T) ? 4 * kPackRows : (T == kQ6_K ? 8 * kPackRows : 0); }
template <int T>
constexpr int64_t pack_quants() { return T == kQ8_0 ? 32 : 16; }  // per row
template <int T>
constexpr int64_t pack_block() { return pack_high<T>() + pack_quants<T>() * kPackRows; }
template <int T>
constexpr int64_t pack_bytes() { return pack_head<T>() + pack_subs<T>() * pack_block<T>(); }
// 0: a type qpack does not pack (F16, BF16)
inline int64_t pack_bytes(int64_t t) {
  int64_t bytes = 0;
  with_type(t, [&](auto type) {
    if constexpr (!plain(decltype(type)::value)) bytes = pack_bytes<decltype(type)::value>();
  });
  return bytes;
}

// group g (0..3) of row j's Q8_0 block as float32 weights, by dequant8's formula
inline __m256 unpack8(const uint8_t* p, int j, int g, __m256 d) {
  const uint8_t* q = p + pack_head<kQ8_0>() + pack_quants<kQ8_0>() * j + 8 * g;
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q)))), d);
}

// a packed block's eight scales as float32
inline __m256 scales8(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// MB rows of x against rows [j0, j0 + JB) of one packed Q8_0 group: dot_block's sums
template <int MB, int JB>
inline void pdot_block(const float* x, int64_t ldx, const uint8_t* group, int64_t K, int j0,
                       float* y, int64_t ldy, const float* bias) {
  constexpr int64_t bb = pack_bytes<kQ8_0>();
  __m256 acc[MB][JB];
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < JB; ++j) acc[i][j] = _mm256_setzero_ps();
  const uint8_t* p = group;
  for (int64_t k = 0; k < K; k += kBlock, p += bb) {
    for (int64_t line = 0; line < bb; line += 64)
      _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchQ8 * bb + line), _MM_HINT_T0);
    // x's block in registers for up to two rows; more are read from L1 as they are used
    __m256 xv[MB <= 2 ? MB : 1][4];
    if constexpr (MB <= 2)
      for (int i = 0; i < MB; ++i)
        for (int g = 0; g < 4; ++g) xv[i][g] = _mm256_loadu_ps(x + i * ldx + k + 8 * g);
    alignas(32) float sc[kPackRows];
    _mm256_store_ps(sc, scales8(p));
    for (int j = 0; j < JB; ++j) {
      const __m256 d = _mm256_broadcast_ss(sc + j0 + j);
      for (int g = 0; g < 4; ++g) {
        const __m256 wv = unpack8(p, j0 + j, g, d);
        for (int i = 0; i < MB; ++i) {
          __m256 xi;
          if constexpr (MB <= 2) xi = xv[i][g];
          else xi = _mm256_loadu_ps(x + i * ldx + k + 8 * g);
          acc[i][j] = _mm256_fmadd_ps(xi, wv, acc[i][j]);
        }
      }
    }
  }
  float sums[MB * JB];
  fold_all(&acc[0][0], MB * JB, sums);
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < JB; ++j) {
      float s = sums[i * JB + j];
      if (bias != nullptr) s += bias[j0 + j];
      y[i * ldy + j0 + j] = s;
    }
}

// MB rows of x against packed Q8_0 groups [g0, g1): all eight rows at once for one row of
// x (x's block in registers), fewer side by side for more (the accumulators must fit)
template <int MB>
void pdot_groups(const float* x, int64_t K, const uint8_t* w, int64_t group_bytes,
                 const float* bias, float* y, int64_t N, int64_t g0, int64_t g1) {
  constexpr int JB = MB == 1 ? 8 : (MB == 2 ? 4 : (MB <= 4 ? 2 : 1));
  for (int64_t g = g0; g < g1; ++g)
    for (int j0 = 0; j0 < kPackRows; j0 += JB)
      pdot_block<MB, JB>(x, K, w + g * group_bytes, K, j0, y + g * kPackRows, N,
                         bias == nullptr ? nullptr : bias + g * kPackRows);
}

// Q8_0 groups [g0, g1) written out as float32 rows (row-major, K per row), as dequant_rows
void unpack_groups(const uint8_t* w, int64_t group_bytes, int64_t K, int64_t g0, int64_t g1, float* out) {
  for (int64_t g = g0; g < g1; ++g)
    for (int64_t k = 0; k < K; k += kBlock) {
      const uint8_t* p = w + g * group_bytes + k / kBlock * pack_bytes<kQ8_0>();
      alignas(32) float sc[kPackRows];
      _mm256_store_ps(sc, scales8(p));
      for (int j = 0; j < kPackRows; ++j) {
        float* row = out + ((g - g0) * kPackRows + j) * K + k;
        for (int q = 0; q < 4; ++q) _mm256_storeu_ps(row + 8 * q, unpack8(p, j, q, _mm256_broadcast_ss(sc + j)));
      }
    }
}


// the sum of each block of 32 of x (M rows of K, contiguous) into sx (M * K / 32), in one
// fixed order: the four groups of 8 added lane-wise, (g0 + g1) + (g2 + g3), then fold()
void block_sums(const float* x, int64_t M, int64_t K, float* sx) {
  for (int64_t i = 0; i < M * (K / kBlock); ++i) {
    const float* b = x + i * kBlock;
    const __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(b), _mm256_loadu_ps(b + 8)),
                                   _mm256_add_ps(_mm256_loadu_ps(b + 16), _mm256_loadu_ps(b + 24)));
    sx[i] = fold(s);
  }
}

// bit `from` of each lane moved to bit `to`
inline __m256i move_bits(__m256i v, int from, int to) {
  return from >= to ? _mm256_srli_epi32(v, from - to) : _mm256_slli_epi32(v, to - from);
}

// weights kk and 16 + kk of a packed block's eight rows (p: the block) as float32
// lanes: their quants (Q6_K's less 32), from the nibbles and the high bits in h0 (Q5:
// the rows' qh) and h1 (Q6_K: h0 weights 0..15's, h1 16..31's)
template <int T>
inline void quants8(const uint8_t* p, int kk, __m256i h0, __m256i h1, __m256& lo, __m256& hi) {
  const __m256i v = bytes8(p + pack_high<T>() + 8 * kk);
  __m256i l = _mm256_and_si256(v, _mm256_set1_epi32(0x0F)), u = _mm256_srli_epi32(v, 4);
  if constexpr (fifth_bits(T)) {
    const __m256i fifth = _mm256_set1_epi32(0x10);
    l = _mm256_or_si256(l, _mm256_and_si256(move_bits(h0, kk, 4), fifth));
    u = _mm256_or_si256(u, _mm256_and_si256(move_bits(h0, 16 + kk, 4), fifth));
  } else if constexpr (T == kQ6_K) {  // the top bits, less 2, sign-extended to bits 4 up
    const __m256i low = _mm256_set1_epi32(0x0F);
    l = _mm256_or_si256(l, _mm256_andnot_si256(low, _mm256_srai_epi32(_mm256_slli_epi32(h0, 30 - 2 * kk), 26)));
    u = _mm256_or_si256(u, _mm256_andnot_si256(low, _mm256_srai_epi32(_mm256_slli_epi32(h1, 30 - 2 * kk), 26)));
  }
  lo = _mm256_cvtepi32_ps(l);
  hi = _mm256_cvtepi32_ps(u);
}

// the eight int8 scales at p, times d
inline __m256 times8(__m256 d, const uint8_t* p) {
  return _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))));
}

// bits [at, at + 8) of each lane (a byte of a scale word), shifted down and masked
inline __m256i field8(__m256i v, int at, int mask) {
  return _mm256_and_si256(_mm256_srl_epi32(v, _mm_cvtsi32_si128(at)), _mm256_set1_epi32(mask));
}

// a Q4_K or Q5_K sub-block j's 6-bit scale and minimum in each row's lane, from the rows'
// scale words (at `words`: scale_min's formulas, a byte of the twelve being a byte of a
// word)
inline void scale_min8(const uint8_t* words, int j, __m256i& sc, __m256i& mn) {
  const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(words));
  const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(words + 4 * kPackRows));
  const int at = 8 * (j % 4);
  if (j < 4) {
    sc = field8(w0, at, 63);
    mn = field8(w1, at, 63);
  } else {
    const __m256i w2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(words + 8 * kPackRows));
    sc = _mm256_or_si256(field8(w2, at, 0x0F), field8(w0, at + 2, 0x30));
    mn = _mm256_or_si256(field8(w2, at + 4, 0x0F), field8(w1, at + 2, 0x30));
  }
}

// the factors of block j of a packed unit's eight rows (p: the unit): d, and m, the
// factor of the block's sum of x (Q6_K: the scales of its two sub-blocks of 16)
template <int T>
inline void factors8(const uint8_t* p, int j, __m256& d, __m256& m) {
  d = scales8(p);
  if constexpr (T == kQ6_K) {
    m = times8(d, p + 2 * kPackRows + 16 * j + kPackRows);
    d = times8(d, p + 2 * kPackRows + 16 * j);
  } else if constexpr (k_scales(T)) {
    __m256i sc, mn;
    scale_min8(p + 4 * kPackRows, j, sc, mn);
    const __m256 dmin = scales8(p + 2 * kPackRows);
    d = _mm256_mul_ps(d, _mm256_cvtepi32_ps(sc));
    m = _mm256_mul_ps(_mm256_xor_ps(dmin, _mm256_set1_ps(-0.0f)), _mm256_cvtepi32_ps(mn));
  } else if constexpr (has_min(T)) {
    m = scales8(p + 2 * kPackRows);
  } else {
    m = _mm256_mul_ps(d, _mm256_set1_ps(T == kQ4_0 ? -8.0f : -16.0f));
  }
}

// MB rows of x (sx: their block sums) against GB packed groups, the first at w: each
// output in the order above. MB x GB x 2 chains run side by side. x and sx are a tile of
// MB rows as interleave() lays them out: block b's element kk of row i at
// x[(b * 32 + kk) * MB + i], its sum at sx[b * MB + i] (a row's broadcasts sit at fixed
// offsets, with no address kept per row).
template <int T, int MB, int GB>
inline void fdot_block(const float* x, int64_t K, const float* sx, const uint8_t* w,
                       int64_t group_bytes, float* y, int64_t ldy, const float* bias) {
  constexpr int64_t ub = pack_bytes<T>(), subs = pack_subs<T>();
  const int64_t units = K / (kBlock * subs);
  __m256 acc[MB][GB];
  for (int i = 0; i < MB; ++i)
    for (int g = 0; g < GB; ++g) acc[i][g] = _mm256_setzero_ps();
  for (int64_t u = 0; u < units; ++u) {
    const uint8_t* p[GB];
    for (int g = 0; g < GB; ++g) {
      p[g] = w + g * group_bytes + u * ub;
      for (int64_t line = 0; line < ub; line += 64)
        _mm_prefetch(reinterpret_cast<const char*>(p[g] + kPrefetchQ4 / subs * ub + line), _MM_HINT_T0);
    }
    for (int j = 0; j < subs; ++j) {
      const int64_t b = u * subs + j;  // the block of 32 along K
      const uint8_t* q[GB];
      __m256i h0[GB], h1[GB];
      for (int g = 0; g < GB; ++g) {
        q[g] = p[g] + pack_head<T>() + j * pack_block<T>();
        h0[g] = pack_high<T>() > 0 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q[g]))
                                   : _mm256_setzero_si256();
        h1[g] = T == kQ6_K ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q[g] + 4 * kPackRows))
                           : _mm256_setzero_si256();
      }
      __m256 lo[MB][GB], hi[MB][GB];
      for (int i = 0; i < MB; ++i)
        for (int g = 0; g < GB; ++g) lo[i][g] = hi[i][g] = _mm256_setzero_ps();
      const float* xb = x + b * kBlock * MB;
#pragma GCC unroll 16
      for (int kk = 0; kk < 16; ++kk)
#pragma GCC unroll 4
        for (int g = 0; g < GB; ++g) {
          __m256 ql, qh;
          quants8<T>(q[g], kk, h0[g], h1[g], ql, qh);
          for (int i = 0; i < MB; ++i) {
            lo[i][g] = _mm256_fmadd_ps(_mm256_broadcast_ss(xb + kk * MB + i), ql, lo[i][g]);
            hi[i][g] = _mm256_fmadd_ps(_mm256_broadcast_ss(xb + (16 + kk) * MB + i), qh, hi[i][g]);
          }
        }
      for (int g = 0; g < GB; ++g) {
        __m256 d, m;
        factors8<T>(p[g], j, d, m);
        for (int i = 0; i < MB; ++i) {
          if constexpr (T == kQ6_K) {
            acc[i][g] = _mm256_fmadd_ps(d, lo[i][g], acc[i][g]);
            acc[i][g] = _mm256_fmadd_ps(m, hi[i][g], acc[i][g]);
          } else {
            acc[i][g] = _mm256_fmadd_ps(d, _mm256_add_ps(lo[i][g], hi[i][g]), acc[i][g]);
            acc[i][g] = _mm256_fmadd_ps(m, _mm256_broadcast_ss(sx + b * MB + i), acc[i][g]);
          }
        }
      }
    }
  }
  for (int i = 0; i < MB; ++i)
    for (int g = 0; g < GB; ++g) {
      __m256 s = acc[i][g];
      if (bias != nullptr) s = _mm256_add_ps(s, _mm256_loadu_ps(bias + g * kPackRows));
      _mm256_storeu_ps(y + i * ldy + g * kPackRows, s);
    }
}

// MB rows of x against packed groups [g0, g1): two groups side by side for one or two
// rows (enough independent chains), one for more (the chains must fit in registers)
template <int T, int MB>
void fdot_groups(const float* x, int64_t K, const float* sx, const uint8_t* w,
                 int64_t group_bytes, const float* bias, float* y, int64_t N, int64_t g0,
                 int64_t g1) {
  constexpr int GB = MB <= 2 ? 2 : 1;
  auto run = [&](auto gb, int64_t g) {
    fdot_block<T, MB, decltype(gb)::value>(x, K, sx, w + g * group_bytes, group_bytes,
                                           y + g * kPackRows, N,
                                           bias == nullptr ? nullptr : bias + g * kPackRows);
  };
  int64_t g = g0;
  for (; g + GB <= g1; g += GB) run(std::integral_constant<int, GB>(), g);
  for (; g < g1; ++g) run(std::integral_constant<int, 1>(), g);
}

// rows of x per tile, AVX2 and AVX-512 (AVX2 on 2 Xeon cores, the bundled model's layer
// products for 512 rows: tiles of 4 837 ms, 6 776, 8 905, its registers spilt)
constexpr int64_t kTile8 = 6, kTile16 = 8;

// x (M rows of K) and sx (their block sums) copied tile by tile (`tile` rows, fewer in the
// last) into the order fdot_block reads them: element kk of block b of row i of a tile
// of mb rows starting at row m at xt[m * K + (b * 32 + kk) * mb + i], its block sum at
// st[m * K / 32 + b * mb + i]
void interleave(const float* x, const float* sx, int64_t M, int64_t K, int64_t tile, float* xt,
                float* st) {
  const int64_t blocks = K / kBlock;
  for (int64_t m = 0; m < M; m += tile) {
    const int64_t mb = std::min(tile, M - m);
    for (int64_t i = 0; i < mb; ++i) {
      for (int64_t k = 0; k < K; ++k) xt[m * K + k * mb + i] = x[(m + i) * K + k];
      for (int64_t b = 0; b < blocks; ++b) st[m * blocks + b * mb + i] = sx[(m + i) * blocks + b];
    }
  }
}


// room for n float32 numbers on a 64-byte boundary (no 512-bit load straddles two cache
// lines), the calling thread's own for each Use, kept and grown from call to call:
// megabytes freshly allocated per call cost 100,000 page faults in a 512-token forward
// (a fifth of its time)
enum Use { kPairedX, kSlab };
template <Use U>
float* scratch(int64_t n) {
  thread_local std::unique_ptr<float[], void (*)(void*)> room(nullptr, std::free);
  thread_local int64_t held = 0;
  if (n > held) {
    room.reset(static_cast<float*>(std::aligned_alloc(64, (n * 4 + 63) / 64 * 64)));
    TORCH_CHECK(room != nullptr, "out of memory for ", n, " floats");
    held = n;
  }
  return room.get();
}

// ------------------------------------------------ AVX-512: the same sums, sixteen lanes
//
// Compiled for AVX-512 (F, BW, VL, DQ) in this same build and chosen at run time where
// the CPU and the OS take it (isa()). A 512-bit register holds two packed groups side by
// side, lanes 0..7 one group's eight rows and lanes 8..15 the next's, and every lane does
// exactly the operations, in the order, of fdot_block's lane for that row: so each output
// has the same bits whichever width computed it, and a tail group left over goes through
// the 256-bit kernel.

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq")

// the eight float16 values at a and the eight at b as sixteen float32 lanes
inline __m512 halves16(const uint8_t* a, const uint8_t* b) {
  const __m256i h = _mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1);
  return _mm512_cvtph_ps(h);
}

// the eight bytes at a and the eight at b as sixteen int32 lanes (zero-extended)
inline __m512i bytes16(const uint8_t* a, const uint8_t* b) {
  return _mm512_cvtepu8_epi32(_mm_castpd_si128(_mm_loadh_pd(
      _mm_castsi128_pd(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a))),
      reinterpret_cast<const double*>(b))));
}

// the eight 32-bit words at a and the eight at b as sixteen lanes
inline __m512i words16(const uint8_t* a, const uint8_t* b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a))),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)), 1);
}

inline __m512i move_bits(__m512i v, int from, int to) {
  return from >= to ? _mm512_srli_epi32(v, from - to) : _mm512_slli_epi32(v, to - from);
}

// quants8 for two packed blocks side by side (p0's rows in lanes 0..7, p1's in 8..15)
template <int T>
inline void quants16(const uint8_t* p0, const uint8_t* p1, int kk, __m512i h0, __m512i h1, __m512& lo,
                     __m512& hi) {
  const int64_t at = pack_high<T>() + 8 * kk;
  const __m512i v = bytes16(p0 + at, p1 + at);
  __m512i l = _mm512_and_si512(v, _mm512_set1_epi32(0x0F)), u = _mm512_srli_epi32(v, 4);
  if constexpr (fifth_bits(T)) {
    const __m512i fifth = _mm512_set1_epi32(0x10);
    l = _mm512_or_si512(l, _mm512_and_si512(move_bits(h0, kk, 4), fifth));
    u = _mm512_or_si512(u, _mm512_and_si512(move_bits(h0, 16 + kk, 4), fifth));
  } else if constexpr (T == kQ6_K) {  // quants8's, the masks and ors in one ternary-logic op
    const __m512i low = _mm512_set1_epi32(0x0F);
    const __m512i tl = _mm512_srai_epi32(_mm512_slli_epi32(h0, 30 - 2 * kk), 26);
    const __m512i tu = _mm512_srai_epi32(_mm512_slli_epi32(h1, 30 - 2 * kk), 26);
    l = _mm512_ternarylogic_epi32(v, tl, low, 0xE4);  // low ? v : tl, bit by bit
    u = _mm512_ternarylogic_epi32(u, tu, low, 0xE4);
  }
  lo = _mm512_cvtepi32_ps(l);
  hi = _mm512_cvtepi32_ps(u);
}

inline __m512i field16(__m512i v, int at, int mask) {
  return _mm512_and_si512(_mm512_srl_epi32(v, _mm_cvtsi32_si128(at)), _mm512_set1_epi32(mask));
}

// scale_min8 for two packed units side by side
inline void scale_min16(const uint8_t* words0, const uint8_t* words1, int j, __m512i& sc, __m512i& mn) {
  const __m512i w0 = words16(words0, words1);
  const __m512i w1 = words16(words0 + 4 * kPackRows, words1 + 4 * kPackRows);
  const int at = 8 * (j % 4);
  if (j < 4) {
    sc = field16(w0, at, 63);
    mn = field16(w1, at, 63);
  } else {
    const __m512i w2 = words16(words0 + 8 * kPackRows, words1 + 8 * kPackRows);
    sc = _mm512_or_si512(field16(w2, at, 0x0F), field16(w0, at + 2, 0x30));
    mn = _mm512_or_si512(field16(w2, at + 4, 0x0F), field16(w1, at + 2, 0x30));
  }
}

// the eight int8 scales at a and the eight at b, times d
inline __m512 times16(__m512 d, const uint8_t* a, const uint8_t* b) {
  const __m128i bytes = _mm_castpd_si128(_mm_loadh_pd(
      _mm_castsi128_pd(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a))), reinterpret_cast<const double*>(b)));
  return _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes)));
}

// factors8 for two packed units side by side
template <int T>
inline void factors16(const uint8_t* p0, const uint8_t* p1, int j, __m512& d, __m512& m) {
  d = halves16(p0, p1);
  if constexpr (T == kQ6_K) {
    const int64_t at = 2 * kPackRows + 16 * j;
    m = times16(d, p0 + at + kPackRows, p1 + at + kPackRows);
    d = times16(d, p0 + at, p1 + at);
  } else if constexpr (k_scales(T)) {
    __m512i sc, mn;
    scale_min16(p0 + 4 * kPackRows, p1 + 4 * kPackRows, j, sc, mn);
    const __m512 dmin = halves16(p0 + 2 * kPackRows, p1 + 2 * kPackRows);
    d = _mm512_mul_ps(d, _mm512_cvtepi32_ps(sc));
    m = _mm512_mul_ps(_mm512_xor_ps(dmin, _mm512_set1_ps(-0.0f)), _mm512_cvtepi32_ps(mn));
  } else if constexpr (has_min(T)) {
    m = halves16(p0 + 2 * kPackRows, p1 + 2 * kPackRows);
  } else {
    m = _mm512_mul_ps(d, _mm512_set1_ps(T == kQ4_0 ? -8.0f : -16.0f));
  }
}

// MB rows of x against 2 * GP packed groups, the first at w, two a register:
// fdot_block's sums
template <int T, int MB, int GP>
inline void fdot_block16(const float* x, int64_t K, const float* sx, const uint8_t* w,
                         int64_t group_bytes, float* y, int64_t ldy, const float* bias) {
  // (x and sx: a tile of MB rows as interleave() lays them out, as for fdot_block)
  constexpr int64_t ub = pack_bytes<T>(), subs = pack_subs<T>();
  const int64_t units = K / (kBlock * subs);
  __m512 acc[MB][GP];
  for (int i = 0; i < MB; ++i)
    for (int g = 0; g < GP; ++g) acc[i][g] = _mm512_setzero_ps();
  for (int64_t u = 0; u < units; ++u) {
    const uint8_t* p[2 * GP];
    for (int g = 0; g < 2 * GP; ++g) {
      p[g] = w + g * group_bytes + u * ub;
      for (int64_t line = 0; line < ub; line += 64)
        _mm_prefetch(reinterpret_cast<const char*>(p[g] + kPrefetchQ4 / subs * ub + line), _MM_HINT_T0);
    }
    for (int j = 0; j < subs; ++j) {
      const int64_t b = u * subs + j;  // the block of 32 along K
      const uint8_t* q[2 * GP];
      for (int g = 0; g < 2 * GP; ++g) q[g] = p[g] + pack_head<T>() + j * pack_block<T>();
      __m512i h0[GP], h1[GP];
      for (int g = 0; g < GP; ++g) {
        h0[g] = pack_high<T>() > 0 ? words16(q[2 * g], q[2 * g + 1]) : _mm512_setzero_si512();
        h1[g] = T == kQ6_K ? words16(q[2 * g] + 4 * kPackRows, q[2 * g + 1] + 4 * kPackRows) : _mm512_setzero_si512();
      }
      __m512 lo[MB][GP], hi[MB][GP];
      for (int i = 0; i < MB; ++i)
        for (int g = 0; g < GP; ++g) lo[i][g] = hi[i][g] = _mm512_setzero_ps();
      const float* xb = x + b * kBlock * MB;
#pragma GCC unroll 16
      for (int kk = 0; kk < 16; ++kk)
#pragma GCC unroll 2
        for (int g = 0; g < GP; ++g) {
          __m512 ql, qh;
          quants16<T>(q[2 * g], q[2 * g + 1], kk, h0[g], h1[g], ql, qh);
          for (int i = 0; i < MB; ++i) {
            lo[i][g] = _mm512_fmadd_ps(_mm512_set1_ps(xb[kk * MB + i]), ql, lo[i][g]);
            hi[i][g] = _mm512_fmadd_ps(_mm512_set1_ps(xb[(16 + kk) * MB + i]), qh, hi[i][g]);
          }
        }
      for (int g = 0; g < GP; ++g) {
        __m512 d, m;
        factors16<T>(p[2 * g], p[2 * g + 1], j, d, m);
        for (int i = 0; i < MB; ++i) {
          if constexpr (T == kQ6_K) {
            acc[i][g] = _mm512_fmadd_ps(d, lo[i][g], acc[i][g]);
            acc[i][g] = _mm512_fmadd_ps(m, hi[i][g], acc[i][g]);
          } else {
            acc[i][g] = _mm512_fmadd_ps(d, _mm512_add_ps(lo[i][g], hi[i][g]), acc[i][g]);
            acc[i][g] = _mm512_fmadd_ps(m, _mm512_set1_ps(sx[b * MB + i]), acc[i][g]);
          }
        }
      }
    }
  }
  for (int i = 0; i < MB; ++i)
    for (int g = 0; g < GP; ++g) {
      __m512 s = acc[i][g];
      if (bias != nullptr) s = _mm512_add_ps(s, _mm512_loadu_ps(bias + 2 * g * kPackRows));
      _mm512_storeu_ps(y + i * ldy + 2 * g * kPackRows, s);
    }
}

// MB rows of x against packed groups [g0, g1): four at a time for one or two rows (enough
// independent chains), else two; a group left over goes through fdot_block (the same bits)
template <int T, int MB>
void fdot_groups16(const float* x, int64_t K, const float* sx, const uint8_t* w,
                   int64_t group_bytes, const float* bias, float* y, int64_t N, int64_t g0,
                   int64_t g1) {
  constexpr int GP = MB <= 2 ? 2 : 1;
  auto at = [&](int64_t g) { return bias == nullptr ? nullptr : bias + g * kPackRows; };
  int64_t g = g0;
  for (; g + 2 * GP <= g1; g += 2 * GP)
    fdot_block16<T, MB, GP>(x, K, sx, w + g * group_bytes, group_bytes, y + g * kPackRows, N, at(g));
  for (; g + 2 <= g1; g += 2)
    fdot_block16<T, MB, 1>(x, K, sx, w + g * group_bytes, group_bytes, y + g * kPackRows, N, at(g));
  if (g < g1) fdot_block<T, MB, 1>(x, K, sx, w + g * group_bytes, group_bytes, y + g * kPackRows, N, at(g));
}


// ---------------------------------------------- AVX-512: linear's sums, two rows a register
//
// dot_block's accumulators two at a time: lanes 0..7 of a 512-bit register hold one
// output's eight lanes, lanes 8..15 the next output's (the next row of W), each doing
// dot_block's operations in its order; then each half is folded as fold() does. The same
// bits as linear_range at AVX2.

// fold() of each half of MB x NP paired accumulators: sums[i * 2 * NP + 2 * p] from
// lanes 0..7 of acc[i][p], the next from lanes 8..15
template <int MB, int NP>
inline void fold_pairs(const __m512 (&acc)[MB][NP], float* sums) {
  __m256 halves[MB * 2 * NP];
  for (int i = 0; i < MB; ++i)
    for (int p = 0; p < NP; ++p) {
      halves[(i * NP + p) * 2] = _mm512_castps512_ps256(acc[i][p]);
      halves[(i * NP + p) * 2 + 1] = _mm512_extractf32x8_ps(acc[i][p], 1);
    }
  fold_all(halves, MB * 2 * NP, sums);
}

// MB rows of x against 2 * NP rows of W (dot_block<MB, 2 * NP>'s sums)
template <int MB, int NP>
inline void dot_block16(const float* x, int64_t ldx, const float* w, int64_t K, float* y,
                        int64_t ldy, const float* bias) {
  __m512 acc[MB][NP];
  for (int i = 0; i < MB; ++i)
    for (int p = 0; p < NP; ++p) acc[i][p] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    if ((k & 15) == 0)  // the next block's weight rows, while this one computes
      for (int j = 0; j < 2 * NP; ++j)
        _mm_prefetch(reinterpret_cast<const char*>(w + (2 * NP + j) * K + k), _MM_HINT_T0);
    __m512 wv[NP];
    for (int p = 0; p < NP; ++p)
      wv[p] = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(w + 2 * p * K + k)),
                                 _mm256_loadu_ps(w + (2 * p + 1) * K + k), 1);
    for (int i = 0; i < MB; ++i) {
      const __m512 xv = _mm512_broadcast_f32x8(_mm256_loadu_ps(x + i * ldx + k));
      for (int p = 0; p < NP; ++p) acc[i][p] = _mm512_fmadd_ps(xv, wv[p], acc[i][p]);
    }
  }
  float sums[MB * 2 * NP];
  fold_pairs<MB, NP>(acc, sums);
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < 2 * NP; ++j) {
      float s = sums[i * 2 * NP + j];
      for (int64_t t = k; t < K; ++t) s += x[i * ldx + t] * w[j * K + t];
      if (bias != nullptr) s += bias[j];
      y[i * ldy + j] = s;
    }
}

// rows of x that pass over W together, and pairs of W's rows they meet (24 accumulators;
// measured on 2 cores of a Xeon, 512 rows: 8 x 3 522 ms, 12 x 2 555, 6 x 2 591, AVX2 657)
constexpr int kRowsX16 = 8, kPairsW16 = 3;

// dot_rows with two rows of W a register; rows left over go through dot_block (the same
// bits)
template <int MB>
void dot_rows16(const float* x, int64_t K, const float* w, const float* bias, float* y,
                int64_t N, int64_t n0, int64_t n1) {
  constexpr int NP = MB == 1 ? 4 : kPairsW16;
  int64_t n = n0;
  for (; n + 2 * NP <= n1; n += 2 * NP)
    dot_block16<MB, NP>(x, K, w + n * K, K, y + n, N, bias == nullptr ? nullptr : bias + n);
  for (; n < n1; ++n)
    dot_block<MB, 1>(x, K, w + n * K, K, y + n, N, bias == nullptr ? nullptr : bias + n);
}


// linear_range's tiles, with dot_rows16
void linear_range16(const float* x, int64_t M, int64_t K, const float* w, const float* bias,
                    float* y, int64_t N, int64_t n0, int64_t n1) {
  const int64_t slab = std::max<int64_t>(24, (96 * 1024) / (K * 4) / 24 * 24);
  constexpr int64_t kTile = 64;
  for (int64_t s0 = n0; s0 < n1; s0 += slab) {
    const int64_t s1 = std::min(n1, s0 + slab);
    for (int64_t m0 = 0; m0 < M; m0 += kTile) {
      const int64_t m1 = std::min(M, m0 + kTile);
      for (int64_t m = m0; m < m1; m += kRowsX16)
        with_rows<kRowsX16>(std::min<int64_t>(kRowsX16, m1 - m), [&](auto rows) {
          dot_rows16<decltype(rows)::value>(x + m * K, K, w, bias, y + m * N, N, s0, s1);
        });
    }
  }
}

// MB rows of x against rows [j0, j0 + 2 * NP) of one packed Q8_0 group, two rows a
// register (pdot_block's sums: the weights by unpack8's formula, dot_block's order)
template <int MB, int NP>
inline void pdot_block16(const float* x, int64_t ldx, const uint8_t* group, int64_t K, int j0,
                         float* y, int64_t ldy, const float* bias) {
  constexpr int64_t bb = pack_bytes<kQ8_0>();
  __m512 acc[MB][NP];
  for (int i = 0; i < MB; ++i)
    for (int p = 0; p < NP; ++p) acc[i][p] = _mm512_setzero_ps();
  __m512i pick[NP];  // lanes 0..7 row j0 + 2p's scale, lanes 8..15 the next row's
  for (int p = 0; p < NP; ++p)
    pick[p] = _mm512_inserti32x8(_mm512_set1_epi32(j0 + 2 * p), _mm256_set1_epi32(j0 + 2 * p + 1), 1);
  const uint8_t* b = group;
  for (int64_t k = 0; k < K; k += kBlock, b += bb) {
    for (int64_t line = 0; line < bb; line += 64)
      _mm_prefetch(reinterpret_cast<const char*>(b + kPrefetchQ8 * bb + line), _MM_HINT_T0);
    const __m512 sc = _mm512_castps256_ps512(scales8(b));
    for (int p = 0; p < NP; ++p) {
      const __m512 d = _mm512_permutexvar_ps(pick[p], sc);
      const uint8_t* q0 = b + pack_head<kQ8_0>() + pack_quants<kQ8_0>() * (j0 + 2 * p);
      const uint8_t* q1 = q0 + pack_quants<kQ8_0>();
      for (int g = 0; g < 4; ++g) {
        const __m128i bytes = _mm_castpd_si128(_mm_loadh_pd(
            _mm_castsi128_pd(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q0 + 8 * g))),
            reinterpret_cast<const double*>(q1 + 8 * g)));
        const __m512 wv = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes)), d);
        for (int i = 0; i < MB; ++i) {
          const __m512 xv = _mm512_broadcast_f32x8(_mm256_loadu_ps(x + i * ldx + k + 8 * g));
          acc[i][p] = _mm512_fmadd_ps(xv, wv, acc[i][p]);
        }
      }
    }
  }
  float sums[MB * 2 * NP];
  fold_pairs<MB, NP>(acc, sums);
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < 2 * NP; ++j) {
      float s = sums[i * 2 * NP + j];
      if (bias != nullptr) s += bias[j0 + j];
      y[i * ldy + j0 + j] = s;
    }
}

// pdot_groups with two rows a register: all eight rows of a group at once for up to four
// rows of x, four at a time for more
template <int MB>
void pdot_groups16(const float* x, int64_t K, const uint8_t* w, int64_t group_bytes,
                   const float* bias, float* y, int64_t N, int64_t g0, int64_t g1) {
  constexpr int NP = MB <= 4 ? 4 : 2;
  for (int64_t g = g0; g < g1; ++g)
    for (int j0 = 0; j0 < kPackRows; j0 += 2 * NP)
      pdot_block16<MB, NP>(x, K, w + g * group_bytes, K, j0, y + g * kPackRows, N,
                           bias == nullptr ? nullptr : bias + g * kPackRows);
}


// ---------------------------------- AVX-512: packed Q8_0 for many rows, two rows of x a register
//
// A prompt's rows against a slab of groups unpacked to float32 rows (unpack_groups): lanes
// 0..7 of a 512-bit accumulator hold one row of x's eight lanes of dot_block's accumulator,
// lanes 8..15 the next row's, against the same row of W, read once and broadcast to both
// halves. x is laid out in pairs once per call (pair_rows), so the inner loop is loads and
// fused multiply-adds alone: dot_block's sums, the same bits as the float32 kernel over
// the dequantised matrix. (2 Zen 5 cores, the Q8_0 SmolLM2-135M's layer products for 512
// rows, in one run: 410 ms through linear_range16's two rows of W a register, 349 here.)

// pairs of x's rows per tile, and rows of W per block (24 accumulators)
constexpr int kPairsX16 = 4, kRowsW16 = 6;

// pairs [p0, p1) of x's M rows into xp: pair p's k-step s (row 2p's x[8s .. 8s + 8), then row
// 2p + 1's) at xp[(p * K / 8 + s) * 16]; the second row of an odd last pair is zeros
void pair_rows(const float* x, int64_t M, int64_t K, int64_t p0, int64_t p1, float* xp) {
  const int64_t steps = K / 8;
  for (int64_t p = p0; p < p1; ++p)
    for (int h = 0; h < 2; ++h) {
      const int64_t i = 2 * p + h;
      for (int64_t s = 0; s < steps; ++s) {
        const __m256 v = i < M ? _mm256_loadu_ps(x + i * K + 8 * s) : _mm256_setzero_ps();
        _mm256_storeu_ps(xp + (p * steps + s) * 16 + 8 * h, v);
      }
    }
}

// MP pairs of x's rows (`rows` of them real) against NB rows of W (float32, K apart):
// dot_block's sums, then + bias
template <int MP, int NB>
inline void pdot_pairs16(const float* xp, int64_t K, const float* w, float* y, int64_t ldy,
                         const float* bias, int64_t rows) {
  __m512 acc[MP][NB];
  for (int p = 0; p < MP; ++p)
    for (int j = 0; j < NB; ++j) acc[p][j] = _mm512_setzero_ps();
  const int64_t steps = K / 8;
  for (int64_t s = 0; s < steps; ++s) {
    if ((s & 1) == 0)  // the next block's weight rows, while this one computes
      for (int j = 0; j < NB; ++j) _mm_prefetch(reinterpret_cast<const char*>(w + (NB + j) * K + 8 * s), _MM_HINT_T0);
    __m512 xv[MP];
    for (int p = 0; p < MP; ++p) xv[p] = _mm512_load_ps(xp + (p * steps + s) * 16);
    for (int j = 0; j < NB; ++j) {
      const __m512 wv = _mm512_broadcast_f32x8(_mm256_load_ps(w + j * K + 8 * s));
      for (int p = 0; p < MP; ++p) acc[p][j] = _mm512_fmadd_ps(xv[p], wv, acc[p][j]);
    }
  }
  float sums[MP * 2 * NB];  // row 2p + h, column j at sums[(p * NB + j) * 2 + h]
  fold_pairs<MP, NB>(acc, sums);
  for (int p = 0; p < MP; ++p)
    for (int h = 0; h < 2 && 2 * p + h < rows; ++h)
      for (int j = 0; j < NB; ++j) {
        float v = sums[(p * NB + j) * 2 + h];
        if (bias != nullptr) v += bias[j];
        y[(2 * p + h) * ldy + j] = v;
      }
}

// M rows of x (xp: in pairs, pair_rows) against packed Q8_0 groups [g0, g1): a slab of
// groups small enough for L2 unpacked, then every tile of x's pairs over it
void pdot_rows16(const float* xp, int64_t M, int64_t K, const uint8_t* w, int64_t group_bytes,
                 const float* bias, float* y, int64_t N, int64_t g0, int64_t g1) {
  const int64_t slab = std::max<int64_t>(3, (96 * 1024) / (K * 4) / 24 * 3);  // groups
  float* buf = scratch<kSlab>(slab * kPackRows * K);
  for (int64_t s0 = g0; s0 < g1; s0 += slab) {
    const int64_t s1 = std::min(g1, s0 + slab), n0 = s0 * kPackRows, n1 = s1 * kPackRows;
    unpack_groups(w, group_bytes, K, s0, s1, buf);
    for (int64_t m = 0; m < M; m += 2 * kPairsX16) {
      const int64_t rows = std::min<int64_t>(2 * kPairsX16, M - m);
      with_rows<kPairsX16>((rows + 1) / 2, [&](auto pairs) {
        constexpr int MP = decltype(pairs)::value;
        for (int64_t n = n0; n < n1; n += kRowsW16)
          with_rows<kRowsW16>(std::min<int64_t>(kRowsW16, n1 - n), [&](auto cols) {
            pdot_pairs16<MP, decltype(cols)::value>(xp + m * K, K, buf + (n - n0) * K, y + m * N + n, N,
                                                    bias == nullptr ? nullptr : bias + n, rows);
          });
      });
    }
  }
}


// ------------------------ AVX-512: the factored types for many rows, their quants widened once
//
// A prompt's rows against a slab of groups whose quants are widened to float32 once per
// call (widen_pair) and held in L2: a pair of groups' block of 32 becomes 32 registers'
// worth of quants, quant kk of its sixteen rows in one (quants16's numbers), then its two
// factors (factors16's). The inner loop is then a load of the quants and fused
// multiply-adds with x broadcast from memory, where fdot_block16 spends up to a dozen
// integer operations (Q6_K's) on every two loads' quants. Each lane does fdot_block16's
// operations for its row in their order (fdot_block's sums): the same bits, whatever the
// batch. (2 Zen 5 cores, one thread, 512 rows x 1536 x 576 in one A/B run: Q6_K 5.67 ->
// 4.15 ms, Q4_K 4.66 -> 4.32, Q4_0 5.87 -> 4.54.)

// floats a widened pair holds per block of 32: 32 quants and 2 factors, sixteen lanes each
constexpr int64_t kWideBlock = 34 * 16;
// rows of x per tile (lo, hi and acc of each: 24 registers; measured against four rows
// and two pairs of groups, 4.1 against 4.3 ms at 512 x 1536 x 576)
constexpr int kRowsWide = 8;

// packed groups g and g + 1 (p: g's first unit), or g alone (`both` false: lanes 8..15
// zero), widened into out: block b's quant kk at out[b * kWideBlock + 16 * kk], its
// factors d and m (Q6_K: its sub-blocks' d * sc) after the 32 quants
template <int T>
void widen_pair(const uint8_t* p, int64_t group_bytes, int64_t K, bool both, float* out) {
  constexpr int64_t ub = pack_bytes<T>(), subs = pack_subs<T>();
  const __mmask16 lanes = both ? 0xFFFF : 0x00FF;
  for (int64_t u = 0; u < K / (kBlock * subs); ++u) {
    const uint8_t* p0 = p + u * ub;
    const uint8_t* p1 = both ? p0 + group_bytes : p0;
    for (int j = 0; j < subs; ++j) {
      float* o = out + (u * subs + j) * kWideBlock;
      const uint8_t* q0 = p0 + pack_head<T>() + j * pack_block<T>();
      const uint8_t* q1 = p1 + pack_head<T>() + j * pack_block<T>();
      const __m512i h0 = pack_high<T>() > 0 ? words16(q0, q1) : _mm512_setzero_si512();
      const __m512i h1 = T == kQ6_K ? words16(q0 + 4 * kPackRows, q1 + 4 * kPackRows) : _mm512_setzero_si512();
      for (int kk = 0; kk < 16; ++kk) {
        __m512 lo, hi;
        quants16<T>(q0, q1, kk, h0, h1, lo, hi);
        _mm512_store_ps(o + 16 * kk, _mm512_maskz_mov_ps(lanes, lo));
        _mm512_store_ps(o + 16 * (16 + kk), _mm512_maskz_mov_ps(lanes, hi));
      }
      __m512 d, m;
      factors16<T>(p0, p1, j, d, m);
      _mm512_store_ps(o + 16 * 32, _mm512_maskz_mov_ps(lanes, d));
      _mm512_store_ps(o + 16 * 33, _mm512_maskz_mov_ps(lanes, m));
    }
  }
}

// MB rows of x (K apart; sx: their block sums, K / 32 apart) against a widened pair (wq):
// fdot_block16's sums, then + bias, in the lanes `lanes` says
template <int T, int MB>
inline void wdot_block16(const float* x, int64_t K, const float* sx, const float* wq, float* y,
                         int64_t ldy, const float* bias, __mmask16 lanes) {
  const int64_t blocks = K / kBlock;
  __m512 acc[MB];
  const float* xr[MB];  // each row's block b: a pointer a row, its elements at fixed offsets
  for (int i = 0; i < MB; ++i) {
    acc[i] = _mm512_setzero_ps();
    xr[i] = x + i * K;
  }
  for (int64_t b = 0; b < blocks; ++b) {
    const float* q = wq + b * kWideBlock;
    __m512 lo[MB], hi[MB];
    for (int i = 0; i < MB; ++i) lo[i] = hi[i] = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int kk = 0; kk < 16; ++kk) {
      const __m512 ql = _mm512_load_ps(q + 16 * kk), qh = _mm512_load_ps(q + 16 * (16 + kk));
      for (int i = 0; i < MB; ++i) {
        lo[i] = _mm512_fmadd_ps(_mm512_set1_ps(xr[i][kk]), ql, lo[i]);
        hi[i] = _mm512_fmadd_ps(_mm512_set1_ps(xr[i][16 + kk]), qh, hi[i]);
      }
    }
    const __m512 d = _mm512_load_ps(q + 16 * 32), m = _mm512_load_ps(q + 16 * 33);
    for (int i = 0; i < MB; ++i) {
      if constexpr (T == kQ6_K) {
        acc[i] = _mm512_fmadd_ps(d, lo[i], acc[i]);
        acc[i] = _mm512_fmadd_ps(m, hi[i], acc[i]);
      } else {
        acc[i] = _mm512_fmadd_ps(d, _mm512_add_ps(lo[i], hi[i]), acc[i]);
        acc[i] = _mm512_fmadd_ps(m, _mm512_set1_ps(sx[i * blocks + b]), acc[i]);
      }
      xr[i] += kBlock;
    }
  }
  for (int i = 0; i < MB; ++i) {
    __m512 s = acc[i];
    if (bias != nullptr) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(lanes, bias));
    _mm512_mask_storeu_ps(y + i * ldy, lanes, s);
  }
}

// M rows of x against packed groups [g0, g1): a slab of pairs of groups small enough for
// L2 widened, then every tile of x's rows over it
template <int T>
void wdot_rows16(const float* x, int64_t M, int64_t K, const float* sx, const uint8_t* w,
                 int64_t group_bytes, const float* bias, float* y, int64_t N, int64_t g0, int64_t g1) {
  const int64_t pair = K / kBlock * kWideBlock;                            // floats
  const int64_t slab = 2 * std::max<int64_t>(1, (384 * 1024) / (pair * 4));  // groups
  float* buf = scratch<kSlab>(slab / 2 * pair);
  for (int64_t s0 = g0; s0 < g1; s0 += slab) {
    const int64_t s1 = std::min(g1, s0 + slab);
    for (int64_t g = s0; g < s1; g += 2)
      widen_pair<T>(w + g * group_bytes, group_bytes, K, g + 1 < s1, buf + (g - s0) / 2 * pair);
    for (int64_t m = 0; m < M; m += kRowsWide)
      with_rows<kRowsWide>(std::min<int64_t>(kRowsWide, M - m), [&](auto rows) {
        for (int64_t g = s0; g < s1; g += 2)
          wdot_block16<T, decltype(rows)::value>(x + m * K, K, sx + m * (K / kBlock),
                                                 buf + (g - s0) / 2 * pair, y + m * N + g * kPackRows, N,
                                                 bias == nullptr ? nullptr : bias + g * kPackRows,
                                                 g + 1 < s1 ? 0xFFFF : 0x00FF);
      });
  }
}


#pragma GCC pop_options

// M rows of x (sx: their block sums; both interleaved in tiles of kTile16 rows if Wide, else
// kTile8) against packed groups [g0, g1), on AVX-512 if Wide: the tiles pass over a run
// of groups small enough to stay in L2
template <int T, bool Wide>
void fdot_rows(const float* x, int64_t M, int64_t K, const float* sx, const uint8_t* w,
               int64_t group_bytes, const float* bias, float* y, int64_t N, int64_t g0,
               int64_t g1) {
  constexpr int64_t tile = Wide ? kTile16 : kTile8;
  const int64_t run = std::max<int64_t>(2, (128 * 1024) / group_bytes);
  const int64_t blocks = K / kBlock;
  for (int64_t r0 = g0; r0 < g1; r0 += run) {
    const int64_t r1 = std::min(g1, r0 + run);
    for (int64_t m = 0; m < M; m += tile) {
      const float* xm = x + m * K;
      const float* sm = sx + m * blocks;
      float* ym = y + m * N;
      with_rows<tile>(std::min(tile, M - m), [&](auto rows) {
        constexpr int MB = decltype(rows)::value;
        if constexpr (Wide) fdot_groups16<T, MB>(xm, K, sm, w, group_bytes, bias, ym, N, r0, r1);
        else fdot_groups<T, MB>(xm, K, sm, w, group_bytes, bias, ym, N, r0, r1);
      });
    }
  }
}

// M rows of x against packed Q8_0 groups [g0, g1) (AVX-512 takes more than eight rows
// through pdot_rows16)
void pdot_rows(const float* x, int64_t M, int64_t K, const uint8_t* w, int64_t group_bytes,
               const float* bias, float* y, int64_t N, int64_t g0, int64_t g1) {
  if (M > 8) {
    // prompts and batches at AVX2: a slab of float32 rows in L2 through the float32
    // kernel (from 16 rows it beats the blocks unpacked in registers)
    const int64_t slab = std::max<int64_t>(3, (96 * 1024) / (K * 4) / 24 * 3);  // groups
    std::vector<float> buf(slab * kPackRows * K);
    for (int64_t s0 = g0; s0 < g1; s0 += slab) {
      const int64_t s1 = std::min(g1, s0 + slab);
      unpack_groups(w, group_bytes, K, s0, s1, buf.data());
      const int64_t n0 = s0 * kPackRows;
      linear_range(x, M, K, buf.data() - n0 * K, bias, y, N, n0, s1 * kPackRows);
    }
    return;
  }
  // decoding: the blocks unpacked in registers for all M rows at once
  with_rows<8>(M, [&](auto rows) {
    constexpr int MB = decltype(rows)::value;
    if (g_isa == kIsaAvx512) pdot_groups16<MB>(x, K, w, group_bytes, bias, y, N, g0, g1);
    else pdot_groups<MB>(x, K, w, group_bytes, bias, y, N, g0, g1);
  });
}

// the quants of block c (weights 32c .. 32c + 31) of a K-quant superblock b, unsigned, as
// bytes (dequant8's reading of the layouts)
template <int T>
inline void sub_quants(const uint8_t* b, int c, uint8_t* q) {
  for (int i = 0; i < 32; ++i) {
    if constexpr (T == kQ6_K) {
      const int h = c / 4, t = c % 4;
      const int low4 = (b[64 * h + 32 * (t % 2) + i] >> (t < 2 ? 0 : 4)) & 0x0F;
      q[i] = static_cast<uint8_t>(low4 | (((b[128 + 32 * h + i] >> (2 * t)) & 3) << 4));
    } else {
      q[i] = (b[(T == kQ4_K ? 16 : 48) + 32 * (c / 2) + i] >> (4 * (c % 2))) & 0x0F;
      if constexpr (T == kQ5_K) q[i] |= ((b[16 + i] >> c) & 1) << 4;
    }
  }
}

// Q6_K's top two bits of quants q[0..15] as one word, the upper one flipped: bits 2i,
// 2i + 1 for quant i, as a 2-bit signed number its top bits less 2
inline uint32_t top_bits(const uint8_t* q) {
  uint32_t word = 0;
  for (int i = 0; i < 16; ++i) word |= static_cast<uint32_t>((q[i] >> 4) ^ 2) << (2 * i);
  return word;
}

// groups [g0, g1) of blocks w (N, units per row) packed into out, in the layouts above
template <int T>
void pack_groups(const uint8_t* w, int64_t row_bytes, int64_t units, int64_t g0, int64_t g1, uint8_t* out) {
  for (int64_t g = g0; g < g1; ++g)
    for (int64_t u = 0; u < units; ++u) {
      uint8_t* p = out + (g * units + u) * pack_bytes<T>();
      for (int64_t j = 0; j < kPackRows; ++j) {
        const uint8_t* blk = w + (g * kPackRows + j) * row_bytes + u * block_bytes(T);
        std::memcpy(p + 2 * j, blk + (T == kQ6_K ? 208 : 0), 2);  // the float16 scale
        if constexpr (T == kQ8_0) {
          std::memcpy(p + pack_head<T>() + pack_quants<T>() * j, blk + 2, 32);
        } else if constexpr (block_weights(T) > kBlock) {
          if constexpr (k_scales(T)) {
            std::memcpy(p + 2 * (kPackRows + j), blk + 2, 2);  // dmin
            for (int i = 0; i < 3; ++i) std::memcpy(p + 4 * kPackRows * (1 + i) + 4 * j, blk + 4 + 4 * i, 4);
          } else {
            for (int i = 0; i < 16; ++i) p[2 * kPackRows + kPackRows * i + j] = blk[192 + i];  // int8 scales
          }
          for (int c = 0; c < pack_subs<T>(); ++c) {
            uint8_t q[32];
            sub_quants<T>(blk, c, q);
            uint8_t* block = p + pack_head<T>() + c * pack_block<T>();
            if constexpr (T == kQ6_K) {
              const uint32_t top[2] = {top_bits(q), top_bits(q + 16)};
              std::memcpy(block + 4 * j, top, 4);
              std::memcpy(block + 4 * (kPackRows + j), top + 1, 4);
            }
            if constexpr (T == kQ5_K) {
              uint32_t qh = 0;
              for (int i = 0; i < 32; ++i) qh |= static_cast<uint32_t>(q[i] >> 4) << i;
              std::memcpy(block + 4 * j, &qh, 4);
            }
            uint8_t* nibbles = block + pack_high<T>();
            for (int kk = 0; kk < 16; ++kk) nibbles[kPackRows * kk + j] = (q[kk] & 0x0F) | (q[16 + kk] << 4);
          }
        } else {
          constexpr int64_t at = (has_min(T) ? 4 : 2) + (fifth_bits(T) ? 4 : 0);  // the nibbles
          if constexpr (has_min(T)) std::memcpy(p + 2 * (kPackRows + j), blk + 2, 2);  // the minimum
          if constexpr (fifth_bits(T)) std::memcpy(p + pack_head<T>() + 4 * j, blk + at - 4, 4);  // qh
          const uint8_t* qs = blk + at;
          for (int kk = 0; kk < 16; ++kk) p[pack_head<T>() + pack_high<T>() + kPackRows * kk + j] = qs[kk];
        }
      }
    }
}

// ------------------------------------------------- exp (SiLU, GELU and the softmax)

// e^x for float32 lanes: Cephes' expf (range reduction by ln 2, degree-5 polynomial),
// about 1 ulp; deterministic per lane.
inline __m256 exp_ps(__m256 x) {
  x = _mm256_min_ps(x, _mm256_set1_ps(88.3762626647949f));
  x = _mm256_max_ps(x, _mm256_set1_ps(-88.3762626647949f));
  __m256 fx = _mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                            _mm256_set1_ps(0.5f));
  fx = _mm256_floor_ps(fx);
  x = _mm256_sub_ps(x, _mm256_mul_ps(fx, _mm256_set1_ps(0.693359375f)));
  x = _mm256_sub_ps(x, _mm256_mul_ps(fx, _mm256_set1_ps(-2.12194440e-4f)));
  const __m256 z = _mm256_mul_ps(x, x);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_add_ps(_mm256_mul_ps(p, x), _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_add_ps(_mm256_mul_ps(p, x), _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_add_ps(_mm256_mul_ps(p, x), _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_add_ps(_mm256_mul_ps(p, x), _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_add_ps(_mm256_mul_ps(p, x), _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(p, z), x), _mm256_set1_ps(1.0f));
  __m256i e = _mm256_add_epi32(_mm256_cvttps_epi32(fx), _mm256_set1_epi32(127));
  return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(e, 23)));
}

// split rows over threads in pieces of at least ~16K elements; small calls stay on one
inline int64_t grain(int64_t row_elems) {
  return std::max<int64_t>(1, (16 * 1024) / std::max<int64_t>(1, row_elems));
}

// f(b, e) over [begin, end) in pieces the threads take as they come free, each a
// multiple of `grain` from `begin` (about eight a thread), not one fixed share each: a
// thread the OS takes away for a while (an event loop's, a client's on a machine of two
// cores) then delays the call by its piece, not by half the call while the other waits.
// What a row gets does not depend on who computes it or with which neighbours.
template <class F>
void parallel(int64_t begin, int64_t end, int64_t grain, const F& f) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  const int64_t threads = at::get_num_threads();
  if (threads <= 1 || n <= grain || at::in_parallel_region()) {
    f(begin, end);
    return;
  }
  const int64_t want = (n + threads * 8 - 1) / (threads * 8);
  const int64_t piece = std::max<int64_t>(1, (want + grain - 1) / grain) * grain;
  const int64_t pieces = (n + piece - 1) / piece;
  std::atomic<int64_t> next{0};
  at::parallel_for(0, std::min(threads, pieces), 1, [&](int64_t, int64_t) {
    for (int64_t i = next.fetch_add(1, std::memory_order_relaxed); i < pieces;
         i = next.fetch_add(1, std::memory_order_relaxed))
      f(begin + i * piece, std::min(end, begin + (i + 1) * piece));
  });
}

void check(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.scalar_type() == at::kFloat, name, " must be float32");
  TORCH_CHECK(t.device().is_cpu(), name, " must be on the CPU");
}

// sum of squares of one row, in the same fixed order as a dot product
inline float sum_squares(const float* x, int64_t K) {
  __m256 acc = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    const __m256 v = _mm256_loadu_ps(x + k);
    acc = _mm256_fmadd_ps(v, v, acc);
  }
  float s = fold(acc);
  for (; k < K; ++k) s += x[k] * x[k];
  return s;
}

// y = w * (x * (1 / sqrt(mean(x^2) + eps))), Hugging Face's float32 RMSNorm
inline void norm_row(const float* x, const float* w, float eps, float* y, int64_t K) {
  const float r = 1.0f / std::sqrt(sum_squares(x, K) / static_cast<float>(K) + eps);
  for (int64_t k = 0; k < K; ++k) y[k] = w[k] * (x[k] * r);
}

// o = inv * sum_l p[l] V[row(l)], 8 * D8 floats of each V row (rows `stride` apart),
// summed over l in order; row(l) = (first + l) mod C, the ring a window layer's cache
// row is (first + l for every other layer: first + L <= C)
template <int D8>
inline void weighted_sum(const float* p, const float* V, int64_t stride, int64_t L, int64_t first,
                         int64_t C, float inv, float* o) {
  __m256 acc[D8];
  for (int i = 0; i < D8; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t l = 0, r = first; l < L; ++l, r = r + 1 == C ? 0 : r + 1) {
    const __m256 w = _mm256_set1_ps(p[l]);
    const float* v = V + r * stride;
    for (int i = 0; i < D8; ++i) acc[i] = _mm256_fmadd_ps(w, _mm256_loadu_ps(v + i * 8), acc[i]);
  }
  for (int i = 0; i < D8; ++i) _mm256_storeu_ps(o + i * 8, _mm256_mul_ps(acc[i], _mm256_set1_ps(inv)));
}

// weighted_sum over rows of D floats (a multiple of 8), a block of columns at a time:
// each output is the same sum in the same order whatever the blocks
inline void weighted_sum_rows(const float* p, const float* V, int64_t D, int64_t L, int64_t first,
                              int64_t C, float inv, float* o) {
  int64_t d = 0;
  for (; d + 128 <= D; d += 128) weighted_sum<16>(p, V + d, D, L, first, C, inv, o + d);
  for (; d + 64 <= D; d += 64) weighted_sum<8>(p, V + d, D, L, first, C, inv, o + d);
  for (; d < D; d += 8) weighted_sum<1>(p, V + d, D, L, first, C, inv, o + d);
}

// the bias's numbers, or nullptr where there is none
const float* bias_data(const c10::optional<at::Tensor>& bias, int64_t N) {
  if (!bias.has_value() || !bias->defined()) return nullptr;
  check(*bias, "bias");
  TORCH_CHECK(bias->is_contiguous() && bias->numel() == N, "bias shape mismatch");
  return bias->data_ptr<float>();
}

}  // namespace

// x (M, K) @ w (N, K)^T + bias (N)
at::Tensor linear(const at::Tensor& x_in, const at::Tensor& w, const c10::optional<at::Tensor>& bias) {
  check(x_in, "x");
  check(w, "weight");
  TORCH_CHECK(x_in.dim() == 2 && w.dim() == 2 && x_in.size(1) == w.size(1), "shape mismatch");
  TORCH_CHECK(w.is_contiguous(), "weight must be contiguous");
  const at::Tensor x = x_in.contiguous();
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  TORCH_CHECK(K > 0, "linear needs at least one input feature");
  at::Tensor y = at::empty({M, N}, x.options());
  const float* xp = x.data_ptr<float>();
  const float* wp = w.data_ptr<float>();
  const float* bp = bias_data(bias, N);
  float* yp = y.data_ptr<float>();
  // threads split the weight rows: each reads its own part of W once per call
  parallel(0, N, 48, [&](int64_t n0, int64_t n1) {
    linear_range(xp, M, K, wp, bp, yp, N, n0, n1);
  });
  return y;
}

namespace {

// RMSNorm of each row of x (contiguous, rows of its last dimension); with r (x's
// shape, contiguous), x += r in place first
at::Tensor norm_rows(at::Tensor& x, const float* r, const at::Tensor& w, double eps) {
  check(w, "weight");
  const int64_t K = x.size(-1);
  TORCH_CHECK(K > 0, "rows must not be empty");
  const int64_t M = x.numel() / K;
  TORCH_CHECK(w.numel() == K && w.is_contiguous(), "weight shape mismatch");
  at::Tensor y = at::empty_like(x);
  float* xp = x.data_ptr<float>();
  const float* wp = w.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  parallel(0, M, grain(K), [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      float* row = xp + m * K;
      if (r != nullptr)
        for (int64_t k = 0; k < K; ++k) row[k] = row[k] + r[m * K + k];
      norm_row(row, wp, static_cast<float>(eps), yp + m * K, K);
    }
  });
  return y;
}

}  // namespace

// RMSNorm of each row of x (M, K)
at::Tensor rms_norm(const at::Tensor& x_in, const at::Tensor& w, double eps) {
  check(x_in, "x");
  at::Tensor x = x_in.contiguous();  // only read: no residual to add
  return norm_rows(x, nullptr, w, eps);
}

// x += r (in place, the residual stream), then RMSNorm of the new x
at::Tensor add_rms_norm_(at::Tensor& x, const at::Tensor& r_in, const at::Tensor& w, double eps) {
  check(x, "x");
  check(r_in, "r");
  TORCH_CHECK(x.is_contiguous() && x.sizes() == r_in.sizes(), "x must be contiguous, r its shape");
  const at::Tensor r = r_in.contiguous();
  return norm_rows(x, r.data_ptr<float>(), w, eps);
}

namespace {

// gu (M, 2N): [gate | up] per row -> act(gate) * up (M, N); act8 on eight lanes, act1 its
// scalar form for a row's last N % 8
template <class Act8, class Act1>
at::Tensor gate_mul(const at::Tensor& gu_in, Act8 act8, Act1 act1) {
  check(gu_in, "gate_up");
  const at::Tensor gu = gu_in.contiguous();
  const int64_t N2 = gu.size(-1), N = N2 / 2;
  TORCH_CHECK(N2 > 0 && N2 % 2 == 0, "gate_up must have an even, non-zero last dimension");
  const int64_t M = gu.numel() / N2;
  std::vector<int64_t> shape(gu.sizes().begin(), gu.sizes().end());
  shape.back() = N;
  at::Tensor y = at::empty(shape, gu.options());
  const float* gp = gu.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  parallel(0, M, grain(N2), [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      const float* g = gp + m * N2;
      const float* u = g + N;
      float* out = yp + m * N;
      int64_t n = 0;
      for (; n + 8 <= N; n += 8)
        _mm256_storeu_ps(out + n, _mm256_mul_ps(act8(_mm256_loadu_ps(g + n)), _mm256_loadu_ps(u + n)));
      for (; n < N; ++n) out[n] = act1(g[n]) * u[n];
    }
  });
  return y;
}

// tanh of float32 lanes from exp_ps: sign(y) (1 - e) / (1 + e), e = e^(-2|y|)
inline __m256 tanh_ps(__m256 y) {
  const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  const __m256 e = exp_ps(_mm256_mul_ps(_mm256_andnot_ps(sign, y), _mm256_set1_ps(-2.0f)));
  const __m256 t = _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e));
  return _mm256_or_ps(t, _mm256_and_ps(sign, y));
}

// GELU's tanh form (PyTorch's gelu(approximate="tanh")): 0.5 x (1 + tanh(b (x + k x^3)))
constexpr float kGeluBeta = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluKappa = 0.044715f;

}  // namespace

// gu (M, 2N): [gate | up] per row -> silu(gate) * up (M, N)
at::Tensor silu_mul(const at::Tensor& gu) {
  const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  return gate_mul(
      gu,
      [&](__m256 g) { return _mm256_div_ps(g, _mm256_add_ps(one, exp_ps(_mm256_xor_ps(g, sign)))); },
      [](float g) { return g / (1.0f + std::exp(-g)); });
}

// gu (M, 2N): [gate | up] per row -> gelu_tanh(gate) * up (M, N), Gemma's MLP
at::Tensor gelu_tanh_mul(const at::Tensor& gu) {
  const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
  const __m256 beta = _mm256_set1_ps(kGeluBeta), kappa = _mm256_set1_ps(kGeluKappa);
  return gate_mul(
      gu,
      [&](__m256 g) {
        const __m256 cube = _mm256_mul_ps(_mm256_mul_ps(g, g), g);
        const __m256 inner = _mm256_mul_ps(beta, _mm256_add_ps(g, _mm256_mul_ps(kappa, cube)));
        return _mm256_mul_ps(_mm256_mul_ps(half, g), _mm256_add_ps(one, tanh_ps(inner)));
      },
      [](float g) {
        return 0.5f * g * (1.0f + std::tanh(kGeluBeta * (g + kGeluKappa * (g * g * g))));
      });
}

// In place, RMSNorm over each head of t (M, H, D) (rows strided, heads contiguous): the
// first `heads` heads with q_weight (D), the next kv_heads with k_weight; Qwen 3's and
// Gemma 3's norms of queries and keys
void qk_norm_(at::Tensor& t, const at::Tensor& q_weight, const at::Tensor& k_weight, int64_t heads,
              int64_t kv_heads, double eps) {
  check(t, "t");
  check(q_weight, "q_weight");
  check(k_weight, "k_weight");
  TORCH_CHECK(t.dim() == 3 && t.stride(2) == 1 && t.stride(1) == t.size(2), "t must be (M, H, D) with contiguous heads");
  const int64_t M = t.size(0), D = t.size(2);
  TORCH_CHECK(heads + kv_heads <= t.size(1), "more heads than t has");
  TORCH_CHECK(q_weight.is_contiguous() && k_weight.is_contiguous() && q_weight.numel() == D &&
                  k_weight.numel() == D,
              "weights of head_dim");
  float* tp = t.data_ptr<float>();
  const float* qw = q_weight.data_ptr<float>();
  const float* kw = k_weight.data_ptr<float>();
  const int64_t row = t.stride(0);
  parallel(0, M, grain((heads + kv_heads) * D), [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m)
      for (int64_t h = 0; h < heads + kv_heads; ++h) {
        float* x = tp + m * row + h * D;
        norm_row(x, h < heads ? qw : kw, static_cast<float>(eps), x, D);
      }
  });
}

// In place on the first `heads` heads of t (M, H, D), row m at position positions[m]:
// x * cos + rotate_half(x) * sin, with Hugging Face's tables (L, D).
void rotary_(at::Tensor& t, const at::Tensor& positions_in, const at::Tensor& cos,
             const at::Tensor& sin, int64_t heads) {
  check(t, "t");
  check(cos, "cos");
  check(sin, "sin");
  TORCH_CHECK(t.dim() == 3 && t.stride(2) == 1 && t.stride(1) == t.size(2), "t must be (M, H, D) with contiguous heads");
  TORCH_CHECK(cos.is_contiguous() && sin.is_contiguous(), "tables must be contiguous");
  const at::Tensor positions = positions_in.to(at::kLong).contiguous();
  const int64_t M = t.size(0), D = t.size(2), half = D / 2, L = cos.size(0);
  TORCH_CHECK(positions.numel() == M && heads <= t.size(1) && cos.size(1) == D && sin.sizes() == cos.sizes(), "shape mismatch");
  float* tp = t.data_ptr<float>();
  const int64_t row_stride = t.stride(0);
  const int64_t* pp = positions.data_ptr<int64_t>();
  const float* cp = cos.data_ptr<float>();
  const float* sp = sin.data_ptr<float>();
  for (int64_t m = 0; m < M; ++m) TORCH_CHECK(pp[m] >= 0 && pp[m] < L, "position out of range");
  parallel(0, M, grain(heads * D), [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      const float* c = cp + pp[m] * D;
      const float* s = sp + pp[m] * D;
      for (int64_t h = 0; h < heads; ++h) {
        float* x = tp + m * row_stride + h * D;
        for (int64_t i = 0; i < half; ++i) {
          const float a = x[i], b = x[i + half];
          x[i] = a * c[i] + (-b) * s[i];
          x[i + half] = b * c[i + half] + a * s[i + half];
        }
      }
    }
  });
}

// Causal grouped-query attention for a ragged batch of tokens: token i sits at position
// positions[i] of cache row slots[i]. First every token's key and value are stored
// there, then each token attends to positions [0, positions[i]] of its row, or with a
// window (> 0) to the last `window` of them, (positions[i] - window, positions[i]] (a
// sliding-window layer, Hugging Face's convention). A row's earlier positions must
// already be in the cache (earlier chunks, a copied prefix) or in this call, and no two
// tokens of a call may share a slot and a position. Prefill chunks and decoding rows go
// through the same code, so a token's result is the same bits whatever it is batched
// with and however its prompt was split.
// qkv (N, H + 2 KVH, D): rotated queries, rotated keys, values. cache_k, cache_v
// (S, KVH, C, D). Returns (N, H * D), heads side by side. Query head h reads key/value
// head h / (H / KVH), as Hugging Face's repeat_kv.
// A window layer's cache row may be a ring shorter than the positions: position q sits
// at q mod C, so C must hold the window and a row's tokens of the call (the earliest's
// keys are not overwritten before it reads them). Scores are q.k * scale (scale 0:
// 1 / sqrt(D)).
at::Tensor attention(const at::Tensor& qkv, at::Tensor& cache_k, at::Tensor& cache_v,
                     const at::Tensor& slots_in, const at::Tensor& positions_in, int64_t heads,
                     int64_t kv_heads, int64_t window, double scale_in) {
  check(qkv, "qkv");
  check(cache_k, "cache_k");
  check(cache_v, "cache_v");
  TORCH_CHECK(qkv.dim() == 3 && qkv.stride(2) == 1 && qkv.stride(1) == qkv.size(2),
              "qkv must be (N, heads, D) with contiguous heads");
  TORCH_CHECK(cache_k.is_contiguous() && cache_v.is_contiguous() && cache_k.dim() == 4 &&
                  cache_k.sizes() == cache_v.sizes(),
              "caches must be contiguous (S, KVH, C, D)");
  const at::Tensor slots = slots_in.to(at::kLong).contiguous();
  const at::Tensor positions = positions_in.to(at::kLong).contiguous();
  const int64_t N = qkv.size(0), D = qkv.size(2), S = cache_k.size(0), C = cache_k.size(2);
  TORCH_CHECK(heads > 0 && kv_heads > 0 && heads % kv_heads == 0 &&
                  qkv.size(1) == heads + 2 * kv_heads,
              "head counts");
  TORCH_CHECK(cache_k.size(1) == kv_heads && cache_k.size(3) == D && D % 8 == 0, "cache shape");
  TORCH_CHECK(slots.numel() == N && positions.numel() == N, "one slot and position per token");
  TORCH_CHECK(window >= 0, "window must be >= 0");
  const int64_t* sp = slots.data_ptr<int64_t>();
  const int64_t* pp = positions.data_ptr<int64_t>();
  for (int64_t i = 0; i < N; ++i)
    TORCH_CHECK(sp[i] >= 0 && sp[i] < S && pp[i] >= 0 && (window > 0 || pp[i] < C),
                "slot or position out of range");
  if (window > 0) {  // a ring row holds the window and the call's tokens of that row
    std::vector<int64_t> lo(S, INT64_MAX), hi(S, -1);
    for (int64_t i = 0; i < N; ++i) {
      lo[sp[i]] = std::min(lo[sp[i]], pp[i]);
      hi[sp[i]] = std::max(hi[sp[i]], pp[i]);
    }
    for (int64_t s = 0; s < S; ++s)
      TORCH_CHECK(hi[s] < C || hi[s] - lo[s] + window <= C, "a window layer's cache row of ", C,
                  " positions cannot hold a window of ", window, " and positions ", lo[s], " to ", hi[s]);
  }
  const int64_t G = heads / kv_heads, row = qkv.stride(0);
  const float scale = scale_in > 0 ? static_cast<float>(scale_in) : 1.0f / std::sqrt(static_cast<float>(D));
  at::Tensor out = at::empty({N, heads * D}, qkv.options());
  const float* qp = qkv.data_ptr<float>();
  float* kp = cache_k.data_ptr<float>();
  float* vp = cache_v.data_ptr<float>();
  float* op = out.data_ptr<float>();
  parallel(0, N, grain(2 * kv_heads * D), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float* x = qp + i * row;
      for (int64_t j = 0; j < kv_heads; ++j) {
        const int64_t to = ((sp[i] * kv_heads + j) * C + pp[i] % C) * D;
        std::copy(x + (heads + j) * D, x + (heads + j + 1) * D, kp + to);
        std::copy(x + (heads + kv_heads + j) * D, x + (heads + kv_heads + j + 1) * D, vp + to);
      }
    }
  });
  // tasks (token, query head) in pieces taken as threads come free, the last tokens
  // first: a long prompt's late tokens cost more, so the cheap ones even out the end;
  // one decoding token's few heads still keep every thread busy
  const int64_t tasks = N * heads;
  parallel(0, tasks, 1, [&](int64_t u0, int64_t u1) {
    std::vector<float> p;
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t t = tasks - 1 - u;
      const int64_t i = t / heads, hq = t % heads, j = hq / G;
      // keys from position `from` to pp[i], the first at cache index `first`, wrapping
      const int64_t from = window > 0 ? std::max<int64_t>(0, pp[i] - window + 1) : 0;
      const int64_t L = pp[i] - from + 1, first = from % C;
      const float* q = qp + i * row + hq * D;
      const float* K = kp + (sp[i] * kv_heads + j) * C * D;
      const float* V = vp + (sp[i] * kv_heads + j) * C * D;
      const auto key = [&](int64_t l) {
        const int64_t r = first + l;
        return K + (r < C ? r : r - C) * D;
      };
      p.resize(static_cast<size_t>(L));
      float* s = p.data();
      // scores, four keys side by side (independent chains; fold4 adds as fold does)
      int64_t l = 0;
      for (; l + 4 <= L; l += 4) {
        __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        const float* k4[4] = {key(l), key(l + 1), key(l + 2), key(l + 3)};
        for (int64_t d = 0; d < D; d += 8) {
          const __m256 qv = _mm256_loadu_ps(q + d);
          for (int r = 0; r < 4; ++r) acc[r] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k4[r] + d), acc[r]);
        }
        _mm_storeu_ps(s + l, _mm_mul_ps(fold4(acc[0], acc[1], acc[2], acc[3]), _mm_set1_ps(scale)));
      }
      for (; l < L; ++l) {
        __m256 acc = _mm256_setzero_ps();
        const float* k1 = key(l);
        for (int64_t d = 0; d < D; d += 8)
          acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(k1 + d), acc);
        s[l] = fold(acc) * scale;
      }
      const float top = *std::max_element(s, s + L);
      for (l = 0; l + 8 <= L; l += 8)
        _mm256_storeu_ps(s + l, exp_ps(_mm256_sub_ps(_mm256_loadu_ps(s + l), _mm256_set1_ps(top))));
      for (; l < L; ++l) s[l] = std::exp(s[l] - top);
      float total = 0.0f;
      for (l = 0; l < L; ++l) total += s[l];
      weighted_sum_rows(s, V, D, L, first, C, 1.0f / total, op + i * heads * D + hq * D);
    }
  });
  return out;
}

namespace {

void check_blocks(const at::Tensor& w, int64_t type, int64_t K) {
  TORCH_CHECK(block_bytes(type) > 0, "unsupported block type ", type);
  TORCH_CHECK(w.scalar_type() == at::kByte && w.dim() == 2 && w.is_contiguous() && w.device().is_cpu(),
              "blocks must be a contiguous (N, row bytes) uint8 CPU tensor");
  const int64_t bw = block_weights(type);
  TORCH_CHECK(K > 0 && K % bw == 0 && w.size(1) == K / bw * block_bytes(type),
              "blocks do not hold rows of ", K, " weights");
}

}  // namespace

// x (M, K) @ W^T + bias, W packed by qpack from blocks of `type`
at::Tensor plinear(const at::Tensor& x, const at::Tensor& w, int64_t type,
                   const c10::optional<at::Tensor>& bias) {
  TORCH_CHECK(block_bytes(type) > 0 && pack_bytes(type) > 0, "unsupported packed block type ", type);
  TORCH_CHECK(w.scalar_type() == at::kByte && w.dim() == 2 && w.is_contiguous() && w.device().is_cpu(),
              "packed blocks must be a contiguous (N / 8, K / block weights * packed block bytes) uint8 CPU tensor");
  const int64_t M = x.size(0), K = x.size(1), G = w.size(0), N = G * kPackRows, bw = block_weights(type);
  TORCH_CHECK(K > 0 && K % bw == 0 && w.size(1) == K / bw * pack_bytes(type),
              "packed blocks do not hold rows of ", K, " weights");
  at::Tensor y = at::empty({M, N}, x.options());
  const float* xp = x.data_ptr<float>();
  const uint8_t* wp = w.data_ptr<uint8_t>();
  const float* bp = bias_data(bias, N);
  float* yp = y.data_ptr<float>();
  const int64_t group_bytes = w.size(1);
  if (type == kQ8_0 && M > 8 && g_isa == kIsaAvx512) {
    const int64_t pairs = (M + 1) / 2;
    float* xs = scratch<kPairedX>(pairs * 2 * K);  // x in pairs of rows (this thread's room)
    parallel(0, pairs, grain(2 * K), [&](int64_t p0, int64_t p1) { pair_rows(xp, M, K, p0, p1, xs); });
    parallel(0, G, 6, [&](int64_t g0, int64_t g1) {
      pdot_rows16(xs, M, K, wp, group_bytes, bp, yp, N, g0, g1);
    });
    return y;
  }
  if (type == kQ8_0) {
    parallel(0, G, 6, [&](int64_t g0, int64_t g1) {
      pdot_rows(xp, M, K, wp, group_bytes, bp, yp, N, g0, g1);
    });
    return y;
  }
  const int64_t blocks = K / kBlock;
  std::vector<float> sx(M * blocks);
  parallel(0, M, grain(K), [&](int64_t m0, int64_t m1) {
    block_sums(xp + m0 * K, m1 - m0, K, sx.data() + m0 * blocks);
  });
  const bool wide = g_isa == kIsaAvx512;
  if (wide && M > 8) {  // prompts and batches: the quants widened once per call
    with_type(type, [&](auto t) {
      constexpr int T = decltype(t)::value;
      if constexpr (T != kQ8_0 && !plain(T))
        parallel(0, G, 6, [&](int64_t g0, int64_t g1) {
          wdot_rows16<T>(xp, M, K, sx.data(), wp, group_bytes, bp, yp, N, g0, g1);
        });
    });
    return y;
  }
  // x and sx in the kernels' tiles (one row is its own tile)
  std::vector<float> xt(M > 1 ? M * K : 0), st(M > 1 ? sx.size() : 0);
  if (M > 1) interleave(xp, sx.data(), M, K, wide ? kTile16 : kTile8, xt.data(), st.data());
  const float* xq = M > 1 ? xt.data() : xp;
  const float* sq = M > 1 ? st.data() : sx.data();
  with_type(type, [&](auto t) {
    constexpr int T = decltype(t)::value;
    if constexpr (T != kQ8_0 && !plain(T))
      parallel(0, G, 6, [&](int64_t g0, int64_t g1) {
        if (wide) fdot_rows<T, true>(xq, M, K, sq, wp, group_bytes, bp, yp, N, g0, g1);
        else fdot_rows<T, false>(xq, M, K, sq, wp, group_bytes, bp, yp, N, g0, g1);
      });
  });
  return y;
}

// x (M, K) @ W^T + bias, W (N, K) given as GGUF blocks of `type`: w (N, K / block
// weights * block bytes); or, with kPacked in `type`, as qpack made them: w (N / 8,
// K / block weights * packed block bytes)
at::Tensor qlinear(const at::Tensor& x_in, const at::Tensor& w, int64_t type,
                   const c10::optional<at::Tensor>& bias) {
  check(x_in, "x");
  TORCH_CHECK(x_in.dim() == 2, "x must be (M, K)");
  const at::Tensor x = x_in.contiguous();
  if (type & kPacked) return plinear(x, w, type & ~kPacked, bias);
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  check_blocks(w, type, K);
  at::Tensor y = at::empty({M, N}, x.options());
  const float* xp = x.data_ptr<float>();
  const uint8_t* wp = w.data_ptr<uint8_t>();
  const int64_t row_bytes = w.size(1);
  const float* bp = bias_data(bias, N);
  float* yp = y.data_ptr<float>();
  with_type(type, [&](auto t) {
    parallel(0, N, 48, [&](int64_t n0, int64_t n1) {
      qlinear_range<decltype(t)::value>(xp, M, K, wp, row_bytes, bp, yp, N, n0, n1);
    });
  });
  return y;
}

// blocks w (N, K / block weights * block bytes), N a multiple of 8, packed eight rows
// side by side for plinear: (N / 8, K / block weights * packed block bytes)
at::Tensor qpack(const at::Tensor& w, int64_t type, int64_t K) {
  check_blocks(w, type, K);
  const int64_t N = w.size(0), units = K / block_weights(type), row_bytes = w.size(1);
  TORCH_CHECK(pack_bytes(type) > 0, "block type ", type, " is not packed");
  TORCH_CHECK(N % kPackRows == 0, "packing takes rows in eights, got ", N);
  at::Tensor out = at::empty({N / kPackRows, units * pack_bytes(type)}, w.options());
  const uint8_t* wp = w.data_ptr<uint8_t>();
  uint8_t* op = out.data_ptr<uint8_t>();
  with_type(type, [&](auto t) {
    if constexpr (!plain(decltype(t)::value))
      parallel(0, N / kPackRows, 16, [&](int64_t g0, int64_t g1) {
        pack_groups<decltype(t)::value>(wp, row_bytes, units, g0, g1, op);
      });
  });
  return out;
}

// the rows `ids` of W, dequantised (an embedding lookup on GGUF blocks)
at::Tensor qrows(const at::Tensor& w, int64_t type, int64_t K, const at::Tensor& ids_in) {
  check_blocks(w, type, K);
  const at::Tensor ids = ids_in.to(at::kLong).contiguous();
  const int64_t M = ids.numel(), N = w.size(0);
  at::Tensor out = at::empty({M, K}, at::TensorOptions().dtype(at::kFloat));
  const int64_t* ip = ids.data_ptr<int64_t>();
  for (int64_t m = 0; m < M; ++m) TORCH_CHECK(ip[m] >= 0 && ip[m] < N, "row ", ip[m], " out of range");
  const uint8_t* wp = w.data_ptr<uint8_t>();
  float* op = out.data_ptr<float>();
  const int64_t row_bytes = w.size(1);
  with_type(type, [&](auto t) {
    parallel(0, M, grain(K), [&](int64_t m0, int64_t m1) {
      for (int64_t m = m0; m < m1; ++m)
        dequant_rows<decltype(t)::value>(wp + ip[m] * row_bytes, row_bytes, K, 0, 1, op + m * K);
    });
  });
  return out;
}

// The decoder layers of one forward, in one call: what LlamaModel.forward_tokens' loop
// does per layer (q/k/v product, the norms of q and k, rotary, attention, output
// product, its norm, residual add and norm, gate/up product, activation, down product,
// its norm, residual add and norm), by the same kernels in the same order, so the bits
// are the same; only Python's calls between them go.
// x (N, C): the residual stream, added to in place; h: layer 0's normed input. Per
// layer l, products 4l .. 4l+3 are qkv, o, gate_up, down, product i in parts[i] parts
// (their outputs side by side), each part a weight (float32 (out, in), kind 0) or GGUF
// blocks (kind: their type, as qlinear takes it) with its bias or None, in the order of
// the products. norms[6l .. 6l+5] are the norm weights of q's heads, k's heads, the attention's output, the MLP's input,
// the MLP's output, and the next layer's input (or the last norm); those of q, k and
// the outputs may be None (no such norm). ropes[l]: which of the tables (cos, sin)
// rotates the layer's queries and keys (-1: none); windows[l]: its attention window (0:
// none). activation: 0 SiLU, 1 GELU (tanh form). Returns the last norm's output.
at::Tensor layers(at::Tensor& x, at::Tensor h, const std::vector<at::Tensor>& weights,
                  const std::vector<int64_t>& kinds,
                  const std::vector<c10::optional<at::Tensor>>& biases,
                  const std::vector<c10::optional<at::Tensor>>& norms, double eps,
                  std::vector<at::Tensor> cache_k, std::vector<at::Tensor> cache_v,
                  const at::Tensor& slots, const at::Tensor& positions,
                  const std::vector<at::Tensor>& cos, const std::vector<at::Tensor>& sin,
                  const std::vector<int64_t>& ropes, const std::vector<int64_t>& windows,
                  int64_t heads, int64_t kv_heads, double scale, int64_t activation,
                  const std::vector<int64_t>& parts) {
  const size_t L = ropes.size();
  TORCH_CHECK(norms.size() == 6 * L && windows.size() == L && parts.size() == 4 * L,
              "four products, six norms, a rotary table and a window per layer");
  // product i's weights are entries [first[i], first[i] + parts[i]) of weights, kinds, biases
  std::vector<size_t> first(4 * L + 1, 0);
  for (size_t i = 0; i < 4 * L; ++i) {
    TORCH_CHECK(parts[i] >= 1, "a product has at least one part");
    first[i + 1] = first[i] + static_cast<size_t>(parts[i]);
  }
  TORCH_CHECK(weights.size() == first[4 * L] && kinds.size() == first[4 * L] &&
                  biases.size() == first[4 * L],
              "a weight, a kind and a bias per part");
  TORCH_CHECK(cache_k.size() >= L && cache_v.size() >= L, "a cache per layer");
  TORCH_CHECK(cos.size() == sin.size(), "a sine table per cosine table");
  TORCH_CHECK(activation == 0 || activation == 1, "activation 0 (SiLU) or 1 (GELU)");
  for (size_t l = 0; l < L; ++l) {
    TORCH_CHECK(ropes[l] < static_cast<int64_t>(cos.size()), "no rotary table ", ropes[l]);
    TORCH_CHECK(norms[6 * l + 3].has_value() && norms[6 * l + 5].has_value(), "layer ", l, " lacks its norms");
    TORCH_CHECK(norms[6 * l].has_value() == norms[6 * l + 1].has_value(), "q and k are normed together");
  }
  auto one = [&](const at::Tensor& in, size_t j) {
    return kinds[j] == 0 ? ::linear(in, weights[j], biases[j]) : ::qlinear(in, weights[j], kinds[j], biases[j]);
  };
  // a product of several parts (a GGUF file's q and k in one block type, v in another):
  // each part's outputs, side by side, as QuantStack's forward gives them
  auto product = [&](const at::Tensor& in, size_t i) {
    if (parts[i] == 1) return one(in, first[i]);
    std::vector<at::Tensor> outs;
    for (size_t j = first[i]; j < first[i + 1]; ++j) outs.push_back(one(in, j));
    return at::cat(outs, 1);
  };
  const int64_t N = x.size(0);
  for (size_t l = 0; l < L; ++l) {
    const c10::optional<at::Tensor>* n = &norms[6 * l];
    at::Tensor qkv = product(h, 4 * l);
    TORCH_CHECK(qkv.size(1) % (heads + 2 * kv_heads) == 0, "q/k/v width");
    qkv = qkv.view({N, heads + 2 * kv_heads, qkv.size(1) / (heads + 2 * kv_heads)});
    if (n[0].has_value()) qk_norm_(qkv, *n[0], *n[1], heads, kv_heads, eps);
    if (ropes[l] >= 0) rotary_(qkv, positions, cos[ropes[l]], sin[ropes[l]], heads + kv_heads);
    const at::Tensor out = attention(qkv, cache_k[l], cache_v[l], slots, positions, heads, kv_heads,
                                     windows[l], scale);
    at::Tensor r = product(out, 4 * l + 1);
    if (n[2].has_value()) r = rms_norm(r, *n[2], eps);
    h = add_rms_norm_(x, r, *n[3], eps);
    const at::Tensor gu = product(h, 4 * l + 2);
    r = product(activation == 0 ? silu_mul(gu) : gelu_tanh_mul(gu), 4 * l + 3);
    if (n[4].has_value()) r = rms_norm(r, *n[4], eps);
    h = add_rms_norm_(x, r, *n[5], eps);
  }
  return h;
}

// the instruction set the products run on: "avx2" or "avx512"
std::string isa() { return kIsaNames[g_isa]; }

// run the products on `name` ("avx2", or "avx512" where the CPU takes it) from now on;
// returns the one in use before (tests compare the two)
std::string use_isa(const std::string& name) {
  const std::string before = isa();
  if (name == "avx2") {
    g_isa = kIsaAvx2;
  } else {
    TORCH_CHECK(name == "avx512", "unknown instruction set ", name, " (avx2, avx512)");
    TORCH_CHECK(has_avx512(), "this CPU does not take AVX-512 (F, BW, VL, DQ)");
    g_isa = kIsaAvx512;
  }
  return before;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  // none of them touches a Python object: other Python threads run meanwhile
  using nogil = py::call_guard<py::gil_scoped_release>;
  m.def("attention", &attention, nogil(), "causal attention of a ragged batch of tokens over the cache",
        py::arg("qkv"), py::arg("cache_k"), py::arg("cache_v"), py::arg("slots"), py::arg("positions"),
        py::arg("heads"), py::arg("kv_heads"), py::arg("window") = 0, py::arg("scale") = 0.0);
  m.def("gelu_tanh_mul", &gelu_tanh_mul, nogil(), "gelu_tanh(gate) * up from [gate | up]");
  m.def("isa", &isa, "the instruction set the products run on: avx2 or avx512");
  m.def("use_isa", &use_isa, "run the products on avx2 or avx512 from now on; returns the one before");
  m.def("layers", &layers, nogil(), "the decoder layers of one forward, in one call");
  m.def("linear", &linear, nogil(), "x @ w.T + bias, batch-invariant");
  m.def("qk_norm_", &qk_norm_, nogil(), "RMSNorm of each query and key head, in place");
  m.def("qlinear", &qlinear, nogil(), "x @ W.T + bias, W as GGUF blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, F16, BF16)");
  m.def("qpack", &qpack, nogil(), "GGUF blocks packed eight rows side by side, for qlinear");
  m.def("qrows", &qrows, nogil(), "rows of W, GGUF blocks, dequantised");
  m.def("rms_norm", &rms_norm, nogil(), "RMSNorm of each row");
  m.def("add_rms_norm_", &add_rms_norm_, nogil(), "x += r in place, then RMSNorm of x");
  m.def("silu_mul", &silu_mul, nogil(), "silu(gate) * up from [gate | up]");
  m.def("rotary_", &rotary_, nogil(), "rotary embedding in place");
}
