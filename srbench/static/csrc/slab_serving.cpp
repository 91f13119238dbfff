// A CPU allocator that serves chosen allocations of the calling thread from planned slab addresses.
//
// Some ops have no out variant that writes into a given buffer (layer_norm, scaled dot-product
// attention, embedding_bag, LSTM, the fused transformer encoder layer: ATen's generated .out
// overloads allocate the result and copy it). Their results can still live in the planned slab if
// the allocation that becomes the result is served from the slab. No library provides a CPU
// allocator hook for that: CUDA has CUDAPluggableAllocator, CPU has nothing
// (pytorch/pytorch#132446 asks for torch.cpu.change_current_allocator), so this file is written by
// hand against c10's public Allocator interface: a c10::Allocator that wraps the CPU allocator in
// place when it is installed and delegates every allocation to it, except while a thread is
// *armed*.
//
// What to serve is a *sequence* (sequence()), made once per op at prepare time from a recording
// (record(), recorded(): the calling thread's allocations during one call of the op, sizes and
// addresses, and the frees of them through their DataPtrs, from which the caller finds which
// allocation became which result and which the op frees before it returns, its scratch, with its
// lifetime within the op): the sizes of the op's allocations up to the last one served, and the
// indices of the allocations to serve (results and scratch). Frees are logged by swapping the
// base deleter of each DataPtr delegated while recording for one that logs, then calls it; memory
// that c10's raw_allocate hands out is freed through raw_deleter(), not logged, so it never looks
// freed and is never served. Allocations made on other threads (OpenMP workers) are not seen.
// Arming (arm(sequence, address...)) gives each served index its address: from then on the
// allocator counts the calling thread's allocations; the allocation with a served index gets its
// address, every other allocation is delegated. An allocation whose size is not the recorded one
// means the op took another path (another thread count, another kernel): the thread disarms and
// serves nothing more (correct, just unmanaged). The thread disarms itself once the last served
// index is passed too, and disarm() (called right after the op) makes sure no later allocation can
// be served. Other threads are never affected: every state is thread_local.
//
// A served DataPtr frees nothing (the slab owns the memory: served scratch the op frees stays in
// the slab, where the plan gives its bytes to later allocations) and has a context distinct from
// its data pointer, so c10's raw_allocate, which asserts that they are equal, fails loudly
// instead of handing slab memory to a caller that would free() it.
//
// A sequence can also give slab segments back part-way through the op (sequence(..., release_at,
// released)): right before the allocation with index release_at (the result the op allocates once
// its scratch is freed, an output the slab does not serve), the storages armed for it are reset
// (their memory freed, their size 0; the run takes them again next time with resize_), so that
// allocation lands in memory the slab no longer holds, as eager's allocator reuses freed scratch.
// The plan lays out only records dead by then in those segments; the hook checks it at run time
// too: each served allocation in a released segment counts as pending until its DataPtr is freed,
// and the storages are reset only if none is pending (and the thread is still armed, i.e. every
// size so far was the recorded one). Otherwise they are given back after the op, as before.
//
// The functions are plain CPython functions (METH_FASTCALL): one call costs well under a
// microsecond, which matters on models whose ops take a few microseconds each.

#include <Python.h>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/StorageImpl.h>

#include <atomic>

#include <cstdint>
#include <vector>

