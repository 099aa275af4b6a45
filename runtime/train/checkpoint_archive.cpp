#include "runtime/train/checkpoint_archive.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "runtime/train/zip_integrity.h"

namespace dtrain {
namespace {

// Far above what any dtrain checkpoint holds (ResNet-50's: 300 code records of a few hundred bytes, a
// data.pkl of 150 KiB), far below what would make checking them slow or large.
constexpr uint64_t kMaxCodeBytes = uint64_t{1} << 22;
constexpr uint64_t kMaxPickleBytes = uint64_t{1} << 28;
constexpr size_t kMaxRecords = size_t{1} << 20;
constexpr size_t kMaxNameLength = 1024;
constexpr size_t kMaxStringLength = size_t{1} << 20;
constexpr size_t kMaxStack = size_t{1} << 20;
constexpr size_t kMaxMemo = size_t{1} << 24;
constexpr size_t kMaxTupleDepth = 4;
constexpr int64_t kMaxDims = 64;

// Why an archive is refused: thrown inside this file, returned as text by checkpoint_archive_problem.
struct ArchiveRefusal {
  std::string why;
};

[[noreturn]] void refuse(std::string why) { throw ArchiveRefusal{std::move(why)}; }

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// A decimal number without sign or leading zeros ("0" itself allowed), as LibTorch numbers records.
bool is_decimal(std::string_view text) {
  return !text.empty() && text.size() <= 9 && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
         (text.size() == 1 || text[0] != '0');
}

// Text quoted for a message: printable ASCII as is, anything else as \xNN, at most 80 characters.
std::string printable(std::string_view text) {
  std::string out = "'";
  for (size_t i = 0; i < text.size() && i < 80; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return out + (text.size() > 80 ? "...'" : "'");
}

// ---- code records ------------------------------------------------------------------------------------

// The type of an attribute, as a class record declares it.
struct AttrType {
  enum class Kind { kTensor, kInt, kFloat, kBool, kStr, kTuple, kClass };
  Kind kind = Kind::kTensor;
  std::vector<AttrType> elements;  // kTuple
  std::string class_name;          // kClass: "__torch__.___torch_mangle_3.Module"
};

struct ClassDecl {
  std::string record;
  std::map<std::string, AttrType> attributes;
};

using Classes = std::map<std::string, ClassDecl>;

// The qualified name of the class a code record declares ("__torch__.Module" for code/__torch__.py,
// "__torch__.___torch_mangle_7.Module" for code/__torch__/___torch_mangle_7.py), or "" for another name.
std::string class_of_record(std::string_view relative) {
  if (relative == "code/__torch__.py") return "__torch__.Module";
  constexpr std::string_view kMangled = "code/__torch__/___torch_mangle_";
  if (!starts_with(relative, kMangled) || !ends_with(relative, ".py")) return "";
  const std::string_view number = relative.substr(kMangled.size(), relative.size() - kMangled.size() - 3);
  if (!is_decimal(number)) return "";
  return "__torch__.___torch_mangle_" + std::string(number) + ".Module";
}

bool is_identifier(std::string_view name) {
  static const std::set<std::string_view> kKeywords = {
      "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del",
      "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda",
      "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield", "print"};
  if (name.empty() || name.size() > kMaxNameLength || starts_with(name, "__") || kKeywords.count(name) > 0) return false;
  const auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!letter(name[0])) return false;
  return std::all_of(name.begin(), name.end(), [&](char c) { return letter(c) || (c >= '0' && c <= '9'); });
}

// A key as TorchScript quotes it: printable ASCII without quotes or backslashes (dtrain's names, optimizer
// state keys such as "0x55c8e8037040" and "params/3").
bool is_key(std::string_view key) {
  return !key.empty() && key.size() <= kMaxNameLength &&
         std::all_of(key.begin(), key.end(), [](char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; });
}

// Parses a type at `text[at...]`, advancing `at`.
std::optional<AttrType> parse_type(std::string_view text, size_t& at, size_t depth) {
  const std::string_view rest = text.substr(at);
  const auto take = [&](std::string_view word, AttrType::Kind kind) -> std::optional<AttrType> {
    if (!starts_with(rest, word)) return std::nullopt;
    at += word.size();
    AttrType type;
    type.kind = kind;
    return type;
  };
  static const std::pair<std::string_view, AttrType::Kind> kScalars[] = {
      {"Tensor", AttrType::Kind::kTensor}, {"int", AttrType::Kind::kInt}, {"float", AttrType::Kind::kFloat},
      {"bool", AttrType::Kind::kBool}, {"str", AttrType::Kind::kStr}};
  for (const auto& [word, kind] : kScalars) {
    if (auto type = take(word, kind)) return type;
  }
  if (starts_with(rest, "Tuple[") && depth < kMaxTupleDepth) {
    at += 6;
    AttrType tuple;
    tuple.kind = AttrType::Kind::kTuple;
    for (;;) {
      std::optional<AttrType> element = parse_type(text, at, depth + 1);
      if (!element || element->kind == AttrType::Kind::kClass || element->kind == AttrType::Kind::kTensor) return std::nullopt;
      tuple.elements.push_back(std::move(*element));
      if (starts_with(text.substr(at), ", ")) {
        at += 2;
      } else if (starts_with(text.substr(at), "]")) {
        at += 1;
        return tuple;
      } else {
        return std::nullopt;
      }
    }
  }
  constexpr std::string_view kTop = "__torch__.Module";
  constexpr std::string_view kMangled = "__torch__.___torch_mangle_";
  AttrType type;
  type.kind = AttrType::Kind::kClass;
  if (starts_with(rest, kTop)) {
    at += kTop.size();
    type.class_name = std::string(kTop);
    return type;
  }
  if (starts_with(rest, kMangled)) {
    const size_t dot = rest.find(".Module", kMangled.size());
    if (dot == std::string_view::npos || !is_decimal(rest.substr(kMangled.size(), dot - kMangled.size()))) return std::nullopt;
    type.class_name = std::string(rest.substr(0, dot + 7));
    at += dot + 7;
    return type;
  }
  return std::nullopt;
}

// A whole line's type: the rest of `line` from `at`.
std::optional<AttrType> whole_type(std::string_view line, size_t at) {
  std::optional<AttrType> type = parse_type(line, at, 0);
  if (!type || at != line.size()) return std::nullopt;
  return type;
}

// `["a", "b", ]` or `[]`, as TorchScript prints __parameters__ and __buffers__.
std::optional<std::vector<std::string>> parse_key_list(std::string_view text) {
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') return std::nullopt;
  std::vector<std::string> keys;
  size_t at = 1;
  while (at < text.size() - 1) {
    if (text[at] != '"') return std::nullopt;
    const size_t close = text.find('"', at + 1);
    if (close == std::string_view::npos || text.compare(close, 3, "\", ") != 0) return std::nullopt;
    const std::string_view key = text.substr(at + 1, close - at - 1);
    if (!is_key(key)) return std::nullopt;
    keys.emplace_back(key);
    at = close + 3;
  }
  return keys;
}

// Reads one class record: the grammar of the lines TorchScript prints for a module of attributes only.
ClassDecl parse_class(const std::string& record, std::string_view text) {
  ClassDecl decl;
  decl.record = record;
  std::vector<std::string_view> lines;
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  const auto bad_line = [&](size_t i, const std::string& what) {
    refuse("record '" + record + "' line " + std::to_string(i + 1) + ": " + printable(lines[i]) + " " + what);
  };
  if (lines.size() < 3 || lines[0] != "class Module(Module):") {
    refuse("record '" + record + "' is not a class of a dtrain checkpoint (it must begin 'class Module(Module):', with "
           "its __parameters__ and __buffers__)");
  }
  std::vector<std::string> tensor_names;
  for (size_t i = 1; i <= 2; ++i) {
    const std::string_view head = i == 1 ? "  __parameters__ = " : "  __buffers__ = ";
    if (!starts_with(lines[i], head)) bad_line(i, "is not where a dtrain checkpoint lists the " + std::string(i == 1 ? "parameters" : "buffers"));
    std::optional<std::vector<std::string>> names = parse_key_list(lines[i].substr(head.size()));
    if (!names) bad_line(i, "is not a list of names");
    tensor_names.insert(tensor_names.end(), names->begin(), names->end());
  }
  bool annotations = false;
  const auto declare = [&](size_t i, std::string name, AttrType type) {
    if (!decl.attributes.emplace(std::move(name), std::move(type)).second) bad_line(i, "declares an attribute twice");
  };
  for (size_t i = 3; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    constexpr std::string_view kAnnotation = "  __annotations__[\"";
    if (line == "  __annotations__ = []") {
      if (annotations) bad_line(i, "repeats the annotations");
      annotations = true;
    } else if (starts_with(line, kAnnotation)) {
      if (!annotations) bad_line(i, "annotates before '__annotations__ = []'");
      const size_t close = line.find("\"] = ", kAnnotation.size());
      const std::string_view key = close == std::string_view::npos ? "" : line.substr(kAnnotation.size(), close - kAnnotation.size());
      if (!is_key(key)) bad_line(i, "does not annotate a name");
      std::optional<AttrType> type = whole_type(line, close + 5);
      if (!type) bad_line(i, "is not an attribute of a type a dtrain checkpoint holds");
      declare(i, std::string(key), std::move(*type));
    } else {
      const size_t colon = line.find(" : ");
      if (!starts_with(line, "  ") || colon == std::string_view::npos || !is_identifier(line.substr(2, colon - 2))) {
        bad_line(i, "is not a line a dtrain checkpoint's code has");
      }
      std::optional<AttrType> type = whole_type(line, colon + 3);
      if (!type) bad_line(i, "is not an attribute of a type a dtrain checkpoint holds");
      declare(i, std::string(line.substr(2, colon - 2)), std::move(*type));
    }
  }
  std::set<std::string> seen;
  for (const std::string& name : tensor_names) {
    const auto it = decl.attributes.find(name);
    if (!seen.insert(name).second || it == decl.attributes.end() || it->second.kind != AttrType::Kind::kTensor) {
      refuse("record '" + record + "' lists " + printable(name) +
             " as a parameter or buffer more than once, or without declaring it a Tensor");
    }
  }
  return decl;
}

// Every class named by an attribute exists, and none contains itself (LibTorch would recurse).
void check_class_graph(const Classes& classes) {
  enum class Mark { kNone, kOpen, kDone };
  std::map<std::string, Mark> marks;
  for (const auto& root : classes) {
    if (marks[root.first] == Mark::kDone) continue;
    // Depth-first without recursion: (class, its attribute being visited).
    std::vector<std::pair<const std::string*, std::map<std::string, AttrType>::const_iterator>> path;
    path.emplace_back(&root.first, root.second.attributes.begin());
    marks[root.first] = Mark::kOpen;
    while (!path.empty()) {
      auto& [name, it] = path.back();
      const ClassDecl& decl = classes.at(*name);
      if (it == decl.attributes.end()) {
        marks[*name] = Mark::kDone;
        path.pop_back();
        continue;
      }
      const AttrType& type = (it++)->second;
      if (type.kind != AttrType::Kind::kClass) continue;
      const auto target = classes.find(type.class_name);
      if (target == classes.end()) {
        refuse("record '" + decl.record + "' refers to class " + printable(type.class_name) + ", which no record declares");
      }
      Mark& mark = marks[target->first];
      if (mark == Mark::kOpen) refuse("record '" + decl.record + "': class " + printable(target->first) + " contains itself");
      if (mark == Mark::kNone) {
        mark = Mark::kOpen;
        path.emplace_back(&target->first, target->second.attributes.begin());
      }
    }
  }
}

// ---- pickles -----------------------------------------------------------------------------------------

// A value on the typed stack of the pickle check.
struct PValue {
  enum class Kind { kInt, kFloat, kBool, kNone, kStr, kTuple, kList, kDict, kOrderedDict, kGlobal, kObject, kStorage, kTensor };
  Kind kind = Kind::kNone;
  int64_t number = 0;  // kInt; kStorage: elements
  std::string text;    // kStr; kGlobal: "module name"; kObject: its class; kStorage: its record's key
  std::vector<std::shared_ptr<PValue>> items;  // kTuple, kList; kDict: key, value, key, value, ...
  int64_t item_size = 0;  // kStorage: bytes per element; kGlobal of a storage type too
  bool built = false;     // kObject: BUILD gave it its attributes
};
using PRef = std::shared_ptr<PValue>;

PRef make(PValue::Kind kind) {
  auto v = std::make_shared<PValue>();
  v->kind = kind;
  return v;
}

// The storage types LibTorch's pickler names, with their element sizes.
const std::map<std::string, int64_t>& storage_types() {
  static const std::map<std::string, int64_t> types = {
      {"torch FloatStorage", 4},  {"torch DoubleStorage", 8}, {"torch HalfStorage", 2},      {"torch BFloat16Storage", 2},
      {"torch LongStorage", 8},   {"torch IntStorage", 4},    {"torch ShortStorage", 2},     {"torch CharStorage", 1},
      {"torch ByteStorage", 1},   {"torch BoolStorage", 1},   {"torch ComplexFloatStorage", 8},
      {"torch ComplexDoubleStorage", 16}};
  return types;
}

const std::set<std::string>& callables() {
  static const std::set<std::string> names = {"torch._utils _rebuild_tensor_v2", "collections OrderedDict",
                                              "torch.jit._pickle build_intlist"};
  return names;
}

// What a pickle record may build: data.pkl the checkpoint's objects and tensors; constants.pkl and the
// .debug_pkl records only plain values (tuples, lists, numbers, strings).
enum class PickleRole { kData, kPlain };

class PickleCheck {
 public:
  PickleCheck(std::string record, std::string_view bytes, const Classes& classes,
              const std::map<std::string, uint64_t>& data_records, PickleRole role)
      : record_(std::move(record)), in_(bytes), classes_(classes), data_records_(data_records), role_(role) {}

