// The index core: the per-op work of a Dumper with layout="index" at levels 0 and 1, in C++.
//
// For each op, `begin` binds its inputs to the schema (the OpInfo's parameters), summarizes
// each tensor (or finds its unchanged summary), and `finish` adds the results and writes the
// op's journal frame with one write(2) as pickle protocol 4 — the frame `_index` reads back:
// ((seq, op, name, path, parent, non_tensors), [tensor columns, ...], None).
//
// Why C++: each op of a forward evicts the interpreter's code and data from the caches, so the
// same work in Python costs several times what it costs back to back (benchmarks/
// dump_overhead.py prints both). The Python Dumper does everything else: level 2, the Cambricon
// layout, use_cpu, ops run while dispatch or function modes are on, or while device work is
// queued.
//
// Tensors whose memory is host memory (CPU, and PrivateUse1 when the Dumper says it is the
// emulated MLU) are read here: level 0's first values in logical order, level 1's statistics in
// one pass over a dense block of floating values. Any other tensor (other devices, negative or
// conjugate views, complex or unlisted dtypes, statistics of integers or of overlapping
// layouts) is summarized by the Python `summarize` the Summaries hold, so every index column
// comes from one definition of what a summary is.
#include <torch/extension.h>

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "_stats.h"

namespace py = pybind11;

namespace {

// Pickle opcodes of plain data only (the journal's unpickler refuses globals), protocol 2's.
class Pickle {
 public:
  std::string bytes;

  void none() { bytes += 'N'; }
  void boolean(bool value) { bytes += value ? '\x88' : '\x89'; }
  void mark() { bytes += '('; }
  void tuple() { bytes += 't'; }            // the items since the last mark
  void list() { bytes += "]("; }            // an empty list, then a mark for its items
  void appends() { bytes += 'e'; }          // the items since the mark, into the list
  void integer(int64_t value) {
    if (value >= INT32_MIN && value <= INT32_MAX) {
      bytes += 'J';
      little_endian(static_cast<uint32_t>(static_cast<int32_t>(value)), 4);
    } else {
      bytes += "\x8a\x08";  // LONG1: 8 bytes of two's complement
      little_endian(static_cast<uint64_t>(value), 8);
    }
  }
  void real(double value) {
    uint64_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    bytes += 'G';
    for (int shift = 56; shift >= 0; shift -= 8) {
      bytes += static_cast<char>((bits >> shift) & 0xff);  // big-endian
    }
  }
  void text(const std::string& value) {
    bytes += 'X';
    little_endian(value.size(), 4);
    bytes += value;
  }
  // A Python value of the kinds a summary's columns hold (None, bool, int, float, str, lists).
  void object(py::handle value) {
    if (value.is_none()) {
      none();
    } else if (PyBool_Check(value.ptr())) {
      boolean(value.ptr() == Py_True);
    } else if (PyLong_Check(value.ptr())) {
      integer(value.cast<int64_t>());
    } else if (PyFloat_Check(value.ptr())) {
      real(PyFloat_AS_DOUBLE(value.ptr()));
    } else if (PyUnicode_Check(value.ptr())) {
      text(value.cast<std::string>());
    } else if (PyList_Check(value.ptr())) {
      list();
      for (py::handle item : value) object(item);
      appends();
    } else {
      throw py::type_error("mluverify index core: a summary column of type " +
                           std::string(Py_TYPE(value.ptr())->tp_name));
    }
  }

  void little_endian(uint64_t value, int size) {
    for (int i = 0; i < size; ++i) bytes += static_cast<char>((value >> (8 * i)) & 0xff);
  }
};

struct Parameter {
  std::string name, label;
  bool positional, has_default, tensors, written;
  py::object default_value;
};

struct Plan {
  std::string qualified, name;
  std::vector<Parameter> parameters;
};

// A summary kept while its tensor is unchanged (same TensorImpl, same version counter).
struct Entry {
  c10::weak_intrusive_ptr<c10::TensorImpl> tensor;
  int64_t version;
  std::string columns;  // the pickled summary columns, dtype to inf
};

const char* dtype_text(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kLong: return "int64";
    case at::kInt: return "int32";
    case at::kShort: return "int16";
    case at::kChar: return "int8";
    case at::kByte: return "uint8";
    case at::kBool: return "bool";
    default: return nullptr;
  }
}

