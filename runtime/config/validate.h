// Cross-field rules that no single key can check. Run on every rank before the first collective.
#pragma once

#include "runtime/config/config.h"

namespace dtrain {

// Throws ConfigError naming the keys involved and where their values came from.
void validate_config(const TrainConfig& config, const ConfigSources& sources);

// The rules that depend on the resolved device (comm.device "auto" resolved by resolve_device).
void validate_for_device(const TrainConfig& config, DeviceKind device, const ConfigSources& sources);

// Checks that need the resolved backend (comm.backend after 'auto'). Throws ConfigError.
void validate_for_backend(const TrainConfig& config, BackendKind backend, const ConfigSources& sources);

// Rank 0, at start-up: the log directory, and the checkpoint directory when checkpoints are on, exist or
// can be created, are directories and take new files. Throws ConfigError naming the key, its source,
// the path and the reason, so that a bad path fails before training rather than an epoch into it.
void validate_output_dirs(const TrainConfig& config, const ConfigSources& sources);

}  // namespace dtrain
