#include "runtime/train/trainer.h"

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include <cmath>
#include <cstdio>

#include "runtime/data/distributed_sampler.h"
#include "runtime/train/autocast_scope.h"
#include "runtime/train/optimizer_factory.h"
#include "runtime/util/check.h"
#include "runtime/util/process_stats.h"
#include "runtime/util/timer.h"

namespace dtrain {
namespace {

// On a GPU the host reads the non-finite flag where it synchronises anyway (progress lines), or, with
// progress lines off, every this many steps: one stall per 100 steps costs nothing measurable.
constexpr int64_t kNonFiniteCheckSteps = 100;

// Seed of torch's generator (dropout) for one rank and epoch: reseeding at every epoch start makes a
// resumed run draw exactly the masks the uninterrupted run would have drawn.
uint64_t epoch_seed(int64_t seed, int64_t epoch, int rank) {
  uint64_t z = static_cast<uint64_t>(seed) * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(epoch) * 0xbf58476d1ce4e5b9ULL +
               static_cast<uint64_t>(rank) * 0x94d049bb133111ebULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::string format_lr(double lr) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", lr);
  return text;
}

}  // namespace

Trainer::Trainer(const TrainConfig& config, const Workload& workload, Communicator& comm, RunLogger& logger,
                 ReducerFactory make_reducer, c10::Device device, Activity* activity)
    : config_(config),
      workload_(workload),
      comm_(comm),
      logger_(logger),
      make_reducer_(std::move(make_reducer)),
      device_(device),
      seed_(config.train.seed),
      activity_(activity) {
  at::manual_seed(static_cast<uint64_t>(seed_));
  model_ = workload_.make_model();
  model_->to(device_);
  data_ = workload_.load_data(config_.data, static_cast<uint64_t>(seed_));
  DTRAIN_CHECK(data_.train.size() > 0 && data_.test.size() > 0, DataError,
               "workload '" << workload_.name() << "' loaded an empty dataset (" << data_.train.size() << " train, "
                            << data_.test.size() << " test samples) from " << data_.description);
  data_.train = data_.train.to(device_);
  data_.test = data_.test.to(device_);
  optimizer_ = make_optimizer(config_.train, model_->parameters());
  if (config_.train.precision == Precision::kFp16) scaler_ = std::make_unique<LossScaler>();
}

Trainer::~Trainer() = default;

void Trainer::set_phase(Phase phase, int64_t epoch, int64_t step) {
  if (activity_ != nullptr) activity_->set_phase(phase, epoch, step);
}

void Trainer::restore() {
  if (!config_.checkpoint.resume) return;
  set_phase(Phase::kRestoring, 0);
  Checkpointer checkpointer(config_.checkpoint, comm_);
  restored_ = checkpointer.restore(*model_, *optimizer_, workload_.name(), to_string(config_.train.optimizer));
  if (!restored_) {
    resume_note_ = "no checkpoint in " + config_.checkpoint.dir + "; starting at epoch 1";
    return;
  }
  first_epoch_ = restored_->epoch + 1;
  seed_ = restored_->seed;  // the shuffles and dropout masks must continue the original run's streams
  resume_note_ = "resumed from epoch " + std::to_string(restored_->epoch) + " of a run at world size " +
                 std::to_string(restored_->world_size) + " (" + restored_->path + ", seed " + std::to_string(seed_) +
                 ")";
}

TrainResult Trainer::run(RunInfo info) {
  Stopwatch total;
  Checkpointer checkpointer(config_.checkpoint, comm_);
  std::unique_ptr<GradReducer> reducer = make_reducer_(model_->parameters(), model_->buffers(), comm_);

  info.data_description = data_.description;
  info.train_samples = data_.train.size();
  info.test_samples = data_.test.size();
  info.parameters = 0;
  for (const at::Tensor& p : model_->parameters()) info.parameters += p.numel();
  logger_.run_start(info);
  if (!resume_note_.empty()) logger_.info(resume_note_);

  TrainResult result;
  RunSummary& summary = result.summary;
  if (restored_ && first_epoch_ > config_.train.epochs) {
    // A restarted job whose run had already finished: report that run's result, as it ended.
    EpochStats last;
    if (restored_->metrics) {
      last = *restored_->metrics;
    } else {
      // Format 1 checkpoints did not store metrics; the restored model gives the test figures again.
      set_phase(Phase::kEvaluating, restored_->epoch);
      MetricTotals none;
      MetricTotals test = evaluate();
      reduce_totals(comm_, none, test);
      last.epoch = restored_->epoch;
      last.epochs = std::max(restored_->epoch, config_.train.epochs);
      last.train_loss = std::nan("");
      last.test_loss = test.mean_loss();
      last.test_accuracy = test.accuracy();
      last.test_correct = static_cast<int64_t>(test.correct);
      last.test_samples = static_cast<int64_t>(test.samples);
    }
    last.checkpoint_path = restored_->path;
    logger_.finished_run(last);
    summary.final_test_accuracy = last.test_accuracy;
    summary.final_test_loss = last.test_loss;
  }

  for (int64_t epoch = first_epoch_; epoch <= config_.train.epochs; ++epoch) {
    Stopwatch epoch_watch;
    EpochStats stats;
    stats.epoch = epoch;
    stats.epochs = config_.train.epochs;
    stats.lr = learning_rate_for_epoch(config_.train, epoch);
    set_learning_rate(*optimizer_, stats.lr);
    at::manual_seed(epoch_seed(seed_, epoch, comm_.rank()));

    Stopwatch phase;
    set_phase(Phase::kTraining, epoch);
    MetricTotals train = train_epoch(epoch, *reducer, stats);
    stats.train_s = phase.elapsed_s();
    phase.reset();
    set_phase(Phase::kEvaluating, epoch);
    MetricTotals test = evaluate();
    reduce_totals(comm_, train, test);
    stats.eval_s = phase.elapsed_s();

    // The totals are reduced over all ranks, so every rank takes the same branch here.
    if (train.samples == 0) {
      throw non_finite(epoch, 1, stats.steps,
                       "every optimizer step had a NaN or infinite loss or gradient and was skipped; skipping "
                       "cannot recover from this");
    }
    if (!std::isfinite(train.loss_sum)) throw non_finite(epoch, 1, stats.steps, "the training loss is NaN or infinite");
    if (!std::isfinite(test.loss_sum)) {
      throw non_finite(epoch, 0, 0, "evaluation after the epoch gave a NaN or infinite test loss");
    }
    stats.train_samples = static_cast<int64_t>(train.samples);
    stats.train_loss = train.mean_loss();
    stats.test_loss = test.mean_loss();
    stats.test_accuracy = test.accuracy();
    stats.test_correct = static_cast<int64_t>(test.correct);
    stats.test_samples = static_cast<int64_t>(test.samples);
    stats.samples_per_s = stats.train_s > 0 ? train.samples / stats.train_s : 0.0;
    if (config_.checkpoint.enabled) {
      set_phase(Phase::kCheckpointing, epoch);
      CheckpointMeta meta{epoch, seed_, workload_.name(), to_string(config_.train.optimizer), comm_.world_size(), stats, ""};
      stats.checkpoint_path = checkpointer.save(meta, *model_, *optimizer_);
    }
    stats.epoch_s = epoch_watch.elapsed_s();
    logger_.epoch_end(stats);
    result.epochs.push_back(stats);
  }

  set_phase(Phase::kFinishing, config_.train.epochs);
  summary.epochs_run = static_cast<int64_t>(result.epochs.size());
  if (!result.epochs.empty()) {
    summary.final_test_accuracy = result.epochs.back().test_accuracy;
    summary.final_test_loss = result.epochs.back().test_loss;
  }
  const at::Tensor peaks = comm_.allgather(at::tensor(peak_rss_bytes(), at::kLong));
  summary.peak_rss_bytes.assign(peaks.data_ptr<int64_t>(), peaks.data_ptr<int64_t>() + peaks.numel());
  summary.total_s = total.elapsed_s();
  logger_.run_end(summary);
  return result;
}

NonFiniteError Trainer::non_finite(int64_t epoch, int64_t first_step, int64_t last_step, const std::string& what) const {
  std::string where = "epoch " + std::to_string(epoch);
  if (first_step > 0) {
    where += first_step == last_step ? ", step " + std::to_string(first_step)
                                     : ", steps " + std::to_string(first_step) + "-" + std::to_string(last_step);
  }
  std::string advice = "Lower the learning rate (" + format_lr(learning_rate_for_epoch(config_.train, epoch)) + ")";
  if (config_.train.on_nonfinite == NonFinitePolicy::kStop) advice += " or skip such steps with --on-nonfinite skip-step";
  // Epoch (epoch - 1) was checkpointed by this run, or restored from: --resume goes on from there.
  if (config_.checkpoint.enabled && epoch > 1) {
    advice += ", then --resume from the checkpoint of epoch " + std::to_string(epoch - 1) + " in '" +
              config_.checkpoint.dir + "'";
  }
  return NonFiniteError(where + ": " + what + " (train.on_nonfinite: " + to_string(config_.train.on_nonfinite) +
                        "); no checkpoint was written for this epoch. " + advice);
}

bool Trainer::optimizer_step(GradReducer& reducer, int64_t epoch, int64_t step) {
  if (scaler_) {
    // fp16: non-finite gradients are expected while the loss scale settles; the scaler skips those steps
    // on every rank alike (the gradients it checks are the averaged ones). A NaN loss shows in the loss
    // sums, which the progress checks and the epoch end inspect.
    std::vector<at::Tensor> grads;
    for (const at::Tensor& p : model_->parameters()) grads.push_back(p.grad());
    const bool found_inf = scaler_->unscale_and_check(grads);
    scaler_->update(found_inf);
    if (!found_inf) optimizer_->step();
    return !found_inf;
  }
  const at::Tensor finite = reducer.all_finite();
  if (config_.train.on_nonfinite == NonFinitePolicy::kSkipStep) {
    // One host read per optimizer step: the price of deciding on the host (docs/failures.md).
    if (!finite.item<bool>()) return false;
  } else if (!device_.is_cuda()) {
    // On the CPU reading the flag costs nothing: stop before the step, with the parameters still finite.
    if (!finite.item<bool>()) throw non_finite(epoch, step, step, "the loss or the averaged gradients are NaN or infinite");
  } else {
    first_nonfinite_step_ = at::where(finite.logical_or(first_nonfinite_step_ >= 0), first_nonfinite_step_,
                                      at::full({}, step, first_nonfinite_step_.options()));
  }
  optimizer_->step();
  return true;
}

MetricTotals Trainer::train_epoch(int64_t epoch, GradReducer& reducer, EpochStats& stats) {
  const TrainOptions& opt = config_.train;
  const TensorDataset& train = data_.train;
  const DistributedSampler sampler(train.size(), comm_.rank(), comm_.world_size(), static_cast<uint64_t>(seed_));
  std::vector<int64_t> order = sampler.indices(epoch);
  const int64_t samples = static_cast<int64_t>(order.size());
  const at::Tensor index = at::from_blob(order.data(), {samples}, at::kLong).to(train.inputs.device());
  int64_t steps = (samples + opt.batch_size - 1) / opt.batch_size;
  if (opt.max_steps > 0) steps = std::min(steps, opt.max_steps);
  stats.steps = steps;
  const bool skip_nonfinite = opt.on_nonfinite == NonFinitePolicy::kSkipStep;
  const int64_t check_every = config_.log.interval > 0 ? config_.log.interval : kNonFiniteCheckSteps;

  model_->train();
  // Loss sums stay on the device; reading them every step would synchronise a GPU. A group's sum (the
  // micro-batches of one optimizer step) joins the epoch's when its step is taken, or, with skip-step,
  // is dropped with the step.
  const at::TensorOptions sum_options = train.inputs.options().dtype(at::kDouble);
  at::Tensor loss_sum = at::zeros({}, sum_options);
  at::Tensor interval_loss_sum = at::zeros({}, sum_options);
  at::Tensor group_loss_sum = at::zeros({}, sum_options);
  first_nonfinite_step_ = at::full({}, -1, train.inputs.options().dtype(at::kLong));
  int64_t samples_seen = 0;
  int64_t interval_samples = 0;
  int64_t group_samples = 0;
  int64_t interval_first_step = 1;
  for (int64_t step = 0; step < steps; ++step) {
    if (activity_ != nullptr) activity_->set_step(step + 1);
    const int64_t begin = step * opt.batch_size;
    const int64_t count = std::min(opt.batch_size, samples - begin);
    const at::Tensor batch_index = index.narrow(0, begin, count);
    const at::Tensor inputs = train.gather_inputs(batch_index);
    const at::Tensor targets = train.targets.index_select(0, batch_index);

    // Accumulation groups of `accumulate` backward passes; the epoch's last group may be shorter, and its
    // micro-batches are weighted by its real size so the gradient stays a mean.
    const int64_t group_start = step - step % opt.accumulate;
    const int64_t group_size = std::min(opt.accumulate, steps - group_start);
    const bool sync = step == group_start + group_size - 1;

    reducer.prepare_backward(sync);
    at::Tensor loss;
    {
      AutocastScope autocast(device_.type(), opt.precision);
      loss = workload_.loss(model_->forward(inputs), targets);
    }
    // The weight is 1/group_size where the loss is finite and NaN where it is not (0 x inf = NaN): a bad
    // loss on one rank makes its gradients NaN, and the average carries that to every rank, so the
    // gradient check after the allreduce is one signal that all ranks agree on, with no collective of its
    // own and no host read here.
    const at::Tensor weight = loss.detach().mul(0.0).add_(1.0 / static_cast<double>(group_size));
    at::Tensor objective = loss * weight;
    if (scaler_) objective = scaler_->scale(objective);
    objective.backward();
    const StepCommStats comm = reducer.finish_backward();
    stats.comm_s += comm.comm_s;
    stats.exposed_comm_s += comm.exposed_comm_s;
    stats.bytes_allreduced += comm.bytes_reduced;
    group_loss_sum.add_(loss.detach().to(at::kDouble) * static_cast<double>(count));
    group_samples += count;
    if (sync) {
      const bool taken = optimizer_step(reducer, epoch, step + 1);
      reducer.zero_grad();
      if (!taken) ++stats.skipped_steps;
      if (taken || !skip_nonfinite) {
        loss_sum.add_(group_loss_sum);
        interval_loss_sum.add_(group_loss_sum);
        samples_seen += group_samples;
        interval_samples += group_samples;
      }
      group_loss_sum.zero_();
      group_samples = 0;
    }

    if (device_.is_cuda() && (step + 1) % check_every == 0) {
      const int64_t bad_step = first_nonfinite_step_.item<int64_t>();
      if (bad_step > 0) throw non_finite(epoch, bad_step, bad_step, "the loss or the averaged gradients are NaN or infinite");
    }
    if (config_.log.interval > 0 && (step + 1) % config_.log.interval == 0) {
      // Collective on every rank at the same steps: the line shows the loss of all ranks, not rank 0's.
      at::Tensor sums = at::tensor(std::vector<double>{interval_loss_sum.item<double>(), static_cast<double>(interval_samples)});
      comm_.allreduce(sums, ReduceOp::kSum);
      if (!std::isfinite(sums[0].item<double>())) {
        throw non_finite(epoch, interval_first_step, step + 1, "the training loss is NaN or infinite");
      }
      if (sums[1].item<double>() > 0) {  // else every step since the last line was skipped (skip-step)
        ProgressInfo progress;
        progress.epoch = epoch;
        progress.samples_total = train.size();
        progress.samples_done = std::min(train.size(), (step + 1) * opt.batch_size * comm_.world_size());
        progress.loss = sums[0].item<double>() / sums[1].item<double>();
        logger_.train_progress(progress);
      }
      interval_loss_sum.zero_();
      interval_samples = 0;
      interval_first_step = step + 2;
    }
    logger_.step_progress(epoch, step + 1, steps);
  }
  if (device_.is_cuda()) {
    const int64_t bad_step = first_nonfinite_step_.item<int64_t>();
    if (bad_step > 0) throw non_finite(epoch, bad_step, bad_step, "the loss or the averaged gradients are NaN or infinite");
  }
  if (scaler_ && scaler_->skipped_steps() > 0) {
    logger_.info("fp16: " + std::to_string(scaler_->skipped_steps()) +
                 " optimizer steps skipped so far for inf/NaN gradients; loss scale now " +
                 std::to_string(scaler_->current_scale()));
  } else if (stats.skipped_steps > 0) {
    logger_.info("epoch " + std::to_string(epoch) + ": " + std::to_string(stats.skipped_steps) + " of " +
                 std::to_string(stats.steps) +
                 " optimizer steps skipped for a NaN or infinite loss or gradient (train.on_nonfinite: skip-step)");
  }
  MetricTotals totals;
  totals.loss_sum = loss_sum.item<double>();
  totals.samples = static_cast<double>(samples_seen);
  return totals;
}

MetricTotals Trainer::evaluate() {
  const TensorDataset& test = data_.test;
  const Range shard = eval_shard(test.size(), comm_.rank(), comm_.world_size());
  model_->eval();
  at::NoGradGuard no_grad;
  at::Tensor loss_sum = at::zeros({}, test.inputs.options().dtype(at::kDouble));
  at::Tensor correct = at::zeros({}, test.inputs.options().dtype(at::kLong));
  for (int64_t begin = shard.begin; begin < shard.end; begin += config_.train.eval_batch_size) {
    const int64_t count = std::min(config_.train.eval_batch_size, shard.end - begin);
    at::Tensor outputs;
    {
      AutocastScope autocast(device_.type(), config_.train.precision);
      outputs = model_->forward(test.slice_inputs(begin, count));
    }
    const at::Tensor targets = test.targets.narrow(0, begin, count);
    loss_sum.add_(workload_.loss(outputs, targets).to(at::kDouble) * static_cast<double>(count));
    correct.add_(workload_.count_correct(outputs, targets));
  }
  MetricTotals totals;
  totals.loss_sum = loss_sum.item<double>();
  totals.correct = static_cast<double>(correct.item<int64_t>());
  totals.samples = static_cast<double>(shard.end - shard.begin);
  return totals;
}

}  // namespace dtrain