constexpr int64_t kHead = 10;

// What the index cores of one level share across dumps, as the Python dumper's SHARED_CACHE:
// op plans, and summaries of tensors while they are unchanged (a model's weights are
// summarized once). Each dump has its own IndexCore for the op in progress.
struct Summaries {
  Summaries(int level, py::object summarize) : level(level), summarize(std::move(summarize)) {}

  // Forgets every summary (a later dump summarizes afresh).
  void clear() {
    cache.clear();
    pending.clear();
  }

  int level;
  py::object summarize;  // _summary.summarize, for the tensors not read here
  std::unordered_map<PyObject*, Plan> plans;
  std::unordered_map<c10::TensorImpl*, Entry> cache;
  std::vector<Entry> pending;  // summaries made during the last op, stored at the next
  size_t sweep_at = 4096;
};

class IndexCore {
 public:
  IndexCore(std::shared_ptr<Summaries> shared, bool host_privateuse1)
      : shared_(std::move(shared)) {
    if (host_privateuse1) host_device_ = c10::DeviceType::PrivateUse1;
  }

  // Binds and summarizes an op's inputs (settling the previous op's results first).
  void begin(py::handle info, py::tuple args, py::dict kwargs) {
    settle();
    plan_ = &plan_of(info);
    tensors_.clear();
    non_tensors_.clear();
    const auto& parameters = plan_->parameters;
    for (size_t i = 0; i < parameters.size(); ++i) {
      const Parameter& parameter = parameters[i];
      py::handle value;
      if (i < args.size() && parameter.positional) {
        value = args[i];
      } else if (kwargs.contains(parameter.name.c_str())) {
        value = kwargs[parameter.name.c_str()];
      } else if (parameter.has_default) {
        value = parameter.default_value;
      } else {
        continue;
      }
      add_value(parameter.label, "input", value, parameter.tensors);
      if (parameter.written && THPVariable_Check(value.ptr())) {
        shared_->cache.erase(THPVariable_Unpack(value.ptr()).unsafeGetTensorImpl());
      }
    }
  }

  // Adds the results (unless the op raised) and writes the op's frame to the journal `fd`.
  void finish(int fd, int64_t seq, const std::string& path, const std::string& parent,
              py::handle output, bool raised) {
    if (!raised && !output.is_none()) add_value("cnnl_result", "result", output, true);
    Pickle body;
    body.mark();  // the frame
    body.mark();  // the op's columns
    body.integer(seq);
    body.text(plan_->qualified);
    body.text(plan_->name);
    body.text(path);
    body.text(parent);
    body.text(non_tensors_);
    body.tuple();
    body.list();
    body.bytes += tensors_;
    body.appends();
    body.none();
    body.tuple();
    body.bytes += '.';
    // Protocol 4 with one FRAME: an unpickler reads it in one go, not an opcode at a time.
    Pickle frame;
    frame.bytes = "\x80\x04\x95";
    frame.little_endian(body.bytes.size(), 8);
    frame.bytes += body.bytes;
    write_frame(fd, frame.bytes);
  }

 private:
  const Plan& plan_of(py::handle info) {
    auto found = shared_->plans.find(info.ptr());
    if (found != shared_->plans.end()) return found->second;
    Plan plan{info.attr("qualified").cast<std::string>(), info.attr("name").cast<std::string>(),
              {}};
    for (py::handle parameter : info.attr("parameters")) {
      plan.parameters.push_back(Parameter{
          parameter.attr("name").cast<std::string>(), parameter.attr("label").cast<std::string>(),
          parameter.attr("positional").cast<bool>(), parameter.attr("has_default").cast<bool>(),
          parameter.attr("tensors").cast<bool>(), parameter.attr("written").cast<bool>(),
          py::reinterpret_borrow<py::object>(parameter.attr("default"))});
    }
    // OpInfo objects live as long as the process (op_info caches them), as does this entry.
    info.inc_ref();
    return shared_->plans.emplace(info.ptr(), std::move(plan)).first->second;
  }

