// What every gradient reducer does alike with a replica's tensors: make them rank 0's, and say whether
// its flat gradient buffers hold only finite values.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "runtime/comm/communicator.h"

namespace dtrain {

// "Float@cpu": tensors of one group travel in one flat buffer.
std::string tensor_group(const at::Tensor& tensor);

// Collective: copies rank 0's values of `tensors` to every rank, one broadcast per dtype and device
// instead of one per tensor (a model has hundreds of small tensors).
void broadcast_from_root(const std::vector<at::Tensor>& tensors, Communicator& comm);

// Local: a 0-dim bool tensor, true when every value of the flat buffers `flats` is finite. On a GPU with
// no host read; on the CPU from each buffer's sum, checked value by value only when the sum is not finite.
at::Tensor all_finite(const std::vector<at::Tensor>& flats);

}  // namespace dtrain
