// A fixed-width text table for terminal output: columns as wide as their
// widest cell (cut at a maximum), two spaces apart.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace kforge::rollout::replay {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header, size_t max_width = 48) : max_width_(max_width) {
    rows_.push_back(std::move(header));
  }
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

  std::string render() const {
    std::vector<size_t> width;
    for (const auto& row : rows_) {
      width.resize(std::max(width.size(), row.size()), 0);
      for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], std::min(row[i].size(), max_width_));
    }
    std::string out;
    for (const auto& row : rows_) {
      std::string line;
      for (size_t i = 0; i < row.size(); ++i) {
        std::string cell = row[i].size() > max_width_ ? row[i].substr(0, max_width_ - 3) + "..." : row[i];
        if (i + 1 < row.size()) cell.resize(width[i], ' ');
        line += (i ? "  " : "") + cell;
      }
      out += line + "\n";
    }
    return out;
  }

 private:
  size_t max_width_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace kforge::rollout::replay
