#include "runtime/train/bad_samples.h"

namespace dtrain {

void BadSamples::note(const Batch& batch, int64_t epoch, int64_t step) {
  epoch_count_ += static_cast<int64_t>(batch.bad_samples.size());
  for (const std::string& problem : batch.bad_samples) {
    if (!reported_.insert(problem).second) continue;
    const std::string where = step > 0 ? "epoch " + std::to_string(epoch) + " step " + std::to_string(step) +
                                             ": replaced by another image of the batch"
                                       : "evaluation " + std::to_string(epoch) + ": left out";
    logger_.rank_warning(rank_, where + " (--skip-bad-images; counted in bad_samples, not named again): " + problem);
  }
}

std::string BadSamples::epoch_warning(int64_t epoch, int64_t count) {
  return "epoch " + std::to_string(epoch) + ": " + std::to_string(count) + (count == 1 ? " sample" : " samples") +
         " of all ranks could not be decoded and were stood in for (--skip-bad-images: in training by another "
         "image of the batch, in evaluation by none); each rank's warnings name its files";
}

}  // namespace dtrain
