#include "leanseq/interop/pickle.h"

#include <cstring>
#include <functional>
#include <unordered_map>
#include <unordered_set>

namespace leanseq::interop {

namespace {

using Kind = PyValue::Kind;

constexpr size_t kMaxStack = 1 << 22;

bool is_container(Kind k) { return k == Kind::list || k == Kind::tuple || k == Kind::dict || k == Kind::ns; }

// Calls fn(child) for each value held directly by `v`.
template <class F>
void for_each_child(const PyValue& v, F&& fn) {
  for (const auto& it : v.items) fn(it);
  for (const auto& [k, x] : v.entries) {
    fn(k);
    fn(x);
  }
}

// Checks the value as a whole (module comment of pickle.h), iteratively: a depth-first walk that
// meets each distinct value once, with the depth and expanded size of each kept.
void check_value(const PyRef& root, uint64_t values_made, const std::function<void(const std::string&)>& fail) {
  struct Seen {
    int depth = 0;
    uint64_t size = 1;
    bool open = true;  // on the walk's current path
  };
  const uint64_t max_size = kMaxExpanded(values_made);
  std::unordered_map<const PyValue*, Seen> seen;
  struct Frame {
    const PyValue* v;
    std::vector<const PyValue*> children;
    size_t next = 0;
  };
  std::vector<Frame> path;
  auto enter = [&](const PyValue* v) {
    seen.emplace(v, Seen{});
    Frame f{v, {}, 0};
    for_each_child(*v, [&](const PyRef& c) { f.children.push_back(c.get()); });
    path.push_back(std::move(f));
    if (path.size() > static_cast<size_t>(kMaxDepth) + 1) fail("values nested more than " + std::to_string(kMaxDepth) + " deep");
  };
  enter(root.get());
  while (!path.empty()) {
    auto& f = path.back();
    if (f.next < f.children.size()) {
      const PyValue* c = f.children[f.next++];
      auto it = seen.find(c);
      if (it == seen.end()) {
        enter(c);
      } else if (it->second.open) {
        fail("a value that contains itself (" + c->describe() + ")");
      }
      continue;
    }
    Seen& s = seen[f.v];
    for (const PyValue* c : f.children) {
      const Seen& cs = seen[c];
      s.depth = std::max(s.depth, cs.depth + 1);
      s.size = std::min(s.size + cs.size, max_size + 1);
    }
    s.open = false;
    if (s.depth > kMaxDepth) fail("values nested more than " + std::to_string(kMaxDepth) + " deep");
    if (s.size > max_size) {
      fail("shared values that unfold to more than " + std::to_string(max_size) + " values (from " +
           std::to_string(values_made) + ")");
    }
    path.pop_back();
  }
}

// torch's typed storage classes and the element type each holds.
const std::map<std::string, std::pair<std::string, int>>& storage_types() {
  static const std::map<std::string, std::pair<std::string, int>> t = {
      {"torch.FloatStorage", {"float32", 4}},   {"torch.DoubleStorage", {"float64", 8}},
      {"torch.HalfStorage", {"float16", 2}},    {"torch.BFloat16Storage", {"bfloat16", 2}},
      {"torch.LongStorage", {"int64", 8}},      {"torch.IntStorage", {"int32", 4}},
      {"torch.ShortStorage", {"int16", 2}},     {"torch.CharStorage", {"int8", 1}},
      {"torch.ByteStorage", {"uint8", 1}},      {"torch.BoolStorage", {"bool", 1}},
  };
  return t;
}

// The classes and functions a fairseq checkpoint refers to. Each is interpreted below by its own
// code; numpy's scalar reconstruction (fairseq's older extra_state holds numpy floats) yields an
// inert placeholder.
bool allowed_global(const std::string& name) {
  static const char* names[] = {"collections.OrderedDict", "argparse.Namespace", "torch._utils._rebuild_tensor_v2",
                                "torch._utils._rebuild_parameter", "numpy.core.multiarray.scalar", "numpy.dtype",
                                "builtins.set", "builtins.frozenset"};
  for (const char* n : names) {
    if (name == n) return true;
  }
  return storage_types().count(name) > 0;
}

class Machine {
 public:
  Machine(const std::string& bytes, size_t& pos, const UnpickleOptions& opt) : b_(bytes), pos_(pos), opt_(opt) {}
  // Values the result does not hold (all of them when the pickle was refused) lose their
  // children here, so that no cycle among them outlives the machine.
  ~Machine() {
    std::unordered_set<const PyValue*> kept;
    if (result_) {
      std::vector<const PyValue*> todo{result_.get()};
      while (!todo.empty()) {
        const PyValue* v = todo.back();
        todo.pop_back();
        if (!kept.insert(v).second) continue;
        for_each_child(*v, [&](const PyRef& c) { todo.push_back(c.get()); });
      }
    }
    for (auto& c : containers_) {
      if (!kept.count(c.get())) {
        c->items.clear();
        c->entries.clear();
      }
    }
  }