  // Runs the pickle; returns the value it leaves. Refuses on any deviation.
  PRef run() {
    if (u8() != 0x80 || u8() != 2) fail("does not begin with pickle protocol 2, as LibTorch writes");
    for (;;) {
      const size_t at = at_;
      const uint8_t op = u8();
      op_at_ = at;
      if (op == '.') break;
      step(op);
    }
    if (at_ != in_.size()) fail("goes on past its STOP");
    if (stack_.size() != 1 || !marks_.empty()) fail("ends with " + std::to_string(stack_.size()) + " values on its stack, not one");
    return stack_.back();
  }

  [[noreturn]] void fail(const std::string& what) const {
    refuse("record '" + record_ + "' (pickle, byte " + std::to_string(op_at_) + ") " + what);
  }

 private:
  uint8_t u8() {
    if (at_ >= in_.size()) fail("ends without a STOP");
    return static_cast<uint8_t>(in_[at_++]);
  }
  uint64_t little(int width) {
    uint64_t value = 0;
    for (int i = 0; i < width; ++i) value |= static_cast<uint64_t>(u8()) << (8 * i);
    return value;
  }
  std::string_view bytes(uint64_t n) {
    if (n > in_.size() - at_) fail("holds a string running past its end");
    const std::string_view out = in_.substr(at_, n);
    at_ += n;
    return out;
  }
  std::string line() {
    const size_t end = in_.find('\n', at_);
    if (end == std::string_view::npos || end - at_ > 256) fail("holds a GLOBAL without its name");
    std::string out(in_.substr(at_, end - at_));
    at_ = end + 1;
    return out;
  }

