#include "runtime/train/optimizer_state.h"

#include <ATen/ATen.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <sstream>

#include "runtime/train/adadelta.h"
#include "runtime/util/error.h"

namespace dtrain {
namespace {

using torch::optim::Adam;
using torch::optim::AdamOptions;
using torch::optim::AdamParamState;
using torch::optim::AdamW;
using torch::optim::AdamWOptions;
using torch::optim::AdamWParamState;
using torch::optim::SGD;
using torch::optim::SGDOptions;
using torch::optim::SGDParamState;

template <class T>
bool is(const torch::optim::Optimizer& optimizer) {
  return dynamic_cast<const T*>(&optimizer) != nullptr;
}

// Every option of a group, by name: a getter and a setter each, so that reading and writing list them once.
template <class Options>
struct OptionField {
  const char* name;
  std::function<nlohmann::json(const Options&)> get;
  std::function<void(Options&, const nlohmann::json&)> set;
};

template <class Options>
std::vector<OptionField<Options>> adam_fields() {
  return {
      {"lr", [](const Options& o) { return nlohmann::json(o.lr()); }, [](Options& o, const nlohmann::json& v) { o.lr(v.get<double>()); }},
      {"betas", [](const Options& o) { return nlohmann::json({std::get<0>(o.betas()), std::get<1>(o.betas())}); },
       [](Options& o, const nlohmann::json& v) { o.betas({v.at(0).get<double>(), v.at(1).get<double>()}); }},
      {"eps", [](const Options& o) { return nlohmann::json(o.eps()); }, [](Options& o, const nlohmann::json& v) { o.eps(v.get<double>()); }},
      {"weight_decay", [](const Options& o) { return nlohmann::json(o.weight_decay()); },
       [](Options& o, const nlohmann::json& v) { o.weight_decay(v.get<double>()); }},
      {"amsgrad", [](const Options& o) { return nlohmann::json(o.amsgrad()); }, [](Options& o, const nlohmann::json& v) { o.amsgrad(v.get<bool>()); }},
  };
}

std::vector<OptionField<SGDOptions>> sgd_fields() {
  using O = SGDOptions;
  return {
      {"lr", [](const O& o) { return nlohmann::json(o.lr()); }, [](O& o, const nlohmann::json& v) { o.lr(v.get<double>()); }},
      {"momentum", [](const O& o) { return nlohmann::json(o.momentum()); }, [](O& o, const nlohmann::json& v) { o.momentum(v.get<double>()); }},
      {"dampening", [](const O& o) { return nlohmann::json(o.dampening()); }, [](O& o, const nlohmann::json& v) { o.dampening(v.get<double>()); }},
      {"weight_decay", [](const O& o) { return nlohmann::json(o.weight_decay()); }, [](O& o, const nlohmann::json& v) { o.weight_decay(v.get<double>()); }},
      {"nesterov", [](const O& o) { return nlohmann::json(o.nesterov()); }, [](O& o, const nlohmann::json& v) { o.nesterov(v.get<bool>()); }},
  };
}

std::vector<OptionField<AdadeltaOptions>> adadelta_fields() {
  using O = AdadeltaOptions;
  return {
      {"lr", [](const O& o) { return nlohmann::json(o.lr()); }, [](O& o, const nlohmann::json& v) { o.lr(v.get<double>()); }},
      {"rho", [](const O& o) { return nlohmann::json(o.rho()); }, [](O& o, const nlohmann::json& v) { o.rho(v.get<double>()); }},
      {"eps", [](const O& o) { return nlohmann::json(o.eps()); }, [](O& o, const nlohmann::json& v) { o.eps(v.get<double>()); }},
      {"weight_decay", [](const O& o) { return nlohmann::json(o.weight_decay()); }, [](O& o, const nlohmann::json& v) { o.weight_decay(v.get<double>()); }},
  };
}

template <class Options>
nlohmann::json groups_json(const torch::optim::Optimizer& optimizer, const std::vector<OptionField<Options>>& fields) {
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& group : optimizer.param_groups()) {
    nlohmann::json g = nlohmann::json::object();
    for (const auto& f : fields) g[f.name] = f.get(static_cast<const Options&>(group.options()));
    groups.push_back(std::move(g));
  }
  return groups;
}

template <class Options>
void set_groups(torch::optim::Optimizer& optimizer, const nlohmann::json& groups, const std::vector<OptionField<Options>>& fields,
                const std::string& where) {
  if (!groups.is_array() || groups.size() != optimizer.param_groups().size()) {
    throw DataError(where + " records " + (groups.is_array() ? std::to_string(groups.size()) : std::string("no")) +
                    " parameter groups, this optimizer has " + std::to_string(optimizer.param_groups().size()));
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    auto& options = static_cast<Options&>(optimizer.param_groups()[i].options());
    for (const auto& f : fields) {
      try {
        f.set(options, groups[i].at(f.name));
      } catch (const nlohmann::json::exception&) {
        throw DataError(where + " records group " + std::to_string(i) + "'s option '" + f.name + "' as " +
                        (groups[i].is_object() && groups[i].contains(f.name) ? groups[i][f.name].dump() : std::string("nothing")) +
                        ", expected a " + f.get(options).type_name());
      }
    }
  }
}

// The state of `param`, or null when it has not stepped.
const torch::optim::OptimizerParamState* state_of(const torch::optim::Optimizer& optimizer, const at::Tensor& param) {
  const auto it = optimizer.state().find(optimizer_state_key(param));
  return it == optimizer.state().end() ? nullptr : it->second.get();
}

at::Tensor step_tensor(int64_t step) { return at::scalar_tensor(step, at::kLong); }

}  // namespace