  PyRef run() {
    while (true) {
      if (pos_ >= b_.size()) fail("the pickle ends without STOP");
      const size_t at = pos_;
      const auto op = static_cast<unsigned char>(b_[pos_++]);
      switch (op) {
        case 0x80: take(1); break;                     // PROTO
        case 0x95: take(8); break;                     // FRAME: framing is transparent here
        case '.': {                                    // STOP
          if (stack_.size() != 1 || !marks_.empty()) fail("STOP with " + std::to_string(stack_.size()) + " values on the stack");
          check_value(stack_.back(), made_, [this](const std::string& what) { fail(what); });
          result_ = stack_.back();
          return result_;
        }
        case '(': marks_.push_back(stack_.size()); break;                   // MARK
        case ')': push(make(Kind::tuple)); break;                           // EMPTY_TUPLE
        case ']': push(make(Kind::list)); break;                            // EMPTY_LIST
        case '}': push(make(Kind::dict)); break;                            // EMPTY_DICT
        case 0x8f: push(make(Kind::list)); break;                           // EMPTY_SET (as a list)
        case 'N': push(make(Kind::none)); break;                            // NONE
        case 0x88: push(boolean(true)); break;                              // NEWTRUE
        case 0x89: push(boolean(false)); break;                             // NEWFALSE
        case 'J': push(integer(static_cast<int32_t>(le(4)))); break;        // BININT
        case 'K': push(integer(static_cast<int64_t>(le(1)))); break;        // BININT1
        case 'M': push(integer(static_cast<int64_t>(le(2)))); break;        // BININT2
        case 0x8a: push(long_int(le(1))); break;                            // LONG1
        case 0x8b: push(long_int(le(4))); break;                            // LONG4
        case 'G': push(real()); break;                                      // BINFLOAT
        case 0x8c: push(text(Kind::str, le(1))); break;                     // SHORT_BINUNICODE
        case 'X': push(text(Kind::str, le(4))); break;                      // BINUNICODE
        case 0x8d: push(text(Kind::str, le(8))); break;                     // BINUNICODE8
        case 'U': push(text(Kind::str, le(1))); break;                      // SHORT_BINSTRING
        case 'T': push(text(Kind::str, le(4))); break;                      // BINSTRING
        case 'C': push(text(Kind::bytes, le(1))); break;                    // SHORT_BINBYTES
        case 'B': push(text(Kind::bytes, le(4))); break;                    // BINBYTES
        case 0x8e: push(text(Kind::bytes, le(8))); break;                   // BINBYTES8
        case 0x96: push(text(Kind::bytes, le(8))); break;                   // BYTEARRAY8
        case 't': push(sequence(Kind::tuple, pop_mark())); break;           // TUPLE
        case 0x85: push(sequence(Kind::tuple, pop_n(1))); break;            // TUPLE1
        case 0x86: push(sequence(Kind::tuple, pop_n(2))); break;            // TUPLE2
        case 0x87: push(sequence(Kind::tuple, pop_n(3))); break;            // TUPLE3
        case 0x91: push(sequence(Kind::list, pop_mark())); break;           // FROZENSET
        case 'a': {                                                         // APPEND
          auto v = pop();
          append(top(), {v});
          break;
        }
        case 'e': case 0x90: {                                              // APPENDS, ADDITEMS
          auto items = pop_mark();
          append(top(), items);
          break;
        }
        case 's': {                                                         // SETITEM
          auto v = pop();
          auto k = pop();
          set_items(top(), {k, v});
          break;
        }
        case 'u': set_items_from(pop_mark()); break;                        // SETITEMS
        case 'q': memo_[static_cast<uint32_t>(le(1))] = top(); break;       // BINPUT
        case 'r': memo_[static_cast<uint32_t>(le(4))] = top(); break;       // LONG_BINPUT
        case 0x94: memo_[next_memo_++] = top(); break;                      // MEMOIZE
        case 'h': push(memo(le(1))); break;                                 // BINGET
        case 'j': push(memo(le(4))); break;                                 // LONG_BINGET
        case '0': pop(); break;                                             // POP
        case '1': pop_mark(); break;                                        // POP_MARK
        case '2': push(top()); break;                                       // DUP
        case 'c': {                                                         // GLOBAL
          auto module = line(), name = line();
          push(global(module + "." + name, at));
          break;
        }
        case 0x93: {                                                        // STACK_GLOBAL
          auto name = pop(), module = pop();
          if (module->kind != Kind::str || name->kind != Kind::str) fail("STACK_GLOBAL without two strings");
          push(global(module->s + "." + name->s, at));
          break;
        }
        case 'R': {                                                         // REDUCE
          auto args = pop();
          auto callable = pop();
          push(call(callable, args));
          break;
        }
        case 0x81: {                                                        // NEWOBJ
          auto args = pop();
          auto cls = pop();
          push(call(cls, args));
          break;
        }
        case 'b': {                                                         // BUILD
          auto state = pop();
          build(top(), state);
          break;
        }
        case 'Q': push(persistent(pop())); break;                           // BINPERSID
        default: {
          char hex[8];
          std::snprintf(hex, sizeof hex, "0x%02x", op);
          fail(std::string("unsupported pickle opcode ") + hex);
        }
      }
    }
  }