  void push(PRef v) {
    if (stack_.size() >= kMaxStack) fail("builds a stack deeper than any checkpoint's");
    stack_.push_back(std::move(v));
  }
  PRef pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("takes a value its stack does not hold");
    PRef v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  PRef& top() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("takes a value its stack does not hold");
    return stack_.back();
  }
  // The values since the last MARK, which is dropped.
  std::vector<PRef> pop_mark() {
    if (marks_.empty()) fail("closes a MARK it never opened");
    const size_t start = marks_.back();
    marks_.pop_back();
    std::vector<PRef> items(std::make_move_iterator(stack_.begin() + static_cast<std::ptrdiff_t>(start)),
                            std::make_move_iterator(stack_.end()));
    stack_.resize(start);
    return items;
  }
  PRef tuple(std::vector<PRef> items) {
    PRef t = make(PValue::Kind::kTuple);
    t->items = std::move(items);
    return t;
  }
  void memo_put(uint64_t id) {
    // LibTorch sizes its memo to the largest id; the pickler numbers them from 0 in order.
    if (id > memo_.size() || id >= kMaxMemo) fail("memoizes under id " + std::to_string(id) + " out of order");
    if (id == memo_.size()) memo_.push_back(top());
    else memo_[id] = top();
  }
  void memo_get(uint64_t id) {
    if (id >= memo_.size()) fail("recalls memo id " + std::to_string(id) + ", which it never stored");
    push(memo_[id]);
  }

