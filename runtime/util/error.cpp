#include "runtime/util/error.h"

namespace dtrain {

int exit_code_of(const std::exception& error) {
  if (dynamic_cast<const ConfigError*>(&error) != nullptr) return kExitConfig;
  if (dynamic_cast<const DataError*>(&error) != nullptr) return kExitData;
  if (dynamic_cast<const NonFiniteError*>(&error) != nullptr) return kExitNonFinite;
  if (dynamic_cast<const IoError*>(&error) != nullptr) return kExitIo;
  if (dynamic_cast<const CommError*>(&error) != nullptr) return kExitComm;
  return kExitFailure;
}

}  // namespace dtrain