namespace {

// Served allocations of one op: its results and the scratch it frees before returning (an LSTM
// over 32 steps serves some hundred); the table arm() fills is sized once, never reallocated.
constexpr Py_ssize_t kMaxServed = 1024;
constexpr const char* kSequenceName = "srbench.slab_serving.sequence";

struct Sequence {
  std::vector<size_t> sizes;    // the op's allocations, in order, up to the last one served
  std::vector<int64_t> served;  // the indices served, in the order arm() gives their addresses
  std::vector<int32_t> slot;    // per index of sizes: its position in served, or -1
  int64_t release_at = -1;      // the index of sizes before which the armed storages are reset, or -1
  std::vector<bool> released;   // per position in served: whether it lies in a released storage
  Py_ssize_t storages = 0;      // storages arm() takes after the addresses: 1 if release_at >= 0
};

// One event of a recording: an allocation (its size and address) or a free (of an address).
struct Event {
  bool freed;
  size_t nbytes;
  void* address;
};

struct ThreadState {
  const Sequence* armed = nullptr;  // nullptr: disarmed
  // the capsule owning the armed sequence, held until the next arm() or disarm() (which run with
  // the GIL; allocate() may not, so disarming itself there only forgets the pointer)
  PyObject* held = nullptr;
  std::vector<void*> addresses = std::vector<void*>(kMaxServed);
  size_t count = 0;  // allocations counted since arm()
  c10::StorageImpl* release = nullptr;  // the storage to reset at the sequence's release_at
  // served allocations in the released storage not yet freed (decremented by their deleter)
  std::atomic<int64_t> pending{0};
  std::vector<Event> log;
};

thread_local ThreadState state;
// Whether this thread records, apart from its state: a deleter may run on any thread, also one
// that never allocated (or one exiting, whose state is gone), and reading this plain flag
// constructs nothing there.
thread_local bool recording = false;
char served_context;  // the context of every served DataPtr: never its data pointer

void free_nothing(void*) {}

// The deleter of a served allocation in a storage released part-way through the op: its context
// is the arming thread's pending count.
void free_pending(void* context) { static_cast<std::atomic<int64_t>*>(context)->fetch_sub(1); }

// The base allocator's deleter, and one that logs the free on a recording thread before calling
// it: a recording swaps it into the DataPtrs it delegates (data and context stay the same), so
// the order of the op's frees, and so each allocation's lifetime within the op, is known.
c10::DeleterFnPtr base_deleter = nullptr;

void logged_free(void* pointer) {
  if (recording) state.log.push_back({true, 0, pointer});
  base_deleter(pointer);
}

class SlabServingAllocator final : public c10::Allocator {
 public:
  explicit SlabServingAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t nbytes) override {
    ThreadState& s = state;
    if (s.armed != nullptr) {
      const Sequence& sequence = *s.armed;
      size_t index = s.count++;
      if (sequence.sizes[index] != nbytes) {
        s.armed = nullptr;  // another path than the recorded one: serve nothing more
      } else {
        if (index + 1 == sequence.sizes.size()) s.armed = nullptr;  // the last index of the sequence
        if (static_cast<int64_t>(index) == sequence.release_at && s.release != nullptr && s.pending.load() == 0) {
          s.release->reset();  // frees the segment's memory: what this allocation may take
          s.release = nullptr;
        }
        int32_t slot = sequence.slot[index];
        if (slot >= 0 && sequence.released[slot]) {
          s.pending.fetch_add(1);
          return {s.addresses[slot], &s.pending, &free_pending, c10::Device(c10::DeviceType::CPU)};
        }
        if (slot >= 0) return {s.addresses[slot], &served_context, &free_nothing, c10::Device(c10::DeviceType::CPU)};
      }
    }
    c10::DataPtr result = base_->allocate(nbytes);
    if (recording) {
      s.log.push_back({false, nbytes, result.get()});
      if (base_deleter != nullptr) result.compare_exchange_deleter(base_deleter, &logged_free);
    }
    return result;
  }

  c10::DeleterFnPtr raw_deleter() const override { return base_->raw_deleter(); }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    base_->copy_data(dest, src, count);
  }

 private:
  c10::Allocator* base_;
};

SlabServingAllocator* installed = nullptr;

constexpr uint8_t kPriority = 100;  // above c10's default CPU allocator (0)

PyObject* install(PyObject*, PyObject*) {
  if (installed == nullptr) {
    c10::Allocator* base = c10::GetCPUAllocator();
    auto* serving = new SlabServingAllocator(base);  // lives as long as the process: c10 keeps the pointer
    c10::SetCPUAllocator(serving, kPriority);
    if (c10::GetCPUAllocator() != serving) {
      delete serving;
      Py_RETURN_FALSE;  // an allocator of higher priority is installed: nothing is served
    }
    installed = serving;
    base_deleter = base->raw_deleter();
  }
  Py_RETURN_TRUE;
}

void free_sequence(PyObject* capsule) {
  delete static_cast<Sequence*>(PyCapsule_GetPointer(capsule, kSequenceName));
}

// sequence(sizes, served[, release_at, released]): sizes, a tuple of the op's allocation sizes up
// to the last one served (or release_at); served, a tuple of the indices to serve (at most
// kMaxServed, each below len(sizes)); release_at, the index of sizes before which the storage
// armed after the addresses is reset; released, a tuple of the positions in served lying in it.
PyObject* sequence(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if ((nargs != 2 && nargs != 4) || !PyTuple_Check(args[0]) || !PyTuple_Check(args[1]) ||
      (nargs == 4 && (!PyLong_Check(args[2]) || !PyTuple_Check(args[3])))) {
    PyErr_SetString(PyExc_TypeError, "sequence takes sizes, served indices[, release index, released positions]");
    return nullptr;
  }
  auto* made = new Sequence();
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args[0]); ++i) {
    made->sizes.push_back(static_cast<size_t>(PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(args[0], i))));
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args[1]); ++i) {
    made->served.push_back(static_cast<int64_t>(PyLong_AsLongLong(PyTuple_GET_ITEM(args[1], i))));
  }
  bool valid = !PyErr_Occurred() && !made->served.empty() &&
               made->served.size() <= static_cast<size_t>(kMaxServed);
  made->slot.assign(made->sizes.size(), -1);
  for (size_t k = 0; k < made->served.size() && valid; ++k) {
    int64_t index = made->served[k];
    valid = index >= 0 && static_cast<size_t>(index) < made->sizes.size() && made->slot[index] < 0;
    if (valid) made->slot[index] = static_cast<int32_t>(k);
  }
  made->released.assign(made->served.size(), false);
  if (nargs == 4 && valid) {
    made->release_at = PyLong_AsLongLong(args[2]);
    made->storages = 1;
    valid = !PyErr_Occurred() && made->release_at >= 0 && static_cast<size_t>(made->release_at) < made->sizes.size();
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args[3]) && valid; ++i) {
      long long position = PyLong_AsLongLong(PyTuple_GET_ITEM(args[3], i));
      valid = !PyErr_Occurred() && position >= 0 && static_cast<size_t>(position) < made->served.size();
      if (valid) made->released[position] = true;
    }
  }
  if (!valid) {
    delete made;
    if (!PyErr_Occurred()) {
      PyErr_SetString(PyExc_ValueError,
                      "served indices must be 1 to 1024 distinct indices into sizes, the release index one "
                      "too, the released positions positions in served");
    }
    return nullptr;
  }
  PyObject* capsule = PyCapsule_New(made, kSequenceName, free_sequence);
  if (capsule == nullptr) delete made;
  return capsule;
}