  void step(uint8_t op) {
    using K = PValue::Kind;
    switch (op) {
      case '(':  // MARK
        if (marks_.size() >= kMaxStack) fail("opens more MARKs than any checkpoint");
        marks_.push_back(stack_.size());
        break;
      case ')': push(tuple({})); break;                          // EMPTY_TUPLE
      case 0x85: { PRef a = pop(); push(tuple({a})); break; }    // TUPLE1
      case 0x86: { PRef b = pop(); PRef a = pop(); push(tuple({a, b})); break; }  // TUPLE2
      case 0x87: { PRef c = pop(); PRef b = pop(); PRef a = pop(); push(tuple({a, b, c})); break; }  // TUPLE3
      case 't': push(tuple(pop_mark())); break;                  // TUPLE
      case ']': push(make(K::kList)); break;                     // EMPTY_LIST
      case '}': push(make(K::kDict)); break;                     // EMPTY_DICT
      case 'e': {  // APPENDS
        std::vector<PRef> items = pop_mark();
        PRef& list = top();
        if (list->kind != K::kList) fail("appends to something that is not a list");
        list->items.insert(list->items.end(), items.begin(), items.end());
        break;
      }
      case 'u': {  // SETITEMS
        std::vector<PRef> items = pop_mark();
        PRef& dict = top();
        if (dict->kind != K::kDict || items.size() % 2 != 0) fail("sets items of something that is not a dictionary");
        dict->items.insert(dict->items.end(), items.begin(), items.end());
        break;
      }
      case 'q': memo_put(little(1)); break;  // BINPUT
      case 'r': memo_put(little(4)); break;  // LONG_BINPUT
      case 'h': memo_get(little(1)); break;  // BINGET
      case 'j': memo_get(little(4)); break;  // LONG_BINGET
      case 'K': case 'M': case 'J': {        // BININT1, BININT2, BININT
        PRef v = make(K::kInt);
        v->number = op == 'K' ? static_cast<int64_t>(little(1))
                    : op == 'M' ? static_cast<int64_t>(little(2))
                                : static_cast<int64_t>(static_cast<int32_t>(little(4)));
        push(v);
        break;
      }
      case 0x8a: {  // LONG1: LibTorch reads only 8-byte ones
        if (u8() != 8) fail("holds a LONG1 of another length than 8");
        PRef v = make(K::kInt);
        v->number = static_cast<int64_t>(little(8));
        push(v);
        break;
      }
      case 'G': bytes(8); push(make(K::kFloat)); break;  // BINFLOAT
      case 0x88: case 0x89: push(make(K::kBool)); break;  // NEWTRUE, NEWFALSE
      case 'N': push(make(K::kNone)); break;
      case 'X': {  // BINUNICODE
        const uint64_t n = little(4);
        if (n > kMaxStringLength) fail("holds a string longer than any checkpoint's");
        PRef v = make(K::kStr);
        v->text = std::string(bytes(n));
        push(v);
        break;
      }
      case 'c': global(); break;
      case 0x81: newobj(); break;
      case 'b': build(); break;
      case 'R': reduce(); break;
      case 'Q': persistent_id(); break;
      default: {
        char text[8];
        std::snprintf(text, sizeof text, "0x%02x", op);
        fail(std::string("holds opcode ") + text + ", which LibTorch's pickler does not write for a checkpoint");
      }
    }
  }