namespace {
// A template, so that only the branch of this LibTorch's key type is compiled.
template <typename Key>
Key state_key(const at::Tensor& param) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream os;
    os << param.unsafeGetTensorImpl();
    return os.str();
  } else {
    return param.unsafeGetTensorImpl();
  }
}
}  // namespace

OptimizerStateKey optimizer_state_key(const at::Tensor& param) { return state_key<OptimizerStateKey>(param); }

std::string optimizer_type(const torch::optim::Optimizer& optimizer) {
  // AdamW before Adam: neither derives from the other today, but the order costs nothing.
  if (is<AdamW>(optimizer)) return "adamw";
  if (is<Adam>(optimizer)) return "adam";
  if (is<SGD>(optimizer)) return "sgd";
  if (is<Adadelta>(optimizer)) return "adadelta";
  return "";
}

nlohmann::json optimizer_options(const torch::optim::Optimizer& optimizer) {
  const std::string type = optimizer_type(optimizer);
  nlohmann::json groups;
  if (type == "adamw") groups = groups_json(optimizer, adam_fields<AdamWOptions>());
  else if (type == "adam") groups = groups_json(optimizer, adam_fields<AdamOptions>());
  else if (type == "sgd") groups = groups_json(optimizer, sgd_fields());
  else if (type == "adadelta") groups = groups_json(optimizer, adadelta_fields());
  else throw Error("a checkpoint cannot hold the state of an optimizer of this type (dtrain knows SGD, Adam, AdamW and Adadelta)");
  return {{"type", type}, {"groups", std::move(groups)}};
}

void set_optimizer_options(torch::optim::Optimizer& optimizer, const nlohmann::json& options, const std::string& where) {
  const std::string type = optimizer_type(optimizer);
  const std::string recorded = options.is_object() && options.contains("type") && options["type"].is_string()
                                   ? options["type"].get<std::string>() : options.dump();
  if (recorded != type) throw DataError(where + " records optimizer " + recorded + ", this run's is " + type);
  const nlohmann::json groups = options.contains("groups") ? options["groups"] : nlohmann::json();
  if (type == "adamw") set_groups(optimizer, groups, adam_fields<AdamWOptions>(), where);
  else if (type == "adam") set_groups(optimizer, groups, adam_fields<AdamOptions>(), where);
  else if (type == "sgd") set_groups(optimizer, groups, sgd_fields(), where);
  else set_groups(optimizer, groups, adadelta_fields(), where);
}