// arm(sequence, address...[, storage]): one address for each served index of the sequence, in its
// order; then, for a sequence with a release index, the address of the c10::StorageImpl to reset
// there (an UntypedStorage's _cdata; the caller keeps the storage alive until disarm()).
PyObject* arm(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  ThreadState& s = state;
  s.armed = nullptr;
  s.release = nullptr;
  auto* armed = nargs > 0 ? static_cast<const Sequence*>(PyCapsule_GetPointer(args[0], kSequenceName)) : nullptr;
  auto addresses = armed != nullptr ? static_cast<Py_ssize_t>(armed->served.size()) : 0;
  if (armed == nullptr || nargs - 1 != addresses + armed->storages) {
    if (!PyErr_Occurred()) {
      PyErr_SetString(PyExc_TypeError, "arm takes a sequence, one address per served index and its storage to release");
    }
    return nullptr;
  }
  for (Py_ssize_t k = 1; k <= addresses; ++k) {
    s.addresses[k - 1] = PyLong_AsVoidPtr(args[k]);
  }
  if (armed->storages > 0) s.release = static_cast<c10::StorageImpl*>(PyLong_AsVoidPtr(args[addresses + 1]));
  if (PyErr_Occurred()) return nullptr;
  s.pending.store(0);
  Py_INCREF(args[0]);
  Py_XSETREF(s.held, args[0]);
  s.count = 0;
  s.armed = armed;
  Py_RETURN_NONE;
}

PyObject* disarm(PyObject*, PyObject*) {
  state.armed = nullptr;
  state.release = nullptr;
  Py_CLEAR(state.held);
  Py_RETURN_NONE;
}

PyObject* record(PyObject*, PyObject*) {
  state.log.clear();
  recording = true;
  Py_RETURN_NONE;
}

PyObject* recorded(PyObject*, PyObject*) {
  ThreadState& s = state;
  recording = false;
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(s.log.size()));
  if (list == nullptr) return nullptr;
  for (size_t i = 0; i < s.log.size(); ++i) {
    const Event& event = s.log[i];
    auto address = static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(event.address));
    PyObject* item = event.freed ? Py_BuildValue("(OK)", Py_None, address)
                                 : Py_BuildValue("(KK)", static_cast<unsigned long long>(event.nbytes), address);
    if (item == nullptr) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), item);
  }
  s.log.clear();
  return list;
}

PyMethodDef methods[] = {
    {"install", install, METH_NOARGS, "Install the serving allocator over the CPU allocator; False if refused."},
    {"sequence", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(sequence)), METH_FASTCALL,
     "What to serve of one op's allocations: sequence(sizes, served indices[, release index, released positions])."},
    {"arm", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(arm)), METH_FASTCALL,
     "Serve this thread's allocations of a sequence: arm(sequence, address...[, storage to release])."},
    {"disarm", disarm, METH_NOARGS, "Serve nothing more on this thread."},
    {"record", record, METH_NOARGS, "Record this thread's allocations and frees."},
    {"recorded", recorded, METH_NOARGS,
     "Stop recording; each event since record(): (nbytes, address) an allocation, (None, address) a free."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

#define SRB_CONCAT_(a, b) a##b
#define SRB_CONCAT(a, b) SRB_CONCAT_(a, b)
#define SRB_STRING_(a) #a
#define SRB_STRING(a) SRB_STRING_(a)

static PyModuleDef module = {PyModuleDef_HEAD_INIT, SRB_STRING(TORCH_EXTENSION_NAME), nullptr, -1, methods};

PyMODINIT_FUNC SRB_CONCAT(PyInit_, TORCH_EXTENSION_NAME)(void) { return PyModule_Create(&module); }
