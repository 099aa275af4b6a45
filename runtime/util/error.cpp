#include "runtime/util/error.h"

namespace dtrain {

std::string ErrorOrigin::prefix() const {
  if (!known()) return "";
  std::string text = "[";
  if (rank >= 0) text += "rank " + std::to_string(rank) + "/" + std::to_string(world_size);
  if (!host.empty()) text += (rank >= 0 ? " " : "") + host;
  return text + "] ";
}

int exit_code_of(const std::exception& error) {
  if (dynamic_cast<const ConfigError*>(&error) != nullptr) return kExitConfig;
  if (dynamic_cast<const DataError*>(&error) != nullptr) return kExitData;
  if (dynamic_cast<const NonFiniteError*>(&error) != nullptr) return kExitNonFinite;
  if (dynamic_cast<const IoError*>(&error) != nullptr) return kExitIo;
  if (dynamic_cast<const CommError*>(&error) != nullptr) return kExitComm;
  if (const auto* stopped = dynamic_cast<const StoppedBySignal*>(&error)) return kExitSignalBase + stopped->signal();
  return kExitFailure;
}

std::string message_without_trace(const std::exception& error) {
  std::string message = error.what();
  if (const size_t cut = message.find("\nException raised from"); cut != std::string::npos) message.resize(cut);
  return message;
}

}  // namespace dtrain
