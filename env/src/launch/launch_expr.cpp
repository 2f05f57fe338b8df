#include "kforge/env/cuda/launch_expr.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "kforge/core/document.h"
#include "kforge/core/input_limits.h"
#include "kforge/core/tensor_spec.h"

namespace kforge::env {

struct LaunchExpr::Node {
  enum class Op { kInt, kFloat, kAdd, kSub, kMul, kDiv, kMod, kNeg, kCdiv, kMin, kMax, kNumel, kDim, kNdim };
  Op op = Op::kInt;
  int64_t int_value = 0;
  double float_value = 0.0;
  std::string tensor;  // numel / dim / ndim
  std::vector<std::shared_ptr<const Node>> kids;
};

namespace {

using Node = LaunchExpr::Node;
using NodePtr = std::shared_ptr<const Node>;
using Op = Node::Op;

// Expressions come from untrusted plans: bound the work a parse can cause.
constexpr size_t kMaxExprChars = limits::kMaxExprChars;
constexpr int kMaxDepth = limits::kMaxExprDepth;

int precedence(Op op) {
  switch (op) {
    case Op::kAdd:
    case Op::kSub:
      return 1;
    case Op::kMul:
    case Op::kDiv:
    case Op::kMod:
      return 2;
    case Op::kNeg:
      return 3;
    default:
      return 4;
  }
}

const char* binary_symbol(Op op) {
  switch (op) {
    case Op::kAdd:
      return " + ";
    case Op::kSub:
      return " - ";
    case Op::kMul:
      return " * ";
    case Op::kDiv:
      return " / ";
    default:
      return " % ";
  }
}

std::string format_float(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  std::string s = buf;
  // Shortest text that reads back to the same double, for readable plans.
  for (int digits = 1; digits < 17; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) {
      s = buf;
      break;
    }
  }
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

bool is_plain_identifier(const std::string& name) {
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; });
}

std::string tensor_ref(const std::string& name) { return is_plain_identifier(name) ? name : "'" + name + "'"; }

std::string render(const Node& n) {
  auto child = [](const Node& c, bool parens) { return parens ? "(" + render(c) + ")" : render(c); };
  switch (n.op) {
    case Op::kInt:
      return std::to_string(n.int_value);
    case Op::kFloat:
      return format_float(n.float_value);
    case Op::kAdd:
    case Op::kSub:
    case Op::kMul:
    case Op::kDiv:
    case Op::kMod: {
      const int p = precedence(n.op);
      return child(*n.kids[0], precedence(n.kids[0]->op) < p) + binary_symbol(n.op) +
             child(*n.kids[1], precedence(n.kids[1]->op) <= p);
    }
    case Op::kNeg:
      return "-" + child(*n.kids[0], precedence(n.kids[0]->op) < 3 || n.kids[0]->op == Op::kNeg);
    case Op::kCdiv:
    case Op::kMin:
    case Op::kMax: {
      std::string s = n.op == Op::kCdiv ? "cdiv(" : n.op == Op::kMin ? "min(" : "max(";
      for (size_t i = 0; i < n.kids.size(); ++i) s += (i ? ", " : "") + render(*n.kids[i]);
      return s + ")";
    }
    case Op::kNumel:
      return "numel(" + tensor_ref(n.tensor) + ")";
    case Op::kNdim:
      return "ndim(" + tensor_ref(n.tensor) + ")";
    case Op::kDim:
      return "dim(" + tensor_ref(n.tensor) + ", " + render(*n.kids[0]) + ")";
  }
  return "?";
}

bool references_tensor(const Node& n) {
  if (n.op == Op::kNumel || n.op == Op::kDim || n.op == Op::kNdim) return true;
  return std::any_of(n.kids.begin(), n.kids.end(), [](const NodePtr& k) { return references_tensor(*k); });
}