  void add_value(const std::string& label, const char* role, py::handle value, bool tensors) {
    if (THPVariable_Check(value.ptr())) {
      add_tensor(label, role, value);
    } else if (tensors && (PyList_Check(value.ptr()) || PyTuple_Check(value.ptr())) &&
               holds_tensor(value)) {
      size_t index = 0;
      for (py::handle item : value) {
        const std::string item_label = label + "[" + std::to_string(index++) + "]";
        if (THPVariable_Check(item.ptr())) {
          add_tensor(item_label, role, item);
        } else {
          add_text(item_label, item);
        }
      }
    } else {
      add_text(label, value);
    }
  }

  static bool holds_tensor(py::handle sequence) {
    for (py::handle item : sequence) {
      if (THPVariable_Check(item.ptr())) return true;
    }
    return false;
  }

  void add_text(const std::string& label, py::handle value) {
    if (!non_tensors_.empty()) non_tensors_ += ", ";
    non_tensors_ += label;
    non_tensors_ += '=';
    non_tensors_ += py::repr(value).cast<std::string>();
  }

  void add_tensor(const std::string& label, const char* role, py::handle value) {
    const at::Tensor& tensor = THPVariable_Unpack(value.ptr());
    Pickle row;
    row.mark();
    row.text(label);
    row.text(role);
    row.none();  // file: none in the index layout
    row.bytes += columns_of(tensor, value);
    row.boolean(false);  // degraded: only level 2 degrades
    row.none();          // offset and nbytes: level 2 only
    row.none();
    row.tuple();
    tensors_ += row.bytes;
  }

  // The pickled summary columns of a tensor: from the cache while it is unchanged.
  std::string columns_of(const at::Tensor& tensor, py::handle value) {
    c10::TensorImpl* impl = tensor.unsafeGetTensorImpl();
    const bool versioned = impl->version_counter().enabled();  // not inference tensors
    if (tensor.numel() == 0) return summarized(tensor, value);  // its metadata decides
    if (versioned) {
      auto found = shared_->cache.find(impl);
      if (found != shared_->cache.end() && !found->second.tensor.expired() &&
          found->second.version == impl->version_counter().current_version()) {
        return found->second.columns;
      }
    }
    std::string columns = summarized(tensor, value);
    if (versioned) {
      // Remembered at the next op: an in-place op bumps the version after its handler returns.
      shared_->pending.push_back({c10::weak_intrusive_ptr<c10::TensorImpl>(
                              c10::intrusive_ptr<c10::TensorImpl>::reclaim_copy(impl)),
                          0, columns});
    }
    return columns;
  }

  void settle() {
    for (Entry& entry : shared_->pending) {
      auto tensor = entry.tensor.lock();
      if (!tensor) continue;
      entry.version = tensor->version_counter().current_version();
      shared_->cache.insert_or_assign(tensor.get(), std::move(entry));
    }
    shared_->pending.clear();
    if (shared_->cache.size() >= shared_->sweep_at) sweep();
  }

  // Entries of freed tensors go in sweeps as the cache grows, not as each tensor dies.
  void sweep() {
    for (auto it = shared_->cache.begin(); it != shared_->cache.end();) {
      it = it->second.tensor.expired() ? shared_->cache.erase(it) : std::next(it);
    }
    shared_->sweep_at = std::max<size_t>(4096, 2 * shared_->cache.size());
  }

  std::string summarized(const at::Tensor& tensor, py::handle value) {
    const char* dtype = dtype_text(tensor.scalar_type());
    const bool readable = tensor.layout() == at::kStrided && !tensor.is_neg() &&
                          !tensor.is_conj() && dtype != nullptr &&
                          (tensor.device().is_cpu() || tensor.device().type() == host_device_);
    Pickle columns;
    if (!readable || (shared_->level == 1 && tensor.numel() > 0 &&
                      !(at::isFloatingType(tensor.scalar_type()) &&
                        tensor.is_non_overlapping_and_dense()))) {
      // One definition of a summary: the Python one, for what is not read here.
      py::tuple fields = shared_->summarize(value, shared_->level).attr("fields");
      for (py::handle field : fields) columns.object(field);
      return columns.bytes;
    }
    columns.text(dtype);
    columns.list();
    for (int64_t size : tensor.sizes()) columns.integer(size);
    columns.appends();
    columns.list();
    for (int64_t stride : tensor.strides()) columns.integer(stride);
    columns.appends();
    columns.integer(tensor.numel());
    columns.integer(shared_->level);
    if (tensor.numel() == 0) {
      for (int i = 0; i < 7; ++i) columns.none();  // head and statistics
    } else if (shared_->level == 0) {
      head(tensor, columns);
      for (int i = 0; i < 6; ++i) columns.none();
    } else {
      columns.none();
      statistics(tensor, columns);
    }
    return columns.bytes;
  }

