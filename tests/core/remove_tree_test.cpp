// Scratch-directory removal: nested content goes, symbolic links are removed
// without touching what they point to.
#include "kforge/core/remove_tree.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace kforge {
namespace {

TEST(RemoveTree, RemovesNestedContentButNotLinkTargets) {
  auto root =
      std::filesystem::path(KFORGE_BINARY_DIR) / "tests" / "core" / ("remove-tree-" + std::to_string(::getpid()));
  auto outside = root.string() + "-outside";
  std::filesystem::create_directories(root / "a" / "b");
  std::filesystem::create_directories(outside);
  std::ofstream(root / "a" / "b" / "file") << "x";
  std::ofstream(root / "top") << "y";
  std::ofstream(std::filesystem::path(outside) / "keep") << "z";
  std::filesystem::create_directory_symlink(outside, root / "link");

  EXPECT_TRUE(remove_tree(root));
  EXPECT_FALSE(std::filesystem::exists(root));
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(outside) / "keep"));
  EXPECT_TRUE(remove_tree(outside));
  EXPECT_TRUE(remove_tree(root));  // already gone
}

}  // namespace
}  // namespace kforge
