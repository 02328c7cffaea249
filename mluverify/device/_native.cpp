// The emulated MLU's C++ side: what torch asks of a device and a Python back end cannot give.
//
// * PrivateUse1 hooks with a pinned host-memory allocator, so that `tensor.pin_memory()`,
//   `DataLoader(pin_memory=True)` and `x.to("cpu", non_blocking=True)` work as in native PyTorch.
//   Pinned blocks are host memory the hooks keep track of (`isPinnedPtr`); the emulated device
//   reads host memory directly, so no page locking is needed to make copies correct.
// * A device guard for several emulated cards: the current card is per thread, as on CUDA.
// * Two tensor helpers for the Python side: an empty tensor on a given card (the storage is set
//   from Python), and marking a 0-dim CPU tensor as a wrapped Python number (type promotion).
// * Three numerics primitives of the kernels, the same arithmetic as their definitions in Python
//   in one multithreaded pass (numpy runs on one thread, its integer ops in several passes):
//   `round_mantissa` (numerics.round_mantissa), `combine4` (reductions.combine_pairwise of 4
//   partials, the layer-by-layer core count) and `lane_sums` (the lanes of reductions.part_sums).
//
// Everything is registered by `install`, called from mluverify/device/_backend.py before torch's
// Python back-end set-up (which then keeps these hooks and this guard).
#include <ATen/Parallel.h>
#include <ATen/TensorIterator.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/Allocator.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/alloc_cpu.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <map>
#include <mutex>

namespace {

constexpr auto kMlu = c10::DeviceType::PrivateUse1;

std::atomic<int64_t> card_count{1};
thread_local c10::DeviceIndex current_card = 0;

void check_card(c10::DeviceIndex index) {
  const auto count = card_count.load();
  TORCH_CHECK_INDEX(
      index >= 0 && index < count,
      "MLU card index ", static_cast<int>(index), " is out of range: this process has ", count,
      " emulated card(s), valid indices 0..", count - 1,
      " (set MLUVERIFY_DEVICE_COUNT or [tool.mluverify] device_count for more)");
}

// Pinned host blocks, base address -> size, so that views into a block count as pinned too.
std::mutex pinned_mutex;
std::map<std::uintptr_t, std::size_t> pinned_blocks;

void free_pinned(void* data) {
  if (data == nullptr) {
    return;
  }
  {
    std::lock_guard<std::mutex> lock(pinned_mutex);
    pinned_blocks.erase(reinterpret_cast<std::uintptr_t>(data));
  }
  c10::free_cpu(data);
}

bool is_pinned(const void* data) {
  const auto address = reinterpret_cast<std::uintptr_t>(data);
  std::lock_guard<std::mutex> lock(pinned_mutex);
  auto block = pinned_blocks.upper_bound(address);
  if (block == pinned_blocks.begin()) {
    return false;
  }
  --block;
  return address < block->first + block->second;
}

struct PinnedAllocator final : c10::Allocator {
  c10::DataPtr allocate(std::size_t nbytes) override {
    void* data = nbytes == 0 ? nullptr : c10::alloc_cpu(nbytes);
    if (data != nullptr) {
      std::lock_guard<std::mutex> lock(pinned_mutex);
      pinned_blocks[reinterpret_cast<std::uintptr_t>(data)] = nbytes;
    }
    return {data, data, &free_pinned, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &free_pinned;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

PinnedAllocator pinned_allocator;

struct MluHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  void init() const override {}
  c10::DeviceIndex deviceCount() const override {
    return static_cast<c10::DeviceIndex>(card_count.load());
  }
  void setCurrentDevice(c10::DeviceIndex index) const override {
    check_card(index);
    current_card = index;
  }
  c10::DeviceIndex getCurrentDevice() const override { return current_card; }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex index) const override {
    const auto previous = current_card;
    setCurrentDevice(index);
    return previous;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex index) const override {
    return exchangeDevice(index);
  }
  bool isPinnedPtr(const void* data) const override { return is_pinned(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return &pinned_allocator; }
};

// Streams and events are no-ops: mluverify's Queues order the work themselves (queues.py).
struct MluGuard final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kMlu; }
  c10::Device exchangeDevice(c10::Device device) const override {
    const auto previous = getDevice();
    setDevice(device);
    return previous;
  }
  c10::Device getDevice() const override { return c10::Device(kMlu, current_card); }
  void setDevice(c10::Device device) const override {
    check_card(device.index());
    current_card = device.index();
  }
  void uncheckedSetDevice(c10::Device device) const noexcept override {
    current_card = device.index();
  }
  c10::Stream getStream(c10::Device device) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, device);
  }
  c10::Stream getNewStream(c10::Device device, int) const override {
    return c10::Stream(c10::Stream::DEFAULT, device);
  }
  c10::Stream exchangeStream(c10::Stream stream) const noexcept override { return stream; }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(card_count.load());
  }
  void record(void**, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void*, const c10::DeviceIndex) const noexcept override {}
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
};