  // The first values in logical order, as floats, whatever the strides.
  static void head(const at::Tensor& tensor, Pickle& columns) {
    const int64_t count = std::min(kHead, tensor.numel());
    const auto sizes = tensor.sizes();
    const auto strides = tensor.strides();
    std::vector<int64_t> index(sizes.size(), 0);
    columns.list();
    AT_DISPATCH_ALL_TYPES_AND3(at::kHalf, at::kBFloat16, at::kBool, tensor.scalar_type(), "head",
                               [&] {
      const scalar_t* data = tensor.const_data_ptr<scalar_t>();
      for (int64_t n = 0; n < count; ++n) {
        int64_t offset = 0;
        for (size_t d = 0; d < index.size(); ++d) offset += index[d] * strides[d];
        columns.real(static_cast<double>(data[offset]));
        for (int64_t d = static_cast<int64_t>(index.size()) - 1; d >= 0; --d) {
          if (++index[d] < sizes[d]) break;
          index[d] = 0;
        }
      }
    });
    columns.appends();
  }

  // min, max, mean, abs_sum, nan, inf as torch's reductions give them over all values (NaN
  // and infinities propagate), from one pass over the finite ones: as _summary._propagated.
  static void statistics(const at::Tensor& tensor, Pickle& columns) {
    const int64_t numel = tensor.numel();
    mluverify_dump::Partial stats;
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, tensor.scalar_type(), "stats", [&] {
      stats = mluverify_dump::reduce(tensor.const_data_ptr<scalar_t>(), numel);
    });
    const int64_t inf = stats.posinf + stats.neginf;
    if (stats.nan) {
      const double nan = std::numeric_limits<double>::quiet_NaN();
      for (int i = 0; i < 4; ++i) columns.real(nan);
      columns.integer(stats.nan);
      columns.integer(inf);
      return;
    }
    const double infinity = std::numeric_limits<double>::infinity();
    const bool finite = numel - inf > 0;
    const double low = stats.neginf ? -infinity : (finite ? stats.lo : infinity);
    const double high = stats.posinf ? infinity : (finite ? stats.hi : -infinity);
    const double total = stats.posinf && stats.neginf ? std::numeric_limits<double>::quiet_NaN()
                         : stats.posinf                ? infinity
                         : stats.neginf                ? -infinity
                                                       : stats.sum;
    columns.real(low);
    columns.real(high);
    columns.real(total / static_cast<double>(numel));
    columns.real(inf ? infinity : stats.abs_sum);
    columns.integer(0);
    columns.integer(inf);
  }

  static void write_frame(int fd, const std::string& frame) {
    std::string data(8, '\0');
    const uint64_t length = frame.size();
    for (int i = 0; i < 8; ++i) data[i] = static_cast<char>((length >> (8 * i)) & 0xff);
    data += frame;
    const ssize_t written = ::write(fd, data.data(), data.size());
    if (written < 0) {
      PyErr_SetFromErrno(PyExc_OSError);
      throw py::error_already_set();
    }
    if (static_cast<size_t>(written) != data.size()) {  // a short write: the disk is full
      errno = ENOSPC;
      PyErr_SetFromErrno(PyExc_OSError);
      throw py::error_already_set();
    }
  }

  std::shared_ptr<Summaries> shared_;
  c10::DeviceType host_device_ = c10::DeviceType::CPU;  // or the emulated MLU's, host memory
  const Plan* plan_ = nullptr;
  std::string tensors_;      // the pickled tensor tuples of the current op
  std::string non_tensors_;  // "label=repr" of its other values
};

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  py::class_<Summaries, std::shared_ptr<Summaries>>(m, "Summaries")
      .def(py::init<int, py::object>(), py::arg("level"), py::arg("summarize"))
      .def("clear", &Summaries::clear);
  py::class_<IndexCore>(m, "IndexCore")
      .def(py::init<std::shared_ptr<Summaries>, bool>(), py::arg("summaries"),
           py::arg("host_privateuse1"))
      .def("begin", &IndexCore::begin)
      .def("finish", &IndexCore::finish);
}