class Parser {
 public:
  Parser(const std::string& text, LaunchExpr::Kind kind, const std::vector<std::string>& names)
      : text_(text), kind_(kind), names_(names) {}

  NodePtr parse() {
    if (text_.size() > kMaxExprChars) {
      throw LaunchSyntaxError(1, "expression is longer than " + std::to_string(kMaxExprChars) + " characters");
    }
    skip_space();
    if (pos_ >= text_.size()) fail(pos_, "empty expression");
    NodePtr e = expr(0);
    skip_space();
    if (pos_ < text_.size()) fail(pos_, "unexpected '" + std::string(1, text_[pos_]) + "' after a complete expression");
    return e;
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& message) const { throw LaunchSyntaxError(at + 1, message); }

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }

  bool accept(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void expect(char c, const std::string& what) {
    skip_space();
    if (!accept(c)) {
      fail(pos_, "expected '" + std::string(1, c) + "' " + what +
                     (pos_ < text_.size() ? ", found '" + std::string(1, text_[pos_]) + "'" : ", found the end"));
    }
  }

  static NodePtr make(Op op, std::vector<NodePtr> kids = {}) {
    auto n = std::make_shared<Node>();
    n->op = op;
    n->kids = std::move(kids);
    return n;
  }

  NodePtr expr(int depth) {
    if (depth > kMaxDepth) fail(pos_, "expression nested deeper than " + std::to_string(kMaxDepth) + " levels");
    NodePtr left = term(depth);
    for (;;) {
      if (accept('+')) {
        left = make(Op::kAdd, {left, term(depth)});
      } else if (accept('-')) {
        left = make(Op::kSub, {left, term(depth)});
      } else {
        return left;
      }
    }
  }

  NodePtr term(int depth) {
    NodePtr left = unary(depth);
    for (;;) {
      if (accept('*')) {
        left = make(Op::kMul, {left, unary(depth)});
      } else if (accept('/')) {
        left = make(Op::kDiv, {left, unary(depth)});
      } else if (accept('%')) {
        left = make(Op::kMod, {left, unary(depth)});
      } else {
        return left;
      }
    }
  }

  NodePtr unary(int depth) {
    if (depth > kMaxDepth) fail(pos_, "expression nested deeper than " + std::to_string(kMaxDepth) + " levels");
    if (accept('-')) return make(Op::kNeg, {unary(depth + 1)});
    if (accept('+')) return unary(depth + 1);
    return primary(depth);
  }

  NodePtr number() {
    const size_t start = pos_;
    size_t i = pos_;
    while (i < text_.size() && std::isdigit(static_cast<unsigned char>(text_[i]))) ++i;
    bool is_float = false;
    if (i < text_.size() && text_[i] == '.') {
      is_float = true;
      ++i;
      while (i < text_.size() && std::isdigit(static_cast<unsigned char>(text_[i]))) ++i;
    }
    if (i < text_.size() && (text_[i] == 'e' || text_[i] == 'E')) {
      size_t j = i + 1;
      if (j < text_.size() && (text_[j] == '+' || text_[j] == '-')) ++j;
      if (j < text_.size() && std::isdigit(static_cast<unsigned char>(text_[j]))) {
        is_float = true;
        i = j;
        while (i < text_.size() && std::isdigit(static_cast<unsigned char>(text_[i]))) ++i;
      }
    }
    if (i < text_.size() && (std::isalpha(static_cast<unsigned char>(text_[i])) || text_[i] == '_')) {
      fail(i, "unexpected '" + std::string(1, text_[i]) + "' in a number");
    }
    const std::string lit = text_.substr(start, i - start);
    if (lit.find_first_of("0123456789") == std::string::npos) fail(start, "'.' is not a number");
    pos_ = i;
    auto n = std::make_shared<Node>();
    if (is_float) {
      if (kind_ == LaunchExpr::Kind::kInt) {
        fail(start, "floating-point literal " + lit + " in an integer expression (floats are only allowed in " +
                        "f32(...) and f64(...) arguments)");
      }
      n->op = Op::kFloat;
      n->float_value = std::strtod(lit.c_str(), nullptr);
      if (!std::isfinite(n->float_value)) fail(start, "literal " + lit + " is out of the range of a double");
      return n;
    }
    n->op = Op::kInt;
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(lit.c_str(), &end, 10);
    if (errno == ERANGE) fail(start, "integer literal " + lit + " does not fit in 64 bits");
    n->int_value = v;
    return n;
  }

  std::string identifier() {
    const size_t start = pos_;
    while (pos_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_' || text_[pos_] == '.')) {
      ++pos_;
    }
    return text_.substr(start, pos_ - start);
  }

  // A tensor argument: a bare identifier or a quoted name for names that are
  // not identifiers (e.g. 'conv.weight:0').
  std::string tensor_name() {
    skip_space();
    const size_t start = pos_;
    std::string name;
    if (pos_ < text_.size() && (text_[pos_] == '\'' || text_[pos_] == '"')) {
      const char quote = text_[pos_++];
      const size_t close = text_.find(quote, pos_);
      if (close == std::string::npos) fail(start, "unterminated quoted tensor name");
      name = text_.substr(pos_, close - pos_);
      pos_ = close + 1;
    } else if (pos_ < text_.size() && (std::isalpha(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) {
      name = identifier();
    } else {
      fail(start, "expected a tensor name");
    }
    if (std::find(names_.begin(), names_.end(), name) == names_.end()) {
      const std::string hint = closest_match(name, names_);
      std::string known;
      for (const auto& n : names_) known += (known.empty() ? "" : ", ") + n;
      fail(start, "unknown tensor '" + name + "'" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)") +
                      "; the task's tensors are: " + (known.empty() ? "(none)" : known));
    }
    return name;
  }

  std::vector<NodePtr> call_args(const std::string& fn, size_t fn_pos, size_t min_args, size_t max_args, int depth) {
    std::vector<NodePtr> args;
    if (!accept(')')) {
      do {
        args.push_back(expr(depth + 1));
      } while (accept(','));
      expect(')', "to close the arguments of " + fn + "(");
    }
    if (args.size() < min_args || args.size() > max_args) {
      const std::string want = min_args == max_args   ? std::to_string(min_args)
                               : max_args == SIZE_MAX ? "at least " + std::to_string(min_args)
                                                      : std::to_string(min_args) + " to " + std::to_string(max_args);
      fail(fn_pos, fn + "() takes " + want + " argument" + (max_args == 1 && min_args == 1 ? "" : "s") + ", got " +
                       std::to_string(args.size()));
    }
    return args;
  }

  NodePtr primary(int depth) {
    skip_space();
    if (pos_ >= text_.size()) fail(pos_, "expected a number, a function or '(' but found the end");
    const char c = text_[pos_];
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') return number();
    if (c == '(') {
      ++pos_;
      NodePtr inner = expr(depth + 1);
      expect(')', "to close '('");
      return inner;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const size_t start = pos_;
      const std::string name = identifier();
      if (!accept('(')) {
        if (std::find(names_.begin(), names_.end(), name) != names_.end()) {
          fail(start, "'" + name + "' is a tensor; use numel(" + name + "), dim(" + name + ", i) or ndim(" + name +
                          ") for its size");
        }
        fail(start, "unknown name '" + name + "'; expressions use integers, + - * / %, parentheses and the " +
                        "functions cdiv, min, max, numel, dim, shape, ndim");
      }
      if (name == "cdiv") return make(Op::kCdiv, call_args(name, start, 2, 2, depth));
      if (name == "min") return make(Op::kMin, call_args(name, start, 2, SIZE_MAX, depth));
      if (name == "max") return make(Op::kMax, call_args(name, start, 2, SIZE_MAX, depth));
      if (name == "numel" || name == "ndim") {
        auto n = std::make_shared<Node>();
        n->op = name == "numel" ? Op::kNumel : Op::kNdim;
        n->tensor = tensor_name();
        expect(')', "after the tensor name: " + name + "() takes exactly one tensor");
        return n;
      }
      if (name == "dim" || name == "shape") {
        auto n = std::make_shared<Node>();
        n->op = Op::kDim;
        n->tensor = tensor_name();
        expect(',', "then a dimension index: " + name + "(tensor, index)");
        const LaunchExpr::Kind outer = kind_;
        kind_ = LaunchExpr::Kind::kInt;  // an index is an integer even inside f32(...)
        n->kids.push_back(expr(depth + 1));
        kind_ = outer;
        expect(')', "to close " + name + "(tensor, index)");
        return n;
      }
      const std::string hint = closest_match(name, {"cdiv", "min", "max", "numel", "dim", "shape", "ndim"});
      fail(start, "unknown function '" + name + "'" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)") +
                      "; available: cdiv(a, b), min(a, b, ...), max(a, b, ...), numel(t), dim(t, i), shape(t, i), " +
                      "ndim(t)");
    }
    fail(pos_, "unexpected '" + std::string(1, c) + "'");
  }

  const std::string& text_;
  LaunchExpr::Kind kind_;
  const std::vector<std::string>& names_;
  size_t pos_ = 0;
};