MluHooks hooks;
MluGuard guard;

// Registers the hooks and the guard (once per process); later calls only check the count.
bool install(int64_t cards) {
  TORCH_CHECK_VALUE(cards >= 1, "the number of emulated MLU cards must be >= 1, got ", cards);
  if (at::isPrivateUse1HooksRegistered()) {
    TORCH_CHECK(cards == card_count.load(), "the emulated MLU is already set up with ",
                card_count.load(), " card(s); the card count cannot change within a process");
    return false;
  }
  card_count.store(cards);
  c10::impl::registerDeviceGuard(kMlu, &guard);
  at::RegisterPrivateUse1HooksInterface(&hooks);
  return true;
}

int64_t cards() {
  return card_count.load();
}

// An empty (0-element, null-data) tensor on card `index`; the Python side sets its storage.
at::Tensor empty_on(int64_t index, at::ScalarType dtype) {
  const auto card = static_cast<c10::DeviceIndex>(index);
  check_card(card);
  c10::Storage storage{c10::Storage::use_byte_size_t{}, 0, c10::GetAllocator(c10::kMeta), true};
  storage.set_data_ptr_noswap(at::DataPtr{nullptr, c10::Device(kMlu, card)});
  auto tensor = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      c10::scalarTypeToTypeMeta(dtype));
  tensor.unsafeGetTensorImpl()->set_sizes_contiguous({0});
  return tensor;
}

// A Python number the dispatcher handed to Python as a number must be promoted as one.
void mark_wrapped_number(const at::Tensor& scalar) {
  TORCH_CHECK_VALUE(scalar.dim() == 0 && scalar.is_cpu(), "only a 0-dim CPU tensor can wrap a number");
  scalar.unsafeGetTensorImpl()->set_wrapped_number(true);
}

// A new contiguous float32 tensor: `x` rounded to `bits` explicit mantissa bits (0..22), ties to
// even, on the bit patterns (numerics.round_mantissa: the same integer steps, modulo 2**32 as
// numpy's int32 ones wrap). A NaN is kept: a payload only in the dropped bits would round to
// infinity. Branch-free, so the compiler vectorizes the loop.
at::Tensor round_mantissa(const at::Tensor& x, int64_t bits) {
  TORCH_CHECK_VALUE(x.scalar_type() == at::kFloat && x.is_cpu(), "round_mantissa expects a float32 CPU tensor");
  TORCH_CHECK_VALUE(bits >= 0 && bits <= 22, "round_mantissa keeps 0..22 mantissa bits, got ", bits);
  const auto input = x.contiguous();
  auto out = at::empty(input.sizes(), input.options());
  const auto* source = static_cast<const uint32_t*>(input.const_data_ptr());
  auto* target = static_cast<uint32_t*>(out.mutable_data_ptr());
  const auto drop = static_cast<uint32_t>(23 - bits);
  const uint32_t half_less_one = (1u << (drop - 1)) - 1u;
  const uint32_t kept = ~((1u << drop) - 1u);
  at::parallel_for(0, input.numel(), at::internal::GRAIN_SIZE, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const uint32_t pattern = source[i];
      const uint32_t rounded = (((pattern >> drop) & 1u) + half_less_one + pattern) & kept;
      target[i] = (pattern & 0x7fffffffu) > 0x7f800000u ? pattern : rounded;
    }
  });
  return out;
}