  void global() {
    std::string module = line();
    std::string name = line();
    const std::string both = module + " " + name;
    PRef v = make(PValue::Kind::kGlobal);
    v->text = both;
    const auto storage = storage_types().find(both);
    if (storage != storage_types().end()) v->item_size = storage->second;
    const bool known = role_ == PickleRole::kData
                           ? is_class(v->text) || storage != storage_types().end() || callables().count(both) > 0
                           : both == "torch.jit._pickle build_intlist";
    if (!known) {
      fail("names " + printable(both) + ", which a dtrain checkpoint's " +
           (role_ == PickleRole::kData ? "classes and tensors do not include" : "plain values do not need"));
    }
    push(v);
  }

  // "__torch__.___torch_mangle_3 Module", a GLOBAL of a class that a code record declares.
  bool is_class(const std::string& global) const {
    return ends_with(global, " Module") && classes_.count(global.substr(0, global.size() - 7) + ".Module") > 0;
  }

  void newobj() {
    PRef args = pop();
    PRef cls = pop();
    if (cls->kind != PValue::Kind::kGlobal || !is_class(cls->text) || args->kind != PValue::Kind::kTuple ||
        !args->items.empty()) {
      fail("creates an object of something that is not a class of the archive");
    }
    PRef object = make(PValue::Kind::kObject);
    object->text = cls->text.substr(0, cls->text.size() - 7) + ".Module";
    push(object);
  }