const std::vector<int64_t>& shape_of(const std::string& tensor, const ShapeMap& shapes) {
  auto it = shapes.find(tensor);
  if (it == shapes.end()) throw LaunchError("no shape was given for tensor '" + tensor + "'");
  return it->second;
}

int64_t checked_numel(const std::string& tensor, const ShapeMap& shapes) {
  int64_t n = 1;
  for (int64_t d : shape_of(tensor, shapes)) {
    if (__builtin_mul_overflow(n, d, &n)) throw LaunchError("numel(" + tensor + ") overflows 64 bits");
  }
  return n;
}

int64_t checked_dim(const Node& n, int64_t index, const ShapeMap& shapes) {
  const auto& shape = shape_of(n.tensor, shapes);
  const auto rank = static_cast<int64_t>(shape.size());
  const int64_t i = index < 0 ? index + rank : index;
  if (i < 0 || i >= rank) {
    throw LaunchError("'" + render(n) + "': index " + std::to_string(index) + " is out of range for tensor '" +
                      n.tensor + "' of shape " + shape_to_string(shape) + " (" + std::to_string(rank) + " dims)");
  }
  return shape[static_cast<size_t>(i)];
}

int64_t eval_int_node(const Node& n, const ShapeMap& shapes) {
  auto arg = [&](size_t i) { return eval_int_node(*n.kids[i], shapes); };
  auto overflow = [&]() -> LaunchError { return LaunchError("integer overflow in '" + render(n) + "'"); };
  int64_t r = 0;
  switch (n.op) {
    case Op::kInt:
      return n.int_value;
    case Op::kFloat:
      throw LaunchError("floating-point value in an integer expression");
    case Op::kAdd:
      if (__builtin_add_overflow(arg(0), arg(1), &r)) throw overflow();
      return r;
    case Op::kSub:
      if (__builtin_sub_overflow(arg(0), arg(1), &r)) throw overflow();
      return r;
    case Op::kMul:
      if (__builtin_mul_overflow(arg(0), arg(1), &r)) throw overflow();
      return r;
    case Op::kDiv:
    case Op::kMod:
    case Op::kCdiv: {
      const int64_t a = arg(0);
      const int64_t b = arg(1);
      if (b == 0) throw LaunchError("division by zero in '" + render(n) + "'");
      if (a == std::numeric_limits<int64_t>::min() && b == -1) throw overflow();
      if (n.op == Op::kMod) return a % b;
      int64_t q = a / b;
      // Ceiling for every sign combination, without the a + b - 1 that could overflow.
      if (n.op == Op::kCdiv && a % b != 0 && ((a < 0) == (b < 0))) ++q;
      return q;
    }
    case Op::kNeg: {
      const int64_t a = arg(0);
      if (a == std::numeric_limits<int64_t>::min()) throw overflow();
      return -a;
    }
    case Op::kMin:
    case Op::kMax: {
      int64_t best = arg(0);
      for (size_t i = 1; i < n.kids.size(); ++i) {
        const int64_t v = arg(i);
        best = n.op == Op::kMin ? std::min(best, v) : std::max(best, v);
      }
      return best;
    }
    case Op::kNumel:
      return checked_numel(n.tensor, shapes);
    case Op::kNdim:
      return static_cast<int64_t>(shape_of(n.tensor, shapes).size());
    case Op::kDim:
      return checked_dim(n, arg(0), shapes);
  }
  return 0;
}