std::vector<std::string> optimizer_state_keys(const torch::optim::Optimizer& optimizer) {
  const std::string type = optimizer_type(optimizer);
  const auto adam = [](bool amsgrad) {
    std::vector<std::string> keys{"step", "exp_avg", "exp_avg_sq"};
    if (amsgrad) keys.push_back("max_exp_avg_sq");
    return keys;
  };
  // Options per group may differ; the defaults decide what state a stepped parameter gets.
  if (type == "adamw") return adam(static_cast<const AdamWOptions&>(optimizer.defaults()).amsgrad());
  if (type == "adam") return adam(static_cast<const AdamOptions&>(optimizer.defaults()).amsgrad());
  if (type == "sgd") {
    return static_cast<const SGDOptions&>(optimizer.defaults()).momentum() != 0 ? std::vector<std::string>{"momentum_buffer"}
                                                                                 : std::vector<std::string>{};
  }
  if (type == "adadelta") return {"step", "square_avg", "acc_delta"};
  return {};
}

int optimizer_state_tensors(const torch::optim::Optimizer& optimizer) {
  int n = 0;
  for (const std::string& key : optimizer_state_keys(optimizer)) n += key == "step" ? 0 : 1;
  return n;
}

void for_each_optimizer_state(const torch::optim::Optimizer& optimizer, const TensorCopy& take,
                              const std::function<void(const at::Tensor&, const std::string&, at::Tensor)>& emit) {
  const std::string type = optimizer_type(optimizer);
  const auto put = [&](const at::Tensor& param, const char* key, const at::Tensor& t) {
    if (t.defined()) emit(param, key, take(t));
  };
  for (const auto& group : optimizer.param_groups()) {
    for (const at::Tensor& param : group.params()) {
      const torch::optim::OptimizerParamState* state = state_of(optimizer, param);
      if (state == nullptr) continue;
      if (type == "sgd") {
        put(param, "momentum_buffer", static_cast<const SGDParamState&>(*state).momentum_buffer());
      } else if (type == "adam" || type == "adamw") {
        const auto emit_adam = [&](const auto& s) {
          emit(param, "step", step_tensor(s.step()));
          put(param, "exp_avg", s.exp_avg());
          put(param, "exp_avg_sq", s.exp_avg_sq());
          put(param, "max_exp_avg_sq", s.max_exp_avg_sq());
        };
        if (type == "adam") emit_adam(static_cast<const AdamParamState&>(*state));
        else emit_adam(static_cast<const AdamWParamState&>(*state));
      } else if (type == "adadelta") {
        const auto& s = static_cast<const AdadeltaParamState&>(*state);
        emit(param, "step", step_tensor(s.step()));
        put(param, "square_avg", s.square_avg());
        put(param, "acc_delta", s.acc_delta());
      }
    }
  }
}

void set_optimizer_state(torch::optim::Optimizer& optimizer,
                         const std::vector<std::pair<at::Tensor, std::map<std::string, at::Tensor>>>& state) {
  const std::string type = optimizer_type(optimizer);
  optimizer.state().clear();
  for (const auto& [param, tensors] : state) {
    const auto get = [&, &param = param, &tensors = tensors](const char* key) {
      const auto it = tensors.find(key);
      if (it == tensors.end()) return at::Tensor();
      at::Tensor copy = at::empty_like(param, at::MemoryFormat::Preserve);  // the layout a step would give it
      return copy.copy_(it->second);
    };
    const int64_t step = tensors.count("step") > 0 ? tensors.at("step").item<int64_t>() : 0;
    std::unique_ptr<torch::optim::OptimizerParamState> s;
    if (type == "sgd") {
      auto sgd = std::make_unique<SGDParamState>();
      sgd->momentum_buffer(get("momentum_buffer"));
      s = std::move(sgd);
    } else if (type == "adam" || type == "adamw") {
      const auto fill = [&](auto adam) {
        adam->step(step);
        adam->exp_avg(get("exp_avg"));
        adam->exp_avg_sq(get("exp_avg_sq"));
        adam->max_exp_avg_sq(get("max_exp_avg_sq"));
        return adam;
      };
      if (type == "adam") s = fill(std::make_unique<AdamParamState>());
      else s = fill(std::make_unique<AdamWParamState>());
    } else if (type == "adadelta") {
      auto adadelta = std::make_unique<AdadeltaParamState>();
      adadelta->step(step);
      adadelta->square_avg(get("square_avg"));
      adadelta->acc_delta(get("acc_delta"));
      s = std::move(adadelta);
    } else {
      continue;
    }
    optimizer.state()[optimizer_state_key(param)] = std::move(s);
  }
}

}  // namespace dtrain