  void build() {
    PRef state = pop();
    PRef object = top();
    if (object->kind != PValue::Kind::kObject || object->built || state->kind != PValue::Kind::kDict) {
      fail("sets the attributes of something that is not a new object, or not from a dictionary");
    }
    const ClassDecl& decl = classes_.at(object->text);
    std::set<std::string> set;
    for (size_t i = 0; i < state->items.size(); i += 2) {
      const PRef& key = state->items[i];
      if (key->kind != PValue::Kind::kStr) fail("gives a " + object->text + " an attribute whose name is not a string");
      const auto declared = decl.attributes.find(key->text);
      if (declared == decl.attributes.end()) {
        fail("gives a " + object->text + " the attribute " + printable(key->text) + ", which its class ('" + decl.record +
             "') does not declare");
      }
      if (!set.insert(key->text).second) fail("sets the attribute " + printable(key->text) + " twice");
      if (!matches(declared->second, *state->items[i + 1])) {
        fail("gives a " + object->text + " a value for " + printable(key->text) + " of another type than its class declares");
      }
    }
    if (set.size() != decl.attributes.size()) {
      for (const auto& [name, type] : decl.attributes) {
        if (set.count(name) == 0) fail("gives a " + object->text + " no value for its attribute " + printable(name));
      }
    }
    object->built = true;
  }

  static bool matches(const AttrType& type, const PValue& value) {
    using K = PValue::Kind;
    switch (type.kind) {
      case AttrType::Kind::kTensor: return value.kind == K::kTensor;
      case AttrType::Kind::kInt: return value.kind == K::kInt;
      case AttrType::Kind::kFloat: return value.kind == K::kFloat;
      case AttrType::Kind::kBool: return value.kind == K::kBool;
      case AttrType::Kind::kStr: return value.kind == K::kStr;
      case AttrType::Kind::kClass: return value.kind == K::kObject && value.built && value.text == type.class_name;
      case AttrType::Kind::kTuple:
        if (value.kind != K::kTuple || value.items.size() != type.elements.size()) return false;
        for (size_t i = 0; i < type.elements.size(); ++i) {
          if (!matches(type.elements[i], *value.items[i])) return false;
        }
        return true;
    }
    return false;
  }

  void reduce() {
    using K = PValue::Kind;
    PRef args = pop();
    PRef callable = pop();
    if (callable->kind != K::kGlobal || args->kind != K::kTuple) fail("calls something that is not a function");
    const std::vector<PRef>& a = args->items;
    if (callable->text == "collections OrderedDict") {
      if (!a.empty()) fail("builds an OrderedDict with arguments");
      push(make(K::kOrderedDict));
    } else if (callable->text == "torch.jit._pickle build_intlist") {
      if (a.size() != 1 || a[0]->kind != K::kList) fail("builds an int list from something that is not a list");
      for (const PRef& item : a[0]->items) {
        if (item->kind != K::kInt) fail("builds an int list of something that is not an int");
      }
      PRef list = make(K::kList);
      list->items = a[0]->items;
      push(list);
    } else if (callable->text == "torch._utils _rebuild_tensor_v2") {
      push(rebuild_tensor(a));
    } else {
      fail("calls " + printable(callable->text) + ", which is not a function");
    }
  }

