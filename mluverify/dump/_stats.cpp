// The Dumper's statistics of a floating tensor in one pass over its memory.
//
// `mluverify_dump::stats(Tensor x) -> float[]` returns, over the finite values of a CPU
// floating tensor: min, max, sum, sum of absolute values, sum of squares, then the counts of
// NaN, +Inf and -Inf. Torch needs two or three reductions for the Dumper's level-1 statistics
// (aminmax, sum, an L1 norm) and more for a capture's recipes (std): each a pass over the whole
// tensor. Chunks of 32 Ki values run in parallel on torch's intra-op threads; sums go to double
// every 2 Ki values.
//
// A dense tensor (a permutation of a contiguous one, such as a transposed weight) is read in
// memory order: the statistics do not depend on the order. Any other layout is copied first.
#include <ATen/Dispatch.h>
#include <torch/library.h>

#include <vector>

#include "_stats.h"

namespace {

using mluverify_dump::dense_block;
using mluverify_dump::Partial;
using mluverify_dump::reduce;

std::vector<double> stats(const at::Tensor& x) {
  TORCH_CHECK(x.device().is_cpu(), "mluverify_dump::stats takes a CPU tensor, got one on ",
              x.device());
  TORCH_CHECK(at::isFloatingType(x.scalar_type()),
              "mluverify_dump::stats takes a floating tensor, got ", x.scalar_type());
  const at::Tensor block = dense_block(x);
  Partial total;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, block.scalar_type(), "stats", [&] {
    total = reduce(block.const_data_ptr<scalar_t>(), block.numel());
  });
  return {total.lo, total.hi, total.sum, total.abs_sum, total.squares,
          static_cast<double>(total.nan), static_cast<double>(total.posinf),
          static_cast<double>(total.neginf)};
}

}  // namespace

TORCH_LIBRARY(mluverify_dump, m) {
  m.def("stats(Tensor x) -> float[]");
}

TORCH_LIBRARY_IMPL(mluverify_dump, CPU, m) {
  m.impl("stats", &stats);
}