 private:
  PyRef make(Kind k) {
    auto v = std::make_shared<PyValue>();
    v->kind = k;
    ++made_;
    if (is_container(k)) containers_.push_back(v);
    return v;
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw PickleError(opt_.origin + ": not a checkpoint leanseq can read: " + what + " (pickle offset " +
                      std::to_string(pos_) + ")");
  }

  std::string take(uint64_t n) {
    if (n > b_.size() - pos_) fail("a length of " + std::to_string(n) + " bytes runs past the end of the data");
    std::string out = b_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  uint64_t le(int n) {
    const std::string s = take(n);
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[i]);
    return v;
  }
  std::string line() {
    const size_t end = b_.find('\n', pos_);
    if (end == std::string::npos || end - pos_ > 256) fail("a GLOBAL name without its newline");
    std::string s = b_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return s;
  }

  PyRef boolean(bool v) {
    auto p = make(Kind::boolean);
    p->b = v;
    return p;
  }
  PyRef integer(int64_t v) {
    auto p = make(Kind::integer);
    p->i = v;
    return p;
  }
  PyRef long_int(uint64_t n) {
    if (n > 8) {
      take(n);  // larger than 64 bits: kept as a placeholder (only fairseq's magic number is)
      auto p = make(Kind::integer);
      p->s = "long";
      return p;
    }
    const std::string s = take(n);
    uint64_t v = 0;
    for (int i = static_cast<int>(n) - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[i]);
    if (n > 0 && n < 8 && (static_cast<unsigned char>(s[n - 1]) & 0x80)) v |= ~uint64_t{0} << (8 * n);  // sign
    return integer(static_cast<int64_t>(v));
  }
  PyRef real() {
    const std::string s = take(8);
    uint64_t bits = 0;
    for (int i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<unsigned char>(s[i]);  // big-endian
    double d;
    std::memcpy(&d, &bits, sizeof d);
    auto p = make(Kind::real);
    p->f = d;
    return p;
  }
  PyRef text(Kind k, uint64_t n) {
    auto p = make(k);
    p->s = take(n);
    return p;
  }

  void push(PyRef v) {
    if (stack_.size() >= kMaxStack) fail("more than " + std::to_string(kMaxStack) + " values on the stack");
    stack_.push_back(std::move(v));
  }
  PyRef pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() == marks_.back())) fail("a value taken from an empty stack");
    auto v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  PyRef& top() {
    if (stack_.empty()) fail("an empty stack");
    return stack_.back();
  }
  std::vector<PyRef> pop_n(size_t n) {
    std::vector<PyRef> out(n);
    for (size_t i = n; i-- > 0;) out[i] = pop();
    return out;
  }
  std::vector<PyRef> pop_mark() {
    if (marks_.empty()) fail("no MARK to return to");
    const size_t m = marks_.back();
    marks_.pop_back();
    if (m > stack_.size()) fail("a MARK past the stack");
    std::vector<PyRef> out(std::make_move_iterator(stack_.begin() + static_cast<std::ptrdiff_t>(m)),
                           std::make_move_iterator(stack_.end()));
    stack_.resize(m);
    return out;
  }
  PyRef memo(uint64_t key) {
    auto it = memo_.find(static_cast<uint32_t>(key));
    if (it == memo_.end()) fail("memo entry " + std::to_string(key) + " is not set");
    return it->second;
  }

