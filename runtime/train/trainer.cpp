#include "runtime/train/trainer.h"

#include <ATen/ATen.h>
#include <torch/optim/optimizer.h>

#include "runtime/data/distributed_sampler.h"
#include "runtime/train/autocast_scope.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/optimizer_factory.h"
#include "runtime/util/check.h"
#include "runtime/util/process_stats.h"
#include "runtime/util/timer.h"

namespace dtrain {
namespace {

// Seed of torch's generator (dropout) for one rank and epoch: reseeding at every epoch start makes a
// resumed run draw exactly the masks the uninterrupted run would have drawn.
uint64_t epoch_seed(int64_t seed, int64_t epoch, int rank) {
  uint64_t z = static_cast<uint64_t>(seed) * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(epoch) * 0xbf58476d1ce4e5b9ULL +
               static_cast<uint64_t>(rank) * 0x94d049bb133111ebULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

Trainer::Trainer(const TrainConfig& config, const Workload& workload, Communicator& comm, RunLogger& logger,
                 ReducerFactory make_reducer, c10::Device device)
    : config_(config),
      workload_(workload),
      comm_(comm),
      logger_(logger),
      make_reducer_(std::move(make_reducer)),
      device_(device),
      seed_(config.train.seed) {
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

TrainResult Trainer::run(RunInfo info) {
  Stopwatch total;
  Checkpointer checkpointer(config_.checkpoint, comm_);
  int64_t first_epoch = 1;
  std::string resume_note;
  if (config_.checkpoint.resume) {
    const auto meta = checkpointer.restore(*model_, *optimizer_, workload_.name(), to_string(config_.train.optimizer));
    if (meta) {
      first_epoch = meta->epoch + 1;
      seed_ = meta->seed;  // the shuffles and dropout masks must continue the original run's streams
      resume_note = "resumed from epoch " + std::to_string(meta->epoch) + " of a run at world size " +
                    std::to_string(meta->world_size) + " (checkpoint.dir " + config_.checkpoint.dir + ", seed " +
                    std::to_string(seed_) + ")";
    } else {
      resume_note = "no checkpoint in " + config_.checkpoint.dir + "; starting at epoch 1";
    }
  }
  std::unique_ptr<GradReducer> reducer = make_reducer_(model_->parameters(), model_->buffers(), comm_);

  info.data_description = data_.description;
  info.train_samples = data_.train.size();
  info.test_samples = data_.test.size();
  info.parameters = 0;
  for (const at::Tensor& p : model_->parameters()) info.parameters += p.numel();
  logger_.run_start(info);
  if (!resume_note.empty()) logger_.info(resume_note);

  TrainResult result;
  for (int64_t epoch = first_epoch; epoch <= config_.train.epochs; ++epoch) {
    Stopwatch epoch_watch;
    EpochStats stats;
    stats.epoch = epoch;
    stats.epochs = config_.train.epochs;
    stats.lr = learning_rate_for_epoch(config_.train, epoch);
    set_learning_rate(*optimizer_, stats.lr);
    at::manual_seed(epoch_seed(seed_, epoch, comm_.rank()));

    Stopwatch phase;
    MetricTotals train = train_epoch(epoch, *reducer, stats);
    stats.train_s = phase.elapsed_s();
    phase.reset();
    MetricTotals test = evaluate();
    reduce_totals(comm_, train, test);
    stats.eval_s = phase.elapsed_s();

    stats.train_samples = static_cast<int64_t>(train.samples);
    stats.train_loss = train.mean_loss();
    stats.test_loss = test.mean_loss();
    stats.test_accuracy = test.accuracy();
    stats.test_correct = static_cast<int64_t>(test.correct);
    stats.test_samples = static_cast<int64_t>(test.samples);
    stats.samples_per_s = stats.train_s > 0 ? train.samples / stats.train_s : 0.0;
    if (config_.checkpoint.enabled) {
      CheckpointMeta meta{epoch, seed_, workload_.name(), to_string(config_.train.optimizer), comm_.world_size()};
      stats.checkpoint_path = checkpointer.save(meta, *model_, *optimizer_);
    }
    stats.epoch_s = epoch_watch.elapsed_s();
    logger_.epoch_end(stats);
    result.epochs.push_back(stats);
  }

  RunSummary& summary = result.summary;
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

MetricTotals Trainer::train_epoch(int64_t epoch, GradReducer& reducer, EpochStats& stats) {
  const TrainOptions& opt = config_.train;
  const TensorDataset& train = data_.train;
  const DistributedSampler sampler(train.size(), comm_.rank(), comm_.world_size(), static_cast<uint64_t>(seed_));
  std::vector<int64_t> order = sampler.indices(epoch);
  const int64_t samples = static_cast<int64_t>(order.size());
  const at::Tensor index = at::from_blob(order.data(), {samples}, at::kLong).to(train.inputs.device());
  int64_t steps = (samples + opt.batch_size - 1) / opt.batch_size;
  if (opt.max_steps > 0) steps = std::min(steps, opt.max_steps);

  model_->train();
  // Loss sums stay on the device; reading them every step would synchronise a GPU.
  at::Tensor loss_sum = at::zeros({}, train.inputs.options().dtype(at::kDouble));
  at::Tensor interval_loss_sum = at::zeros_like(loss_sum);
  int64_t samples_seen = 0;
  int64_t interval_samples = 0;
  for (int64_t step = 0; step < steps; ++step) {
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
    at::Tensor objective = group_size > 1 ? loss / static_cast<double>(group_size) : loss;
    if (scaler_) objective = scaler_->scale(objective);
    objective.backward();
    const StepCommStats comm = reducer.finish_backward();
    stats.comm_s += comm.comm_s;
    stats.exposed_comm_s += comm.exposed_comm_s;
    stats.bytes_allreduced += comm.bytes_reduced;
    if (sync) {
      optimizer_step();
      reducer.zero_grad();
    }

    const at::Tensor batch_loss_sum = loss.detach().to(at::kDouble) * static_cast<double>(count);
    loss_sum.add_(batch_loss_sum);
    interval_loss_sum.add_(batch_loss_sum);
    samples_seen += count;
    interval_samples += count;
    if (config_.log.interval > 0 && (step + 1) % config_.log.interval == 0) {
      // Collective on every rank at the same steps: the line shows the loss of all ranks, not rank 0's.
      at::Tensor sums = at::tensor(std::vector<double>{interval_loss_sum.item<double>(), static_cast<double>(interval_samples)});
      comm_.allreduce(sums, ReduceOp::kSum);
      ProgressInfo progress;
      progress.epoch = epoch;
      progress.samples_total = train.size();
      progress.samples_done = std::min(train.size(), samples_seen * comm_.world_size());
      progress.loss = sums[0].item<double>() / sums[1].item<double>();
      logger_.train_progress(progress);
      interval_loss_sum.zero_();
      interval_samples = 0;
    }
    logger_.step_progress(epoch, step + 1, steps);
  }
  stats.steps = steps;
  if (scaler_ && scaler_->skipped_steps() > 0) {
    logger_.info("fp16: " + std::to_string(scaler_->skipped_steps()) +
                 " optimizer steps skipped so far for inf/NaN gradients; loss scale now " +
                 std::to_string(scaler_->current_scale()));
  }
  MetricTotals totals;
  totals.loss_sum = loss_sum.item<double>();
  totals.samples = static_cast<double>(samples_seen);
  return totals;
}

void Trainer::optimizer_step() {
  if (scaler_) {
    // The gradients are already averaged, so every rank finds the same overflow and skips the same steps.
    std::vector<at::Tensor> grads;
    for (const at::Tensor& p : model_->parameters()) grads.push_back(p.grad());
    const bool found_inf = scaler_->unscale_and_check(grads);
    scaler_->update(found_inf);
    if (found_inf) return;
  }
  optimizer_->step();
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
