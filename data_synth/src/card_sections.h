// The dataset card's later sections (card_sections.cpp): the contamination
// rule by what the kernel must do, difficulty, split, proof of solvability,
// reachable space and shortcut audit, from the files their steps wrote under
// the run's folder.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "kforge/core/document.h"

namespace kforge::synth {

std::string card_extra_sections(const std::filesystem::path& out, const json& stats);

}  // namespace kforge::synth