  PyRef sequence(Kind k, std::vector<PyRef> items) {
    auto p = make(k);
    p->items = std::move(items);
    return p;
  }
  void append(const PyRef& list, const std::vector<PyRef>& items) {
    if (list->kind != Kind::list) fail("APPEND to " + list->describe());
    list->items.insert(list->items.end(), items.begin(), items.end());
  }
  void set_items(const PyRef& d, const std::vector<PyRef>& kv) {
    if (!d->is_mapping()) fail("SETITEM on " + d->describe());
    if (kv.size() % 2) fail("SETITEMS with an odd number of values");
    for (size_t i = 0; i < kv.size(); i += 2) {
      d->entries.emplace_back(kv[i], kv[i + 1]);  // a repeated key: the later one wins in get()
    }
  }
  void set_items_from(const std::vector<PyRef>& kv) { set_items(top(), kv); }

  PyRef global(const std::string& name, size_t at) {
    if (!allowed_global(name)) {
      throw PickleError(opt_.origin + ": refuses the pickled reference to '" + name + "' (offset " + std::to_string(at) +
                        "): a fairseq checkpoint holds only tensors, dicts, lists, OrderedDict and argparse.Namespace");
    }
    auto p = make(Kind::global);
    p->s = name;
    return p;
  }

  PyRef call(const PyRef& callable, const PyRef& args) {
    if (callable->kind != Kind::global) fail("a call of " + callable->describe());
    if (args->kind != Kind::tuple) fail("a call of " + callable->s + " with " + args->describe());
    const auto& a = args->items;
    const std::string& f = callable->s;
    if (f == "collections.OrderedDict") {
      auto d = make(Kind::dict);
      if (!a.empty()) {
        if (a[0]->kind != Kind::list) fail("OrderedDict from " + a[0]->describe());
        for (const auto& pair : a[0]->items) {
          if (pair->kind != Kind::tuple || pair->items.size() != 2) fail("OrderedDict from a list of " + pair->describe());
          set_items(d, {pair->items[0], pair->items[1]});
        }
      }
      return d;
    }
    if (f == "argparse.Namespace") return make(Kind::ns);
    if (f == "builtins.set" || f == "builtins.frozenset") {
      return a.empty() ? make(Kind::list) : sequence(Kind::list, a[0]->items);
    }
    if (f == "numpy.core.multiarray.scalar" || f == "numpy.dtype") {
      auto p = make(Kind::none);  // an inert placeholder; nothing reads it
      p->s = f;
      return p;
    }
    if (f == "torch._utils._rebuild_parameter") {
      if (a.empty() || a[0]->kind != Kind::tensor) fail("_rebuild_parameter without a tensor");
      return a[0];
    }
    if (f == "torch._utils._rebuild_tensor_v2") return rebuild_tensor(a);
    fail("a call of " + f);
  }

  std::vector<int64_t> ints(const PyRef& t, const char* what) {
    if (t->kind != Kind::tuple && t->kind != Kind::list) fail(std::string(what) + " is " + t->describe());
    std::vector<int64_t> out;
    for (const auto& v : t->items) {
      if (v->kind != Kind::integer || v->i < 0) fail(std::string(what) + " holds " + v->describe());
      out.push_back(v->i);
    }
    return out;
  }

  PyRef rebuild_tensor(const std::vector<PyRef>& a) {
    if (a.size() < 4 || a[0]->kind != Kind::storage || a[1]->kind != Kind::integer || a[1]->i < 0) {
      fail("_rebuild_tensor_v2 with unexpected arguments");
    }
    auto t = make(Kind::tensor);
    t->tensor = std::make_shared<TensorRef>(*a[0]->tensor);
    t->tensor->offset = a[1]->i;
    t->tensor->sizes = ints(a[2], "a tensor's size");
    t->tensor->strides = ints(a[3], "a tensor's stride");
    if (t->tensor->sizes.size() != t->tensor->strides.size() || t->tensor->sizes.size() > 8) {
      fail("a tensor's size and stride disagree");
    }
    return t;
  }

