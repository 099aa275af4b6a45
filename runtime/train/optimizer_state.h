// An optimizer's state by name, the same on every LibTorch version: its kind and each parameter group's
// options as JSON, and each parameter's state tensors by state key ("exp_avg", "step"), so that a
// checkpoint maps them to parameters by the parameters' names. (torch::optim keys its state by the
// parameter's TensorImpl address, a string up to LibTorch 1.x and the pointer from 2.0; its own
// serialisation matches them by an order that differs between versions.) Knows SGD, Adam, AdamW and
// dtrain's Adadelta.
#pragma once

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>
#include <torch/optim/optimizer.h>

#include <functional>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace dtrain {

using TensorCopy = std::function<at::Tensor(const at::Tensor&)>;

// The key under which torch::optim keeps `param`'s state in this LibTorch.
using OptimizerStateKey =
    typename std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>::key_type;
OptimizerStateKey optimizer_state_key(const at::Tensor& param);

// "sgd", "adam", "adamw" or "adadelta"; "" for an optimizer of another type.
std::string optimizer_type(const torch::optim::Optimizer& optimizer);

// {"type": ..., "groups": [{"lr": ..., ...}, ...]}: every option of every parameter group. Throws Error
// for another optimizer type.
nlohmann::json optimizer_options(const torch::optim::Optimizer& optimizer);
// Sets every group's options from `options` (as optimizer_options wrote them). Throws DataError naming
// `where` when the type, the number of groups or an option differs in kind.
void set_optimizer_options(torch::optim::Optimizer& optimizer, const nlohmann::json& options, const std::string& where);

// The state keys of a parameter that has stepped: SGD with momentum {momentum_buffer}, Adam and AdamW
// {step, exp_avg, exp_avg_sq} (+ max_exp_avg_sq with amsgrad), Adadelta {step, square_avg, acc_delta}.
// "step" is a 0-dim int64 tensor, the others have the parameter's shape and type.
std::vector<std::string> optimizer_state_keys(const torch::optim::Optimizer& optimizer);

// How many state tensors of its parameter's shape a stepped parameter has (the keys other than step).
int optimizer_state_tensors(const torch::optim::Optimizer& optimizer);

// Calls `emit(param, key, tensor)` for every state tensor of every parameter that has state, tensors
// through `take` (a copy for a checkpoint written behind training) and steps as new 0-dim int64 tensors.
void for_each_optimizer_state(const torch::optim::Optimizer& optimizer, const TensorCopy& take,
                              const std::function<void(const at::Tensor& param, const std::string& key, at::Tensor tensor)>& emit);

// Replaces the whole state: each parameter in `state` gets the tensors given by key (every key of
// optimizer_state_keys, already checked against the parameter), copied onto its device; the others none.
void set_optimizer_state(torch::optim::Optimizer& optimizer,
                         const std::vector<std::pair<at::Tensor, std::map<std::string, at::Tensor>>>& state);

}  // namespace dtrain