  // _rebuild_tensor_v2(storage, offset, sizes, strides, requires_grad, hooks): a view that must lie
  // inside its storage (LibTorch 1.13 does not check it; a tensor reaching past its storage reads past
  // its buffer when it is loaded into the model).
  PRef rebuild_tensor(const std::vector<PRef>& a) {
    using K = PValue::Kind;
    if (a.size() != 6 || a[0]->kind != K::kStorage || a[1]->kind != K::kInt || a[2]->kind != K::kTuple ||
        a[3]->kind != K::kTuple || a[4]->kind != K::kBool || a[5]->kind != K::kOrderedDict ||
        a[2]->items.size() != a[3]->items.size() || static_cast<int64_t>(a[2]->items.size()) > kMaxDims) {
      fail("rebuilds a tensor from arguments other than (storage, offset, sizes, strides, requires_grad, hooks)");
    }
    const PValue& storage = *a[0];
    int64_t last = a[1]->number;
    bool empty = false;
    bool bad = last < 0;
    for (size_t d = 0; d < a[2]->items.size() && !bad; ++d) {
      const PValue& size = *a[2]->items[d];
      const PValue& stride = *a[3]->items[d];
      if (size.kind != K::kInt || stride.kind != K::kInt || size.number < 0 || stride.number < 0) {
        fail("rebuilds a tensor whose sizes or strides are not counts");
      }
      if (size.number == 0) empty = true;
      int64_t extent = 0;
      bad = __builtin_mul_overflow(std::max<int64_t>(size.number - 1, 0), stride.number, &extent) ||
            __builtin_add_overflow(last, extent, &last);
    }
    if (bad || (!empty && last >= storage.number)) {
      fail("rebuilds a tensor that reaches past its storage (record data/" + storage.text + ", " +
           std::to_string(storage.number) + " elements)");
    }
    return make(K::kTensor);
  }

  // ('storage', <storage type>, key, location, elements): the storage in record data/<key>, which must
  // hold exactly that many elements' bytes.
  void persistent_id() {
    using K = PValue::Kind;
    PRef id = pop();
    const std::vector<PRef>& a = id->items;
    if (role_ != PickleRole::kData || id->kind != K::kTuple || a.size() != 5 || a[0]->kind != K::kStr ||
        a[0]->text != "storage" || a[1]->kind != K::kGlobal || a[1]->item_size == 0 || a[2]->kind != K::kStr ||
        a[3]->kind != K::kStr || a[4]->kind != K::kInt) {
      fail("holds a persistent id other than a storage's");
    }
    const std::string& key = a[2]->text;
    const std::string& location = a[3]->text;
    const bool cuda = starts_with(location, "cuda") && (location.size() == 4 || (location[4] == ':' && is_decimal(std::string_view(location).substr(5))));
    if (location != "cpu" && !cuda) fail("places a storage on " + printable(location) + ", not the CPU or a GPU");
    const auto record = data_records_.find(key);
    if (!is_decimal(key) || record == data_records_.end()) fail("names storage " + printable(key) + ", which has no record data/" + key);
    const int64_t elements = a[4]->number;
    int64_t bytes = 0;
    if (elements < 0 || __builtin_mul_overflow(elements, a[1]->item_size, &bytes) || static_cast<uint64_t>(bytes) != record->second) {
      fail("says storage " + key + " holds " + std::to_string(elements) + " elements of " + std::to_string(a[1]->item_size) +
           " bytes, but its record data/" + key + " holds " + std::to_string(record->second) + " bytes");
    }
    const auto [seen, fresh] = storages_.emplace(key, std::make_pair(a[1]->text, elements));
    if (!fresh && seen->second != std::make_pair(a[1]->text, elements)) fail("names storage " + key + " twice, differently");
    PRef storage = make(K::kStorage);
    storage->text = key;
    storage->number = elements;
    storage->item_size = a[1]->item_size;
    push(storage);
  }