  // BUILD sets an object's attributes: a Namespace's are its entries; an OrderedDict's
  // (state_dict()'s _metadata) are not items and are left out.
  void build(const PyRef& obj, const PyRef& state) {
    if (obj->kind == Kind::ns) {
      if (state->kind != Kind::dict) fail("a Namespace's state is " + state->describe());
      for (const auto& [k, v] : state->entries) set_items(obj, {k, v});
      return;
    }
    if (obj->kind == Kind::dict && (state->kind == Kind::dict || state->kind == Kind::none)) return;
    if (obj->kind == Kind::none && !obj->s.empty()) return;  // numpy placeholders
    fail("BUILD on " + obj->describe());
  }

  PyRef persistent(const PyRef& pid) {
    // ("storage", <storage type>, key, location, numel) in zip files; the legacy format adds a view.
    if (pid->kind != Kind::tuple || pid->items.size() < 5 || pid->items[0]->kind != Kind::str ||
        pid->items[0]->s != "storage" || pid->items[1]->kind != Kind::global || pid->items[2]->kind != Kind::str ||
        pid->items[4]->kind != Kind::integer) {
      fail("a persistent id that is not a torch storage: " + pid->describe());
    }
    auto it = storage_types().find(pid->items[1]->s);
    if (it == storage_types().end()) fail("a storage of type " + pid->items[1]->s);
    if (pid->items.size() > 5 && pid->items[5]->kind != Kind::none) fail("a storage view (not written since torch 1.0)");
    auto s = make(Kind::storage);
    s->tensor = std::make_shared<TensorRef>();
    s->tensor->storage_key = pid->items[2]->s;
    s->tensor->dtype = it->second.first;
    s->tensor->storage_numel = pid->items[4]->i;
    return s;
  }

  const std::string& b_;
  size_t& pos_;
  const UnpickleOptions& opt_;
  std::vector<PyRef> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint32_t, PyRef> memo_;
  uint32_t next_memo_ = 0;
  uint64_t made_ = 0;               // values made
  std::vector<PyRef> containers_;   // every list, tuple, dict and Namespace made
  PyRef result_;                    // the value returned, once checked
};

}  // namespace

PyValue::~PyValue() {
  // The children whose last reference goes with this value are freed by the outermost destructor
  // on this thread, one at a time, from a list instead of the call stack.
  static thread_local std::vector<PyRef>* pending = nullptr;
  std::vector<PyRef> local;
  const bool outermost = pending == nullptr;
  if (outermost) pending = &local;
  for (auto& it : items) pending->push_back(std::move(it));
  for (auto& [k, x] : entries) {
    pending->push_back(std::move(k));
    pending->push_back(std::move(x));
  }
  if (!outermost) return;
  while (!local.empty()) {
    PyRef v = std::move(local.back());
    local.pop_back();
    v.reset();  // may add its own children to `local`
  }
  pending = nullptr;
}

PyRef PyValue::get(const std::string& key) const {
  if (!is_mapping()) return nullptr;
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    if (it->first->kind == Kind::str && it->first->s == key) return it->second;
  }
  return nullptr;
}

std::string PyValue::describe() const {
  switch (kind) {
    case Kind::none: return s.empty() ? "None" : s;
    case Kind::boolean: return b ? "True" : "False";
    case Kind::integer: return "int " + std::to_string(i);
    case Kind::real: return "float " + std::to_string(f);
    case Kind::str: return "str '" + s.substr(0, 40) + "'";
    case Kind::bytes: return "bytes of length " + std::to_string(s.size());
    case Kind::list: return "a list of " + std::to_string(items.size());
    case Kind::tuple: return "a tuple of " + std::to_string(items.size());
    case Kind::dict: return "a dict of " + std::to_string(entries.size());
    case Kind::ns: return "a Namespace of " + std::to_string(entries.size());
    case Kind::global: return s;
    case Kind::storage: return "a storage";
    case Kind::tensor: return "a tensor";
  }
  return "?";
}

PyRef unpickle(const std::string& bytes, size_t& pos, const UnpickleOptions& opt) {
  if (pos > bytes.size()) throw PickleError(opt.origin + ": not a checkpoint leanseq can read: nothing to unpickle");
  Machine m(bytes, pos, opt);
  return m.run();
}

}  // namespace leanseq::interop