// The 4 partials in the last dim of float32 `partials` combined pairwise, neighbours first:
// (p0 + p1) + (p2 + p3), each add rounded to float32; a new contiguous tensor without that dim.
at::Tensor combine4(const at::Tensor& partials) {
  TORCH_CHECK_VALUE(partials.scalar_type() == at::kFloat && partials.is_cpu() && partials.dim() >= 1 &&
                        partials.size(-1) == 4,
                    "combine4 expects a float32 CPU tensor whose last dim has 4 partials");
  auto out = at::empty(partials.sizes().slice(0, partials.dim() - 1), partials.options());
  const auto p0 = partials.select(-1, 0), p1 = partials.select(-1, 1);
  const auto p2 = partials.select(-1, 2), p3 = partials.select(-1, 3);
  auto iter = at::TensorIteratorConfig()
                  .add_output(out)
                  .add_const_input(p0)
                  .add_const_input(p1)
                  .add_const_input(p2)
                  .add_const_input(p3)
                  .build();
  iter.for_each([](char** data, const int64_t* strides, int64_t n) {
    constexpr int64_t step = sizeof(float);
    if (strides[0] == step && strides[1] == step && strides[2] == step && strides[3] == step && strides[4] == step) {
      auto* __restrict sum = reinterpret_cast<float*>(data[0]);
      const auto* __restrict a = reinterpret_cast<const float*>(data[1]);
      const auto* __restrict b = reinterpret_cast<const float*>(data[2]);
      const auto* __restrict c = reinterpret_cast<const float*>(data[3]);
      const auto* __restrict d = reinterpret_cast<const float*>(data[4]);
      for (int64_t i = 0; i < n; ++i) {  // vectorized: the same adds, lane by lane
        sum[i] = (a[i] + b[i]) + (c[i] + d[i]);
      }
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      const auto partial = [&](int k) { return *reinterpret_cast<const float*>(data[k] + i * strides[k]); };
      *reinterpret_cast<float*>(data[0] + i * strides[0]) = (partial(1) + partial(2)) + (partial(3) + partial(4));
    }
  });
  return out;
}

// Each lane's float32 sum over the steps of `rows` [outer, steps, lanes], from +0 in step order,
// every add rounded (reductions.part_sums: what numpy's add.reduce over the first axis of a
// C-ordered (steps, n) array computes, adding it row by row).
at::Tensor lane_sums(const at::Tensor& rows) {
  TORCH_CHECK_VALUE(rows.scalar_type() == at::kFloat && rows.is_cpu() && rows.dim() == 3,
                    "lane_sums expects a float32 CPU tensor [outer, steps, lanes]");
  const auto input = rows.contiguous();
  const int64_t outer = input.size(0), steps = input.size(1), lanes = input.size(2);
  auto out = at::zeros({outer, lanes}, input.options());
  const float* source = input.const_data_ptr<float>();
  float* target = out.mutable_data_ptr<float>();
  const int64_t grain = std::max<int64_t>(1, at::internal::GRAIN_SIZE / std::max<int64_t>(1, steps * lanes));
  at::parallel_for(0, outer, grain, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      float* __restrict sums = target + o * lanes;
      const float* __restrict row = source + o * steps * lanes;
      for (int64_t step = 0; step < steps; ++step, row += lanes) {
        for (int64_t lane = 0; lane < lanes; ++lane) {
          sums[lane] += row[lane];
        }
      }
    }
  });
  return out;
}

}  // namespace

TORCH_LIBRARY(mluverify_native, m) {
  m.def("install(int cards) -> bool", &install);
  m.def("cards() -> int", &cards);
  m.def("empty_on(int index, ScalarType dtype) -> Tensor", &empty_on);
  m.def("mark_wrapped_number(Tensor scalar) -> ()", &mark_wrapped_number);
  m.def("round_mantissa(Tensor x, int bits) -> Tensor", &round_mantissa);
  m.def("combine4(Tensor partials) -> Tensor", &combine4);
  m.def("lane_sums(Tensor rows) -> Tensor", &lane_sums);
}
