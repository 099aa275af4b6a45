#include "runtime/train/trainer.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <initializer_list>
#include <numeric>
#include <optional>
#include <utility>

#include "runtime/data/distributed_sampler.h"
#include "runtime/train/batch_plan.h"
#include "runtime/train/draw_seeds.h"
#include "runtime/train/epoch_run.h"
#include "runtime/train/module_setup.h"
#include "runtime/train/non_finite.h"
#include "runtime/train/optimizer_factory.h"
#include "runtime/train/shard_steps.h"
#include "runtime/util/check.h"
#include "runtime/util/process_stats.h"
#include "runtime/util/stop_signals.h"
#include "runtime/util/strings.h"
#include "runtime/util/timer.h"

namespace dtrain {
namespace {

// On a GPU the host reads the non-finite flag where it synchronises anyway (progress lines), or, with
// progress lines off, every this many steps: one stall per 100 steps costs nothing measurable.
constexpr int64_t kNonFiniteCheckSteps = 100;

// On a GPU the ranks agree on stop signals every this many steps (or evaluation batches): a host-side
// collective every step would make the device wait for the host.
constexpr int64_t kGpuStopCheckSteps = 10;

}  // namespace

Trainer::Trainer(const TrainConfig& config, const Workload& workload, Communicator& comm, RunLogger& logger,
                 ReducerFactory make_reducer, c10::Device device, Activity* activity)
    : config_(config),
      workload_(workload),
      comm_(comm),
      logger_(logger),
      make_reducer_(std::move(make_reducer)),
      device_(device),
      state_(config.train, device,
             [this](int64_t epoch, int64_t first, int64_t last, const std::string& what) {
               return non_finite(epoch, first, last, what);
             }),
      seed_(config.train.seed),
      activity_(activity),
      bad_samples_(logger, comm.rank()),
      // A host-side collective every step would make a GPU's steps wait for the host.
      checkpoints_(config_, comm_, logger_, state_, device.is_cuda() ? kGpuStopCheckSteps : 1, activity) {
  data_ = workload_.load_data(config_);
  DTRAIN_CHECK(data_.train && data_.test, Error, "workload '" << workload_.name() << "' loaded no dataset");
  DTRAIN_CHECK(data_.train->size() > 0 && data_.test->size() > 0, DataError,
               "workload '" << workload_.name() << "' loaded an empty dataset (" << data_.train->size() << " train, "
                            << data_.test->size() << " test samples) from " << data_.description);
  at::manual_seed(static_cast<uint64_t>(seed_));
  add_workload_modules(workload_, data_, config_, device_, comm_, state_);
  step_ = workload_.make_step(config_);
  if (comm_.is_root()) sample_writer_ = workload_.make_sample_writer(config_);
  data_.train->to(device_);
  data_.test->to(device_);
}

Trainer::~Trainer() = default;

void Trainer::observe(RunObserver& observer) { observers_.push_back(&observer); }

void Trainer::set_phase(Phase phase, int64_t epoch, int64_t step) {
  if (activity_ != nullptr) activity_->set_phase(phase, epoch, step);
}

void Trainer::sync_buffers() {
  for (TrainedModule& m : state_.modules()) {
    if (m.reducer) m.reducer->sync_buffers();
  }
}

uint64_t Trainer::augment_seed(int64_t epoch) const {
  return epoch_seed(seed_, epoch, /*rank=*/0) ^ 0x5851f42d4c957f2dULL;  // the same on every rank
}

at::Tensor Trainer::model_layout(const at::Tensor& inputs) const {
  if (!config_.train.channels_last || inputs.dim() != 4) return inputs;
  return inputs.contiguous(at::MemoryFormat::ChannelsLast);
}

void Trainer::restore() {
  checkpoints_.identify(identity());
  if (const CheckpointMeta* restored = checkpoints_.restore()) {
    restored_ = restored;
    first_epoch_ = restored->epoch + 1;
    seed_ = restored->seed;  // the shuffles and dropout masks must continue the original run's streams
  }
  plan_batch();
}

RunIdentity Trainer::identity() const {
  return RunIdentity{workload_.name(), to_string(config_.train.optimizer), data_.labels, seed_, global_batch_,
                     data_.train->size()};
}

void Trainer::plan_batch() {
  planned_ = true;
  RunBatch batch = plan_run_batch(config_.train, comm_.world_size(), restored_ ? restored_->global_batch : 0,
                                  data_.train->size(), workload_.whole_input_passes());
  global_batch_ = batch.global_batch;
  share_ = batch.sharing_ranks == 1 ? Share{0, 1} : Share{comm_.rank(), comm_.world_size()};
  batch_note_ = std::move(batch.note);
  checkpoints_.identify(identity());
}

TrainResult Trainer::run(RunInfo info) {
  Stopwatch total;
  if (!planned_) plan_batch();
  for (TrainedModule& m : state_.modules()) {
    if (m.optimizer) m.reducer = make_reducer_(m.module->parameters(), m.module->buffers(), comm_, reducer_plan());
  }
  {
    const DistributedSampler sampler(data_.train->size(), share_.rank, share_.ranks, static_cast<uint64_t>(seed_));
    const int64_t batch = config_.train.batch_size;
    RunPlan plan;
    plan.last_epoch = config_.train.epochs;
    plan.steps_per_epoch = (sampler.samples_per_rank() + batch - 1) / batch;
    if (config_.train.max_steps > 0) plan.steps_per_epoch = std::min(plan.steps_per_epoch, config_.train.max_steps);
    plan.eval_samples = eval_samples();
    plan.global_batch = batch * share_.ranks;
    eta_.emplace(plan);
  }
  start_run(info);
  TrainResult result;
  if (restored_ && first_epoch_ > config_.train.epochs) result.summary.final_test = report_finished_run();
  if (first_epoch_ <= config_.train.epochs) checkpoints_.stop_if_signalled_at_start();
  for (int64_t epoch = first_epoch_; epoch <= config_.train.epochs; ++epoch) result.epochs.push_back(run_epoch(epoch));

  set_phase(Phase::kFinishing, config_.train.epochs);
  checkpoints_.finish();
  RunSummary& summary = result.summary;
  summary.epochs_run = static_cast<int64_t>(result.epochs.size());
  if (!result.epochs.empty()) summary.final_test = result.epochs.back().test;
  const at::Tensor peaks = comm_.allgather(at::tensor(peak_rss_bytes(), at::kLong));
  summary.peak_rss_bytes.assign(peaks.data_ptr<int64_t>(), peaks.data_ptr<int64_t>() + peaks.numel());
  for (RunObserver* o : observers_) o->run_ending(summary);
  summary.total_s = total.elapsed_s();
  logger_.run_end(summary);
  return result;
}

void Trainer::start_run(RunInfo& info) {
  info.data_description = data_.description;
  info.bad_files_left_out = data_.bad_files_left_out;
  info.train_samples = data_.train->size();
  info.test_samples = data_.test->size();
  info.parameters = 0;
  for (const TrainedModule& m : state_.modules()) {
    if (!m.optimizer) continue;  // a copy the step keeps (a moving average) trains nothing of its own
    for (const at::Tensor& p : m.module->parameters()) info.parameters += p.numel();
    if (m.reducer) info.gradient_buckets.push_back({m.name, m.reducer->bucket_bytes()});
  }
  info.deterministic = deterministic_record(config_.train, share_.ranks, global_batch_);
  for (RunObserver* o : observers_) o->run_starting(info);
  logger_.run_start(info);
  for (RunObserver* o : observers_) o->run_started();
  if (!batch_note_.empty()) logger_.info(batch_note_);
  checkpoints_.run_started(info.restart_count, info.joined_unix_s);
}

MetricValues Trainer::report_finished_run() {
  // A restarted job whose run had already finished: report that run's result, as it ended.
  DTRAIN_CHECK(restored_->metrics, DataError,
               "checkpoint '" << restored_->path << "' is of the end of epoch " << restored_->epoch
                              << " but records none of its figures; it was not written by dtrain at an epoch's end");
  EpochStats last = *restored_->metrics;
  last.checkpoint_path = restored_->path;
  logger_.finished_run(last);
  return last.test;
}

EpochStats Trainer::run_epoch(int64_t epoch) {
  Stopwatch epoch_watch;
  EpochStats stats;
  stats.epoch = epoch;
  stats.epochs = config_.train.epochs;
  at::manual_seed(epoch_seed(seed_, epoch, comm_.rank()));
  bad_samples_.begin_epoch();

  Stopwatch phase;
  set_phase(Phase::kTraining, epoch);
  for (RunObserver* o : observers_) o->training_begins(epoch);
  const MetricSums train = train_epoch(epoch, stats);
  stats.train_s = phase.elapsed_s();
  eta_->training_ended();
  for (RunObserver* o : observers_) o->training_ended(epoch);
  // The state at the end of training, held before the evaluation (which does not change it): a stop
  // during a long evaluation then saves it at once instead of losing the epoch's training.
  checkpoints_.hold_epoch_end(epoch);
  phase.reset();
  set_phase(Phase::kEvaluating, epoch);
  StepDecision stop_decision;
  const MetricSums test = evaluate(epoch, &stop_decision);
  if (stop_decision.stop_signal != 0) checkpoints_.stop_in_evaluation(stop_decision, stats, train);
  settle_figures(stats, train, test);
  stats.eval_s = phase.elapsed_s();
  for (RunObserver* o : observers_) o->epoch_ending(stats);
  if (sample_writer_ && sample_writer_->due(epoch, config_.train.epochs)) {
    logger_.samples_written(epoch, sample_writer_->write(logger_.run_directory(), epoch, state_));
  }
  stats.checkpoint_path = checkpoints_.save_epoch_end(stats);
  stats.epoch_s = epoch_watch.elapsed_s();
  eta_->epoch_ended();
  stats.run_left_s = eta_->left_s();
  logger_.epoch_end(stats);
  for (RunObserver* o : observers_) o->epoch_ended(stats);
  // A stop that came in the epoch's last step, its evaluation or its checkpoint: the epoch is complete.
  if (epoch < config_.train.epochs) checkpoints_.after_epoch(stats);
  return stats;
}

void Trainer::settle_figures(EpochStats& stats, const MetricSums& train, const MetricSums& test) {
  const int64_t epoch = stats.epoch;
  const MetricSums counts = count_sums({{"train_samples", stats.train_samples}, {"bad_samples", bad_samples_.epoch_count()}});
  const std::vector<MetricValues> reduced = reduce_all(comm_, {&train, &test, &counts});
  // The values are reduced over all ranks, so every rank takes the same branch here.
  stats.train_samples = reduced_count(reduced[2], "train_samples");
  stats.bad_samples = reduced_count(reduced[2], "bad_samples");
  if (stats.bad_samples > 0) logger_.warning(BadSamples::epoch_warning(epoch, stats.bad_samples));
  if (const auto problem = epoch_figures_problem(reduced[0], reduced[1], stats.train_samples, stats.steps,
                                                 config_.train.batch_size, has_running_statistics(state_.modules()))) {
    throw non_finite(epoch, problem->first_step, problem->last_step, problem->what);
  }
  stats.train = reduced[0];
  stats.test = reduced[1];
  stats.test_samples = eval_samples();
  // A resumed epoch's samples include those trained before its checkpoint; the rate is this run's.
  const int64_t trained_now = stats.train_samples - (resumed_inside(epoch) ? restored_->partial_samples : 0);
  stats.samples_per_s = stats.train_s > 0 && trained_now > 0 ? static_cast<double>(trained_now) / stats.train_s : 0.0;
}

NonFiniteError Trainer::non_finite(int64_t epoch, int64_t first_step, int64_t last_step, const std::string& what) const {
  return non_finite_error(config_, epoch, first_step, last_step, what,
                          restored_ && epoch == first_epoch_ ? restored_->path : std::string());
}

std::vector<int64_t> Trainer::plan_epoch(EpochRun& run, EpochStats& stats) const {
  const TrainOptions& opt = config_.train;
  const Dataset& train = *data_.train;
  const int64_t epoch = run.epoch;
  // An epoch resumed from a checkpoint inside it continues at the checkpoint's position in global samples
  // (at any world size); its first steps are the ones already taken.
  const bool resumed = resumed_inside(epoch);
  // A checkpoint at the end of the epoch's training (a stop cut its evaluation short): nothing is left
  // to train, and the epoch goes on with its evaluation.
  const bool trained = resumed && restored_->epoch_samples >= train.size();
  const int64_t start_sample = resumed && !trained ? restored_->epoch_samples : 0;
  const DistributedSampler sampler(train.size(), share_.rank, share_.ranks, static_cast<uint64_t>(seed_));
  std::vector<int64_t> order;
  if (trained) {
    run.first_step = (sampler.samples_per_rank() + opt.batch_size - 1) / opt.batch_size;
    if (opt.max_steps > 0) run.first_step = std::min(run.first_step, opt.max_steps);
  } else {
    run.first_step = start_sample / (opt.batch_size * share_.ranks);
    order = sampler.indices(epoch, start_sample);
    // Shards are fixed sets of samples: no rank trains on the sampler's padding.
    if (opt.deterministic) order.resize(static_cast<size_t>(unpadded_samples(train.size(), start_sample, share_.rank, share_.ranks)));
  }
  const int64_t samples = static_cast<int64_t>(order.size());
  run.steps = run.first_step + (samples + opt.batch_size - 1) / opt.batch_size;
  if (opt.max_steps > 0) run.steps = std::max(run.first_step, std::min(run.steps, opt.max_steps));
  stats.steps = run.steps - run.first_step;
  stats.first_step = run.first_step + 1;
  run.global_per_step = opt.batch_size * share_.ranks;
  run.epoch_total = std::min(train.size(), run.steps * run.global_per_step);
  run.interval_first_step = run.first_step + 1;
  run.interval_begin_samples = std::min(run.epoch_total, run.first_step * run.global_per_step);
  run.interval_watch.reset();
  if (opt.max_steps > 0) order.resize(static_cast<size_t>(std::min(samples, (run.steps - run.first_step) * opt.batch_size)));
  return order;
}

MetricSums Trainer::train_epoch(int64_t epoch, EpochStats& stats) {
  const TrainOptions& opt = config_.train;
  EpochRun run(epoch, step_->train_metrics(), at::TensorOptions(device_));
  std::vector<int64_t> order = plan_epoch(run, stats);
  eta_->training_begins(epoch, run.first_step, run.steps);
  logger_.begin_progress("epoch " + std::to_string(epoch) + "/" + std::to_string(opt.epochs),
                         std::min(run.epoch_total, run.first_step * run.global_per_step), run.epoch_total);

  for (TrainedModule& m : state_.modules()) m.module->train();
  state_.begin_epoch();
  if (resumed_inside(epoch) && comm_.is_root()) {
    // The metrics of the part trained before the checkpoint count once, on rank 0: the sums are reduced.
    for (const MetricValue& m : restored_->partial_train.all()) {
      run.epoch_sums.add(m.name, at::full({}, m.sum, at::TensorOptions(device_).dtype(at::kDouble)), m.weight);
    }
    run.samples_seen = restored_->partial_samples;
  }
  const std::unique_ptr<BatchStream> stream = data_.train->stream(std::move(order), opt.batch_size, augment_seed(epoch));
  run.sample_seed = augment_seed(epoch) ^ 0x2545f4914f6cdd1dULL;  // its own stream, per epoch
  for (int64_t step = run.first_step; step < run.steps; ++step) {
    if (activity_ != nullptr) activity_->set_step(step + 1);
    Batch batch;
    DTRAIN_CHECK(stream->next(batch), Error, "the training data ended before step " << step + 1 << " of " << run.steps);
    if (!batch.bad_samples.empty()) bad_samples_.note(batch, epoch, step + 1);
    batch.inputs = model_layout(batch.inputs);
    train_step(run, step, batch, stats);
    eta_->step_done(step + 1);
    logger_.progress(std::min(run.epoch_total, (step + 1) * run.global_per_step), eta_->left_s());
  }
  logger_.end_progress();
  if (device_.is_cuda()) check_device_flag(epoch);
  report_skipped_steps(epoch, stats);
  stats.train_samples = run.samples_seen;  // this rank's; run_epoch() reduces it
  return std::move(run.epoch_sums);
}

void Trainer::train_step(EpochRun& run, int64_t step, const Batch& batch, EpochStats& stats) {
  const TrainOptions& opt = config_.train;
  // Accumulation groups of `accumulate` micro-batches; the epoch's last group may be shorter, and its
  // micro-batches are weighted by its real size so the gradient stays a mean.
  const int64_t group_start = step - step % opt.accumulate;
  const int64_t group_size = std::min(opt.accumulate, run.steps - group_start);
  if (step == group_start) {
    const double lr = learning_rate_at(opt, run.epoch, step, run.steps);
    if (lr != run.current_lr) state_.set_learning_rate(lr);
    if (step == run.first_step) stats.lr = lr;
    run.current_lr = lr;
  }
  const MicroBatch micro{run.epoch, step + 1, group_size, step == group_start, step == group_start + group_size - 1,
                         run.sample_seed, 1.0 / static_cast<double>(group_size)};
  if (micro.first) sync_buffers();
  const StepRecord record{run.epoch, step + 1, ++run_step_, batch.size};
  for (RunObserver* o : observers_) o->before_step(record);
  if (opt.deterministic) {
    const ShardedStep where = sharded_step(opt, step, global_batch_, data_.train->size(), share_.rank, share_.ranks);
    train_shards(*step_, state_, batch, micro, where, run.group_sums);
  } else {
    state_.begin_micro_batch(micro);
    step_->train(batch, state_, run.group_sums);
  }
  for (auto o = observers_.rbegin(); o != observers_.rend(); ++o) (*o)->after_step(record);
  const StepCommStats comm = state_.take_comm_stats();
  stats.comm_s += comm.comm_s;
  stats.exposed_comm_s += comm.exposed_comm_s;
  stats.comm_wait_cpu_s += comm.wait_cpu_s;
  stats.bytes_allreduced += comm.bytes_reduced;
  run.group_samples += batch.size;
  if (micro.last) {
    if (counts_its_share() && !(opt.on_nonfinite == NonFinitePolicy::kSkipStep && state_.group_skipped())) {
      run.epoch_sums.add(run.group_sums);
      run.interval_sums.add(run.group_sums);
      run.samples_seen += run.group_samples;
    }
    run.group_sums.zero();
    run.group_samples = 0;
    checkpoints_.after_step(EpochPoint{run.epoch, step + 1, &run.epoch_sums, run.samples_seen}, step + 1 == run.steps);
  }
  const int64_t check_every = config_.log.interval > 0 ? config_.log.interval : kNonFiniteCheckSteps;
  if (device_.is_cuda() && (step + 1) % check_every == 0) check_device_flag(run.epoch);
  if (config_.log.interval > 0 && (step + 1) % config_.log.interval == 0) log_progress(run, step);
}

void Trainer::log_progress(EpochRun& run, int64_t step) {
  // Collective on every rank at the same steps: the line shows the metrics of all ranks, not rank 0's.
  const MetricValues values = run.interval_sums.reduce(comm_);
  if (!values.all_finite()) {
    throw non_finite(run.epoch, run.interval_first_step, step + 1,
                     "the " + non_finite_metrics("training", values, true) + " NaN or infinite");
  }
  bool any = false;  // else every step since the last line was skipped (skip-step)
  for (const MetricValue& m : values.all()) any = any || m.weight > 0;
  if (any) {
    ProgressInfo progress;
    progress.epoch = run.epoch;
    progress.samples_total = data_.train->size();
    progress.epoch_samples = run.epoch_total;
    progress.samples_done = std::min(data_.train->size(), (step + 1) * run.global_per_step);
    progress.metrics = values;
    progress.step = step + 1;
    const double interval_s = run.interval_watch.elapsed_s();
    if (interval_s > 0) {
      progress.samples_per_s = static_cast<double>(progress.samples_done - run.interval_begin_samples) / interval_s;
    }
    progress.run_left_s = eta_->left_s();
    logger_.train_progress(progress);
    for (RunObserver* o : observers_) o->progress(progress);
    checkpoints_.mark_progress(run.epoch, progress.samples_done);
  }
  run.interval_sums.zero();
  run.interval_first_step = step + 2;
  run.interval_begin_samples = std::min(data_.train->size(), (step + 1) * run.global_per_step);
  run.interval_watch.reset();
}

void Trainer::check_device_flag(int64_t epoch) const {
  const int64_t bad_step = state_.first_nonfinite_step();
  if (bad_step > 0) throw non_finite(epoch, bad_step, bad_step, "the loss or the averaged gradients are NaN or infinite");
}

void Trainer::report_skipped_steps(int64_t epoch, EpochStats& stats) {
  stats.skipped_steps = state_.skipped_steps();
  const std::string note = skipped_steps_note(epoch, stats.skipped_steps, stats.steps, state_.scaler());
  if (!note.empty()) logger_.info(note);
}

int64_t Trainer::eval_samples() const {
  const int64_t limit = config_.train.eval_samples;
  return limit > 0 ? std::min(limit, data_.test->size()) : data_.test->size();
}

MetricSums Trainer::evaluate(int64_t epoch, StepDecision* stop) {
  // The first eval_samples() of the test set, whatever the world size: the figures do not depend on it.
  const int64_t total = eval_samples();
  const Range shard = eval_shard(total, comm_.rank(), comm_.world_size());
  sync_buffers();  // every rank evaluates rank 0's model, the one its checkpoint holds
  for (TrainedModule& m : state_.modules()) m.module->eval();
  at::NoGradGuard no_grad;
  MetricSums sums(step_->eval_metrics(), at::TensorOptions(device_));
  std::vector<int64_t> indices(static_cast<size_t>(shard.end - shard.begin));
  std::iota(indices.begin(), indices.end(), shard.begin);
  const std::unique_ptr<BatchStream> stream = data_.test->stream(std::move(indices), config_.train.eval_batch_size, std::nullopt);
  // Progress counts rank 0's share of its shard, scaled to the whole: the shards are equal to a sample.
  const int64_t shard_size = shard.end - shard.begin;
  logger_.begin_progress("evaluation " + std::to_string(epoch) + "/" + std::to_string(config_.train.epochs), 0, total);
  // With `stop`, the ranks agree on stop signals between batches, as between training steps, after the
  // batches every rank has (the shards differ by at most one sample, so the batch counts by at most one).
  const int64_t batch_size = config_.train.eval_batch_size;
  const int64_t common_batches = (total / comm_.world_size() + batch_size - 1) / batch_size;
  const int64_t agree_every = device_.is_cuda() ? kGpuStopCheckSteps : 1;
  int64_t evaluated = 0;
  int64_t batches = 0;
  Batch batch;
  while (stream->next(batch)) {
    if (!batch.bad_samples.empty()) bad_samples_.note(batch, epoch, 0);
    batch.inputs = model_layout(batch.inputs);
    step_->evaluate(batch, state_, sums);
    evaluated += batch.size + static_cast<int64_t>(batch.bad_samples.size());  // those left out were read too
    if (shard_size > 0) logger_.progress(total * evaluated / shard_size, eta_ ? eta_->left_s() : std::nullopt);
    if (stop != nullptr && ++batches < common_batches && batches % agree_every == 0) {
      *stop = checkpoints_.evaluation_stop();
      if (stop->stop_signal != 0) break;
    }
  }
  logger_.end_progress();
  return sums;
}

}  // namespace dtrain
