#include "runtime/train/stop_agreement.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace dtrain {

StopAgreement::StopAgreement(Communicator& comm, int64_t check_steps)
    : comm_(comm), check_steps_(std::max<int64_t>(1, check_steps)) {}

StepDecision StopAgreement::agree(bool root_flag) {
  steps_since_agreement_ = 0;
  at::Tensor mine = at::zeros({2}, at::kLong);
  mine[0] = local_signal_ ? local_signal_() : 0;
  mine[1] = root_flag && comm_.is_root() ? 1 : 0;
  const at::Tensor all = comm_.allgather(mine).contiguous();
  const int64_t* values = all.data_ptr<int64_t>();
  StepDecision decision;
  decision.checkpoint = values[1] != 0;
  for (int rank = 0; rank < comm_.world_size(); ++rank) {
    if (values[2 * rank] == 0) continue;
    decision.stop_signal = static_cast<int>(values[2 * rank]);
    decision.stop_rank = rank;
    break;
  }
  return decision;
}

}  // namespace dtrain