  std::string record_;
  std::string_view in_;
  const Classes& classes_;
  const std::map<std::string, uint64_t>& data_records_;
  PickleRole role_;
  size_t at_ = 0;
  size_t op_at_ = 0;
  std::vector<PRef> stack_;
  std::vector<size_t> marks_;
  std::vector<PRef> memo_;
  std::map<std::string, std::pair<std::string, int64_t>> storages_;
};

// Plain values only, for the records that hold no objects: a tuple at the top.
void check_plain_pickle(const std::string& record, std::string_view bytes) {
  static const Classes kNoClasses;
  static const std::map<std::string, uint64_t> kNoData;
  PickleCheck check(record, bytes, kNoClasses, kNoData, PickleRole::kPlain);
  if (check.run()->kind != PValue::Kind::kTuple) check.fail("holds something other than a tuple");
}

void check_archive(std::string_view bytes) {
  const std::vector<ZipRecord> records = zip_records(bytes);
  if (records.empty()) refuse("it holds no records, so it is not a dtrain checkpoint");
  if (records.size() > kMaxRecords) refuse("it holds " + std::to_string(records.size()) + " records, more than any checkpoint");
  // LibTorch names every record <archive name>/...; dtrain's archives are all "archive/".
  const std::string& first = records.front().name;
  const size_t slash = first.find('/');
  const std::string folder = first.substr(0, slash == std::string::npos ? 0 : slash + 1);
  // (LibTorch names the folder after the file an archive is saved to: "archive" for dtrain's, which
  // saves to memory; "checkpoint-epoch-000001" for one saved to checkpoint-epoch-000001.pt.)
  if (folder.size() < 2 || folder.size() > 256 ||
      !std::all_of(folder.begin(), folder.end() - 1, [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
      })) {
    refuse("record " + printable(first) + " is not inside an archive folder");
  }
  std::map<std::string, const ZipRecord*> named;
  std::map<std::string, uint64_t> data_records;
  for (const ZipRecord& r : records) {
    if (!starts_with(r.name, folder)) refuse("record " + printable(r.name) + " lies outside its folder '" + folder + "'");
    const std::string relative = r.name.substr(folder.size());
    if (!named.emplace(relative, &r).second) refuse("record " + printable(r.name) + " appears twice");
    if (starts_with(relative, "data/") && is_decimal(std::string_view(relative).substr(5))) {
      data_records.emplace(relative.substr(5), r.unpacked_size);
      continue;
    }
    const bool code = !class_of_record(relative).empty();
    const bool debug = ends_with(relative, ".debug_pkl") && !class_of_record(relative.substr(0, relative.size() - 10)).empty();
    static const std::set<std::string> kFixed = {"data.pkl", "constants.pkl", "version", ".data/version",
                                                 ".data/serialization_id", "byteorder"};
    if (!code && !debug && kFixed.count(relative) == 0) {
      refuse("record " + printable(r.name) + " is not one a dtrain checkpoint holds");
    }
  }
  const auto contents = [&](const std::string& relative, uint64_t max_bytes) -> std::string {
    const ZipRecord& r = *named.at(relative);
    std::optional<std::string> text = zip_contents(bytes, r, max_bytes);
    if (!text) refuse("record '" + r.name + "' (" + std::to_string(r.unpacked_size) + " bytes) is larger than any checkpoint's, or does not inflate");
    return std::move(*text);
  };
  for (const char* required : {"data.pkl", "version"}) {
    if (named.count(required) == 0) refuse("it has no record '" + folder + required + "'");
  }
  for (const char* small : {"version", ".data/version"}) {
    if (named.count(small) == 0) continue;
    std::string version = contents(small, 16);
    while (!version.empty() && version.back() == '\n') version.pop_back();
    if (!is_decimal(version) || version.size() > 2) refuse("record '" + folder + small + "' holds no format version");
  }
  if (named.count("byteorder") > 0 && contents("byteorder", 16) != "little") {
    refuse("record '" + folder + "byteorder' does not say 'little' (this machine's byte order)");
  }
  if (named.count(".data/serialization_id") > 0) {
    const std::string id = contents(".data/serialization_id", 64);
    if (!std::all_of(id.begin(), id.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)); })) {
      refuse("record '" + folder + ".data/serialization_id' holds " + printable(id) + ", not an id");
    }
  }
  Classes classes;
  for (const auto& [relative, record] : named) {
    const std::string name = class_of_record(relative);
    if (name.empty()) continue;
    classes.emplace(name, parse_class(record->name, contents(relative, kMaxCodeBytes)));
  }
  check_class_graph(classes);
  for (const auto& [relative, record] : named) {
    if (ends_with(relative, ".debug_pkl") || relative == "constants.pkl") {
      check_plain_pickle(record->name, contents(relative, kMaxPickleBytes));
    }
  }
  const std::string pickle = contents("data.pkl", kMaxPickleBytes);
  PickleCheck data(folder + "data.pkl", pickle, classes, data_records, PickleRole::kData);
  const PRef root = data.run();
  if (root->kind != PValue::Kind::kObject || !root->built || root->text != "__torch__.Module") {
    data.fail("does not hold an object of the archive's top class, __torch__.Module");
  }
}

}  // namespace

std::string checkpoint_archive_problem(std::string_view bytes) {
  try {
    check_archive(bytes);
  } catch (const ArchiveRefusal& refusal) {
    return refusal.why;
  }
  return "";
}

}  // namespace dtrain
