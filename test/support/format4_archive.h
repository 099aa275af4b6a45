// dtrain 0.1's checkpoint format (4), written the way dtrain 0.1 wrote it: a LibTorch archive
// (torch::serialize::OutputArchive) holding the records of CheckpointMeta, "modules/<name>" as
// Module::save writes a module and "optimizers/<name>" as Optimizer::save writes one. dtrain no longer
// writes or reads it; the tests make one to check that a resume names the converter and that
// scripts/convert_checkpoint.py turns it into a checkpoint that resumes at its step.
#pragma once

#include <string>
#include <vector>

#include "runtime/train/checkpoint_format.h"
#include "runtime/train/train_state.h"

namespace dtrain::test {

// The bytes of a format-4 checkpoint of `modules` at `meta`.
std::string format4_archive(const CheckpointMeta& meta, const std::vector<TrainedModule>& modules);

}  // namespace dtrain::test
