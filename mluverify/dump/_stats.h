// The one-pass statistics of the Dumper (min, max, sums, NaN / Inf counts over a block of
// floating values), shared by the `mluverify_dump::stats` op (_stats.cpp) and the index core
// (_core.cpp).
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#define MLUVERIFY_AVX2_CLONE __attribute__((target_clones("avx2", "default")))
#else
#define MLUVERIFY_AVX2_CLONE
#endif

namespace mluverify_dump {

constexpr int64_t kChunk = 1 << 15;
constexpr int kLanes = 16;  // independent accumulators, so the compiler can vectorise
constexpr int64_t kBlock = 1 << 11;

struct Partial {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  double sum = 0, abs_sum = 0, squares = 0;
  int64_t nan = 0, posinf = 0, neginf = 0;

  void merge(const Partial& other) {
    lo = std::min(lo, other.lo);
    hi = std::max(hi, other.hi);
    sum += other.sum;
    abs_sum += other.abs_sum;
    squares += other.squares;
    nan += other.nan;
    posinf += other.posinf;
    neginf += other.neginf;
  }
};

// The common case, every value finite: branch-free lanes the compiler vectorises, summing in
// the input's precision over blocks of kBlock values (float rounding over 128 values per lane
// stays far below the printed 6 digits), blocks into double. Returns false when a value is not
// finite (the caller then counts them with `with_non_finite`). Built twice, for AVX2 and for any
// x86-64 (SSE2), and picked by the CPU at load time: AVX2 lanes are twice as wide, and the
// library must still load on a CPU without it.
template <typename T>
MLUVERIFY_AVX2_CLONE bool all_finite(const T* data, int64_t count, Partial& out) {
  // float for float and the half types, double for double: min and max are exact either way
  using Value = std::conditional_t<std::is_same_v<T, double>, double, float>;
  Value lo[kLanes], hi[kLanes];
  std::fill(lo, lo + kLanes, std::numeric_limits<Value>::infinity());
  std::fill(hi, hi + kLanes, -std::numeric_limits<Value>::infinity());
  for (int64_t begin = 0; begin < count; begin += kBlock) {
    const int64_t end = std::min(count, begin + kBlock);
    Value sum[kLanes] = {0}, abs_sum[kLanes] = {0}, squares[kLanes] = {0};
    int64_t i = begin;
    for (; i + kLanes <= end; i += kLanes) {
      for (int k = 0; k < kLanes; ++k) {
        const Value v = static_cast<Value>(data[i + k]);
        lo[k] = v < lo[k] ? v : lo[k];
        hi[k] = v > hi[k] ? v : hi[k];
        sum[k] += v;
        abs_sum[k] += std::fabs(v);
        squares[k] += v * v;
      }
    }
    for (; i < end; ++i) {
      const Value v = static_cast<Value>(data[i]);
      lo[0] = v < lo[0] ? v : lo[0];
      hi[0] = v > hi[0] ? v : hi[0];
      sum[0] += v;
      abs_sum[0] += std::fabs(v);
      squares[0] += v * v;
    }
    for (int k = 0; k < kLanes; ++k) {
      out.sum += sum[k];
      out.abs_sum += abs_sum[k];
      out.squares += squares[k];
    }
  }
  for (int k = 0; k < kLanes; ++k) {
    out.lo = std::min(out.lo, static_cast<double>(lo[k]));
    out.hi = std::max(out.hi, static_cast<double>(hi[k]));
  }
  // NaN fails every comparison and turns a sum NaN; an infinity shows in min or max (a sum
  // of finite floats that overflows also lands here, and is summed again in double).
  return std::isfinite(out.sum) && std::isfinite(out.squares) && std::isfinite(out.lo) &&
         std::isfinite(out.hi);
}

template <typename T>
void with_non_finite(const T* data, int64_t count, Partial& out) {
  out = Partial();
  for (int64_t i = 0; i < count; ++i) {
    const double v = static_cast<double>(data[i]);
    if (std::isnan(v)) {
      ++out.nan;
    } else if (std::isinf(v)) {
      ++(v > 0 ? out.posinf : out.neginf);
    } else {
      out.lo = std::min(out.lo, v);
      out.hi = std::max(out.hi, v);
      out.sum += v;
      out.abs_sum += std::fabs(v);
      out.squares += v * v;
    }
  }
}

template <typename T>
Partial reduce(const T* data, int64_t count) {
  const int64_t chunks = (count + kChunk - 1) / kChunk;
  std::vector<Partial> partials(chunks);
  at::parallel_for(0, chunks, 1, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) {
      const int64_t begin = c * kChunk;
      const int64_t size = std::min(count, begin + kChunk) - begin;
      if (!all_finite(data + begin, size, partials[c])) {
        with_non_finite(data + begin, size, partials[c]);
      }
    }
  });
  Partial total;
  for (const auto& partial : partials) {
    total.merge(partial);
  }
  return total;
}

// The values of a dense tensor as one block of memory (its elements in some order).
inline at::Tensor dense_block(const at::Tensor& x) {
  if (x.is_contiguous()) {
    return x;
  }
  if (!x.is_non_overlapping_and_dense()) {
    return x.contiguous();
  }
  // non-negative strides: the elements fill numel() places from the storage offset
  return x.as_strided({x.numel()}, {1}, x.storage_offset());
}

}  // namespace mluverify_dump
