// Integer (and floating-point) expressions over task tensor shapes, as written
// in nvrtc launch plans: "cdiv(numel(x), 256)", "dim(x, -1) * 4", "f32(1.0 / dim(x, 1))".
// Grammar and semantics: docs/launch-plan.md.
//
// Parsing happens once, when a solution is compiled (names are checked against
// the task); evaluation happens in the runner for every shape variant, so it
// is cheap, allocation-light and reports every arithmetic fault (overflow,
// division by zero, a dimension out of range) as a LaunchError instead of
// producing a wrong launch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace kforge::env {

// Tensor name -> concrete shape, for one evaluation (one shape variant).
using ShapeMap = std::map<std::string, std::vector<int64_t>>;

// A syntax or name error in one expression; `column` is 1-based within it.
class LaunchSyntaxError : public std::runtime_error {
 public:
  LaunchSyntaxError(size_t column, const std::string& message) : std::runtime_error(message), column_(column) {}
  size_t column() const { return column_; }

 private:
  size_t column_;
};

// A plan that parsed but cannot be launched for these shapes (overflow,
// division by zero, zero-sized grid, too many threads, ...). A fault of the
// candidate's plan, reported to the policy; never a crash.
class LaunchError : public std::runtime_error {
 public:
  explicit LaunchError(const std::string& message) : std::runtime_error(message) {}
};

class LaunchExpr {
 public:
  enum class Kind { kInt, kFloat };

  // The constant 0 (so that containers of expressions are default-constructible).
  LaunchExpr();

  // `kind` decides the arithmetic: kInt is exact int64 with overflow checks
  // and C division (truncating); kFloat is double arithmetic and also accepts
  // floating literals. Names used by numel/dim/shape/ndim must be in
  // `tensor_names`. Throws LaunchSyntaxError.
  static LaunchExpr parse(const std::string& text, Kind kind, const std::vector<std::string>& tensor_names);
  static LaunchExpr constant(int64_t value);

  Kind kind() const;
  int64_t eval_int(const ShapeMap& shapes) const;   // kInt only; throws LaunchError
  double eval_float(const ShapeMap& shapes) const;  // throws LaunchError
  // True when no tensor is referenced, so the value is known at compile time.
  bool is_constant() const;
  // Canonical text that parses back to the same expression.
  std::string to_string() const;

  struct Node;

 private:
  explicit LaunchExpr(std::shared_ptr<const Node> root, Kind kind);
  std::shared_ptr<const Node> root_;
  Kind kind_ = Kind::kInt;
};

}  // namespace kforge::env