double eval_float_node(const Node& n, const ShapeMap& shapes) {
  auto arg = [&](size_t i) { return eval_float_node(*n.kids[i], shapes); };
  double r = 0.0;
  switch (n.op) {
    case Op::kInt:
      return static_cast<double>(n.int_value);
    case Op::kFloat:
      return n.float_value;
    case Op::kAdd:
      r = arg(0) + arg(1);
      break;
    case Op::kSub:
      r = arg(0) - arg(1);
      break;
    case Op::kMul:
      r = arg(0) * arg(1);
      break;
    case Op::kDiv:
    case Op::kMod:
    case Op::kCdiv: {
      const double a = arg(0);
      const double b = arg(1);
      if (b == 0.0) throw LaunchError("division by zero in '" + render(n) + "'");
      r = n.op == Op::kDiv ? a / b : n.op == Op::kMod ? std::fmod(a, b) : std::ceil(a / b);
      break;
    }
    case Op::kNeg:
      return -arg(0);
    case Op::kMin:
    case Op::kMax: {
      r = arg(0);
      for (size_t i = 1; i < n.kids.size(); ++i) r = n.op == Op::kMin ? std::min(r, arg(i)) : std::max(r, arg(i));
      break;
    }
    case Op::kNumel:
      return static_cast<double>(checked_numel(n.tensor, shapes));
    case Op::kNdim:
      return static_cast<double>(shape_of(n.tensor, shapes).size());
    case Op::kDim:
      return static_cast<double>(checked_dim(n, eval_int_node(*n.kids[0], shapes), shapes));
  }
  if (!std::isfinite(r)) throw LaunchError("'" + render(n) + "' is not a finite number");
  return r;
}

}  // namespace

LaunchExpr::LaunchExpr() : LaunchExpr(constant(0)) {}

LaunchExpr::LaunchExpr(std::shared_ptr<const Node> root, Kind kind) : root_(std::move(root)), kind_(kind) {}

LaunchExpr LaunchExpr::parse(const std::string& text, Kind kind, const std::vector<std::string>& tensor_names) {
  Parser parser(text, kind, tensor_names);
  return LaunchExpr(parser.parse(), kind);
}

LaunchExpr LaunchExpr::constant(int64_t value) {
  auto n = std::make_shared<Node>();
  n->op = Node::Op::kInt;
  n->int_value = value;
  return LaunchExpr(std::move(n), Kind::kInt);
}

LaunchExpr::Kind LaunchExpr::kind() const { return kind_; }

int64_t LaunchExpr::eval_int(const ShapeMap& shapes) const {
  if (kind_ != Kind::kInt) throw LaunchError("'" + to_string() + "' is a floating-point expression");
  return eval_int_node(*root_, shapes);
}

double LaunchExpr::eval_float(const ShapeMap& shapes) const { return eval_float_node(*root_, shapes); }

bool LaunchExpr::is_constant() const { return !references_tensor(*root_); }

std::string LaunchExpr::to_string() const { return render(*root_); }

}  // namespace kforge::env
