//! A run's `run.summary` event encoded, byte for byte what
//! `projections.assembly.summary.summary_bytes` (the reference) makes of the same state:
//! the summary, harbor, verdicts and statistics objects of SEMANTICS.md sections 1-6 and 8,
//! in the contract's key order, written as orjson writes them (`json`).
//!
//! Built from the state alone, every revision afresh (the Python fold's summary cache gives
//! the bytes a rebuild gives, so a rebuild is the reference). The floats come from the same
//! operations in the same order as the Python's: metric values in run log order, views and
//! pass@k in summary task order, the sums compensated (`sums`), the figures of `ranges`,
//! `passk`, `statistics` and `harbor`; the pass@k columns and the statistics object are
//! `key_figures`', which a progress event shows too.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use super::json::{float, integer, known, null, optional_wire, string, wire, Items};
use super::key_figures::{eligible_by_name, key_columns_of, key_name, write_statistics, KeyColumns};
use super::records::OK;
use super::run::{HarborRules, RunState, Task};
use super::task::{Declared, Key};
use crate::floats::{python_repr, write_repr};
use crate::harbor;
use crate::ranges::{center_and_spread, percentiles_by, Center, Spread, PERCENTILES};

/// The names of the percentiles in an aggregate's record, as `Items::known` takes them
/// (`"p10":` ...), made once.
static PERCENTILE_NAMES: LazyLock<Vec<String>> =
    LazyLock::new(|| PERCENTILES.iter().map(|p| format!("\"p{p}\":")).collect());

/// (trial_id, value, run sequence number of the score that made it): one attempt.
type Attempt<'a> = (&'a str, Option<f64>, i64);

/// (key name's place among `Gathered::reward_names`, value by `label_of`, run sequence number,
/// trial_id) of each attempt with a value, in that order once gathered: Harbor's reward_stats.
type Rewards<'a> = Vec<(u32, u64, i64, &'a str)>;

/// A value's place among reward_stats' labels: its bits, every NaN's the same (each is
/// labelled "nan"), so two values share a label exactly when their `python_repr` is the same.
fn label_of(value: f64) -> u64 {
    if value.is_nan() {
        f64::NAN.to_bits()
    } else {
        value.to_bits()
    }
}

/// A task's attempt lists by key name, names sorted (`attempts.task_attempts`).
type Lists<'a> = Vec<(String, Vec<Attempt<'a>>)>;

fn attempt_lists(task: &Task) -> Lists<'_> {
    let state = &task.state;
    let mut keys: Vec<(String, &Key)> = state.keys.iter().map(|key| (key_name(key), key)).collect();
    keys.sort_by(|left, right| left.0.cmp(&right.0));
    let mut lists: Lists<'_> = Vec::with_capacity(keys.len());
    for (name, (metric, output)) in keys {
        let attempts = state
            .metric(metric)
            .map(|columns| {
                columns
                    .attempts(output)
                    .map(|(trial, value, seq)| (&state.trials[trial as usize], value, seq))
                    .collect()
            })
            .unwrap_or_default();
        // Two keys of one name ("a.b" "c" and "a" "b.c"): as the reference's dict, the later
        // replaces the earlier's list in its place (sorted, they are neighbours).
        match lists.last_mut() {
            Some(last) if last.0 == name => last.1 = attempts,
            _ => lists.push((name, attempts)),
        }
    }
    lists
}

/// Declared tasks in declaration order, then tasks named only by scores by first score
/// (`attempts.summary_tasks`): indices into the run's tasks.
pub(super) fn summary_tasks(run: &RunState) -> Vec<usize> {
    let index: HashMap<&str, usize> =
        run.tasks.iter().enumerate().map(|(at, task)| (task.state.task_id.as_str(), at)).collect();
    let declared: &[(String, Declared)] = run.declarations.as_ref().map_or(&[], |declarations| &declarations.tasks);
    let mut ordered: Vec<usize> = declared.iter().map(|(task_id, _)| index[task_id.as_str()]).collect();
    let named: HashSet<&str> = declared.iter().map(|(task_id, _)| task_id.as_str()).collect();
    let mut others: Vec<usize> = (0..run.tasks.len())
        .filter(|&at| run.tasks[at].state.first_score >= 0 && !named.contains(run.tasks[at].state.task_id.as_str()))
        .collect();
    others.sort_by_key(|&at| run.tasks[at].state.first_score);
    ordered.extend(others);
    ordered
}

/// A metric's scores over the run: all of them, the failed ones, and its outputs.
struct Metric<'a> {
    name: &'a str,
    scores: usize,
    failed: usize,
    /// The output names declared (any kind) or carried by any score, sorted once gathered.
    outputs: Vec<Output<'a>>,
}

/// One output of a metric over the run: the scores carrying it, and (seq, value) of its
/// numeric values, in log order once sorted.
struct Output<'a> {
    name: &'a str,
    carried: usize,
    numeric: Vec<(i64, f64)>,
}

/// The place among `items` of the first that `is`, `made` and added last when none is (a
/// run's metrics, a metric's outputs and its key names are a handful each).
fn place_of<T>(items: &mut Vec<T>, is: impl Fn(&T) -> bool, made: impl FnOnce() -> T) -> usize {
    items.iter().position(is).unwrap_or_else(|| {
        items.push(made());
        items.len() - 1
    })
}

impl<'a> Metric<'a> {
    fn output(&mut self, name: &'a str) -> &mut Output<'a> {
        let at = place_of(
            &mut self.outputs,
            |output| output.name == name,
            || Output { name, carried: 0, numeric: Vec::new() },
        );
        &mut self.outputs[at]
    }
}

/// The metric named `name` among `metrics`, added when new.
fn metric_of<'a, 'b>(metrics: &'b mut Vec<Metric<'a>>, name: &'a str) -> &'b mut Metric<'a> {
    let at =
        place_of(metrics, |metric| metric.name == name, || Metric { name, scores: 0, failed: 0, outputs: Vec::new() });
    &mut metrics[at]
}

/// The finite ones of `values`, in their order, and sorted (a stable sort: 0.0 and -0.0 keep
/// their order, as Python's `sorted`).
fn finite_and_sorted(values: impl IntoIterator<Item = f64>) -> (Vec<f64>, Vec<f64>) {
    let finite: Vec<f64> = values.into_iter().filter(|value| value.is_finite()).collect();
    let mut ordered = finite.clone();
    ordered.sort_by(|left, right| left.partial_cmp(right).expect("finite values compare"));
    (finite, ordered)
}

/// A range aggregate record (`aggregates.aggregate_of`) of the finite values of its center.
fn aggregate(out: &mut Vec<u8>, name: &str, middle: &Center, spreads: Option<&Spread>, ordered: &[f64]) {
    let mut record = Items::object(out);
    string(record.known(known!("name")), name);
    string(record.known(known!("score_type")), "range");
    integer(record.known(known!("count")), middle.count);
    integer(record.known(known!("nan_count")), middle.nan_count);
    let (Some(sum), Some(mean), Some(spreads)) = (middle.sum, middle.mean, spreads) else {
        for field in ["sum", "mean", "min", "max", "variance", "std_dev", "sample_variance", "sample_std_dev"] {
            null(record.key(field));
        }
        null(record.known(known!("percentiles")));
        null(record.known(known!("median")));
        return record.end();
    };
    let figures = percentiles_by(ordered.len(), |at| ordered.get(at).copied()).expect("a value at every position");
    wire(record.known(known!("sum")), sum);
    wire(record.known(known!("mean")), mean);
    float(record.known(known!("min")), ordered[0]);
    float(record.known(known!("max")), ordered[ordered.len() - 1]);
    wire(record.known(known!("variance")), spreads.variance);
    wire(record.known(known!("std_dev")), spreads.variance.sqrt());
    optional_wire(record.known(known!("sample_variance")), spreads.sample_variance);
    optional_wire(record.known(known!("sample_std_dev")), spreads.sample_variance.map(f64::sqrt));
    let mut percentiles = Items::object(record.known(known!("percentiles")));
    for (name, figure) in PERCENTILE_NAMES.iter().zip(figures) {
        wire(percentiles.known(name), figure);
    }
    percentiles.end();
    wire(record.known(known!("median")), figures[4]);
    record.end();
}

/// The range aggregate of `values` among `total` (the non-finite ones count as NaN).
fn range_aggregate(out: &mut Vec<u8>, name: &str, values: impl IntoIterator<Item = f64>, total: usize) {
    let (finite, ordered) = finite_and_sorted(values);
    let (middle, spreads) = center_and_spread(&finite, total);
    aggregate(out, name, &middle, spreads.as_ref(), &ordered);
}

fn verdict(n: i64, c: i64) -> &'static str {
    if n == 0 {
        "unmeasured"
    } else if c == n {
        "solved"
    } else if c == 0 {
        "failed"
    } else {
        "flaky"
    }
}

/// A view's values for one declared task (`view_values.view_values`): per view, in declared
/// order, (its name, the task's trials, the values its trials reduce to, in trial order).
fn task_views<'a>(task: &Task, declared: &'a Declared) -> Vec<(&'a str, usize, Vec<f64>)> {
    let state = &task.state;
    let trials = state.trials.len();
    if trials == 0 {
        return Vec::new();
    }
    // Per signal: per trial index, its value in the trial's last completed or partial score
    // of the signal's metric (none where that score lacks it).
    let mut signals: Vec<(&Key, Vec<Option<f64>>)> = Vec::new();
    let mut views = Vec::with_capacity(declared.views.len());
    for view in &declared.views {
        for key in &view.signals {
            if !signals.iter().any(|(held, _)| *held == key) {
                let values = state.metric(&key.0).map(|columns| columns.latest_semantic(&key.1, trials));
                signals.push((key, values.unwrap_or_else(|| vec![None; trials])));
            }
        }
        let by_signal: Vec<&[Option<f64>]> = view
            .signals
            .iter()
            .map(|key| signals.iter().find(|(held, _)| *held == key).map(|(_, values)| &values[..]).expect("gathered"))
            .collect();
        let mut values = Vec::with_capacity(by_signal.len());
        let mut reduced = Vec::new();
        for trial in 0..if by_signal.is_empty() { 0 } else { trials } {
            values.clear();
            values.extend(by_signal.iter().map_while(|of| of[trial]));
            if values.len() == by_signal.len() {
                reduced.extend(view.reducer.reduce(&values));
            }
        }
        views.push((view.name.as_str(), trials, reduced));
    }
    views
}

/// `heapq.merge` of the lists, item by item as CPython's: each list is taken to be sorted
/// (a task's failed trials are in arrival order, which positions out of arrival order
/// unsort), so where one is not the order is the heap's, reproduced here step by step.
fn merged<T: Ord + Copy>(lists: &[Vec<T>]) -> Vec<T> {
    // (the list's head, its index among the lists, the place of the head in it), compared as
    // the reference's [value, order, next] lists: by value, then order.
    let mut heap: Vec<(T, usize, usize)> = lists
        .iter()
        .enumerate()
        .filter(|(_, list)| !list.is_empty())
        .map(|(order, list)| (list[0], order, 0))
        .collect();
    let less = |left: &(T, usize, usize), right: &(T, usize, usize)| (left.0, left.1) < (right.0, right.1);
    fn sift_down<T: Copy>(heap: &mut [T], start: usize, mut pos: usize, less: &impl Fn(&T, &T) -> bool) {
        let item = heap[pos];
        while pos > start {
            let parent = (pos - 1) >> 1;
            if less(&item, &heap[parent]) {
                heap[pos] = heap[parent];
                pos = parent;
                continue;
            }
            break;
        }
        heap[pos] = item;
    }
    fn sift_up<T: Copy>(heap: &mut [T], mut pos: usize, less: &impl Fn(&T, &T) -> bool) {
        let end = heap.len();
        let start = pos;
        let item = heap[pos];
        let mut child = 2 * pos + 1;
        while child < end {
            if child + 1 < end && !less(&heap[child], &heap[child + 1]) {
                child += 1;
            }
            heap[pos] = heap[child];
            pos = child;
            child = 2 * pos + 1;
        }
        heap[pos] = item;
        sift_down(heap, start, pos, less);
    }
    for at in (0..heap.len() / 2).rev() {
        sift_up(&mut heap, at, &less);
    }
    let mut out = Vec::new();
    while heap.len() > 1 {
        let (value, order, place) = heap[0];
        out.push(value);
        if place + 1 < lists[order].len() {
            heap[0] = (lists[order][place + 1], order, place + 1);
            sift_up(&mut heap, 0, &less);
        } else {
            let last = heap.pop().expect("two heads at least");
            heap[0] = last;
            sift_up(&mut heap, 0, &less);
        }
    }
    if let Some(&(_, order, place)) = heap.first() {
        out.extend_from_slice(&lists[order][place..]);
    }
    out
}

/// What every task of the run adds up to (`contributions.refreshed`): the tasks named only by
/// trial.finished events too, which add no score.
#[derive(Default)]
struct Gathered<'a> {
    /// The metrics of the outputs' aggregates and of `metric_coverage`, sorted by name: those
    /// with a score or a declared output.
    metrics: Vec<Metric<'a>>,
    trials: HashSet<&'a str>,
    /// The trial ids with a completed or partial score, of any task and metric.
    graded: HashSet<&'a str>,
    /// The key names with an attempt that has a value, as they first come.
    reward_names: Vec<&'a str>,
    rewards: Rewards<'a>,
}

fn gather<'a>(run: &'a RunState, lists: &'a [Lists<'a>]) -> Gathered<'a> {
    let mut gathered = Gathered::default();
    for (task, task_lists) in run.tasks.iter().zip(lists) {
        let state = &task.state;
        gathered.trials.extend(state.trials.iter());
        let mut graded = vec![false; state.trials.len()];
        for (metric, columns) in &state.metrics {
            // A metric's scores name it among the outputs' metrics, whatever outputs they carry.
            let counts = metric_of(&mut gathered.metrics, metric);
            counts.scores += columns.len();
            counts.failed += columns.failed();
            for (at, output) in columns.names.iter().enumerate() {
                let cells = columns.cells(at);
                let output = counts.output(output);
                output.carried += cells.len();
                output.numeric.extend(columns.numeric(&cells));
            }
            for row in columns.rows().filter(|row| row.status == OK) {
                graded[row.trial as usize] = true;
            }
        }
        let trials = state.trials.iter().zip(graded).filter(|(_, graded)| *graded);
        gathered.graded.extend(trials.map(|(trial_id, _)| trial_id));
        for (name, attempts) in task_lists {
            let mut valued =
                attempts.iter().filter_map(|&(trial_id, value, seq)| Some((trial_id, value?, seq))).peekable();
            if valued.peek().is_none() {
                continue;
            }
            let place = place_of(&mut gathered.reward_names, |held| held == name, || name) as u32;
            gathered.rewards.extend(valued.map(|(trial_id, value, seq)| (place, label_of(value), seq, trial_id)));
        }
    }
    if let Some(declarations) = &run.declarations {
        for (metric, names) in &declarations.outputs {
            let counts = metric_of(&mut gathered.metrics, metric);
            names.iter().for_each(|name| _ = counts.output(name));
        }
    }
    // No two attempts of a key name share a seq (each is a score's own).
    gathered.rewards.sort_unstable_by_key(|&(name, label, seq, _)| (name, label, seq));
    gathered.metrics.sort_unstable_by(|left, right| left.name.cmp(right.name));
    for metric in &mut gathered.metrics {
        metric.outputs.sort_unstable_by(|left, right| left.name.cmp(right.name));
        for output in &mut metric.outputs {
            output.numeric.sort_by_key(|&(seq, _)| seq);
        }
    }
    gathered
}

/// A run and what its summary is made of.
struct Parts<'a> {
    run: &'a RunState,
    /// The summary's tasks, as indices into the run's.
    order: Vec<usize>,
    /// Eligible key name -> its key (the reference's dict: a later key of the same name wins).
    eligible: &'a BTreeMap<String, &'a Key>,
    /// Each of the run's tasks' attempt lists.
    lists: &'a [Lists<'a>],
    gathered: Gathered<'a>,
    keys: Vec<KeyColumns<'a>>,
}

/// The `run.summary` of the run as `projections.assembly.summary.summary_bytes` encodes it,
/// appended to `out`.
pub fn write_summary(out: &mut Vec<u8>, run: &RunState) {
    let order = summary_tasks(run);
    let eligible = eligible_by_name(run);
    let lists: Vec<Lists<'_>> = run.tasks.iter().map(attempt_lists).collect();
    let gathered = gather(run, &lists);
    let keys = key_columns_of(run, &order, &eligible);
    let parts = Parts { run, order, eligible: &eligible, lists: &lists, gathered, keys };
    let declarations = run.declarations.as_ref();

    let mut payload = Items::object(out);
    integer(payload.known(known!("schema_version")), 1);
    string(payload.known(known!("type")), "run.summary");
    string(payload.known(known!("run_id")), &run.run_id);
    integer(payload.known(known!("revision")), run.after_close + 1);
    match &run.closed_reason {
        Some(reason) => string(payload.known(known!("closed_reason")), reason),
        None => null(payload.known(known!("closed_reason"))),
    }
    let mut labels = Items::object(payload.known(known!("labels")));
    for (name, value) in declarations.map_or(&[][..], |declarations| &declarations.labels) {
        string(labels.key(name), value);
    }
    labels.end();
    integer(payload.known(known!("event_count")), run.event_count);
    let mut summary = Items::object(payload.known(known!("summary")));
    parts.scores(summary.known(known!("scores")));
    parts.coverage(summary.known(known!("metric_coverage")));
    parts.attempts(summary.known(known!("task_metric_attempts")));
    let tasks = declarations.map_or(parts.order.len(), |declarations| declarations.tasks.len());
    integer(summary.known(known!("task_count")), tasks);
    integer(summary.known(known!("trial_count")), parts.gathered.trials.len());
    integer(summary.known(known!("score_count")), run.score_count);
    summary.end();
    parts.harbor(payload.known(known!("harbor")));
    parts.verdicts(payload.known(known!("verdicts")));
    write_statistics(payload.known(known!("statistics")), &parts.keys);
    payload.end();
}

impl Parts<'_> {
    /// `summary.scores`: the metric outputs' aggregates (values in run log order), the views'
    /// (values in declared task order), then pass@k's (SEMANTICS.md section 4).
    fn scores(&self, out: &mut Vec<u8>) {
        let (run, gathered) = (self.run, &self.gathered);
        let mut scores = Items::array(out);
        for metric in &gathered.metrics {
            for output in &metric.outputs {
                let values = output.numeric.iter().map(|&(_, value)| value);
                range_aggregate(scores.item(), &format!("{}.{}", metric.name, output.name), values, metric.scores);
            }
        }
        // Per view name, the trials of the declared tasks that have it and their values.
        let mut views: BTreeMap<&str, (usize, Vec<f64>)> = BTreeMap::new();
        for (task_id, declared) in run.declarations.as_ref().map_or(&[][..], |declarations| &declarations.tasks) {
            let task = run.task(task_id).expect("a declared task is the run's");
            for (name, trials, values) in task_views(task, declared) {
                let view = views.entry(name).or_default();
                view.0 += trials;
                view.1.extend(values);
            }
        }
        for (name, (total, values)) in &views {
            range_aggregate(scores.item(), &format!("view.{name}"), values.iter().copied(), *total);
        }
        for key in &self.keys {
            for column in &key.at_k {
                let mut ordered = column.values.clone();
                ordered.sort_by(|left, right| left.partial_cmp(right).expect("finite figures compare"));
                let name = format!("{}.pass@{}", key.name, column.entry.k);
                aggregate(scores.item(), &name, &column.middle, column.spreads.as_ref(), &ordered);
            }
        }
        scores.end();
    }

    /// `summary.metric_coverage` (section 5), over the metric aggregates' output names.
    fn coverage(&self, out: &mut Vec<u8>) {
        let mut metric_coverage = Items::object(out);
        for metric in &self.gathered.metrics {
            let mut by_output = Items::object(metric_coverage.key(metric.name));
            for output in &metric.outputs {
                let mut figures = Items::object(by_output.key(output.name));
                integer(figures.known(known!("total")), metric.scores);
                integer(figures.known(known!("scored")), output.carried);
                integer(figures.known(known!("failed")), metric.failed);
                integer(
                    figures.known(known!("missing")),
                    metric.scores as i64 - output.carried as i64 - metric.failed as i64,
                );
                figures.end();
            }
            by_output.end();
        }
        metric_coverage.end();
    }

    /// `summary.task_metric_attempts` (section 1).
    fn attempts(&self, out: &mut Vec<u8>) {
        let mut task_metric_attempts = Items::object(out);
        for &at in &self.order {
            let mut by_key = Items::object(task_metric_attempts.key(&self.run.tasks[at].state.task_id));
            for (name, attempts) in &self.lists[at] {
                let mut list = Items::array(by_key.key(name));
                for &(trial_id, value, _) in attempts {
                    let mut attempt = Items::object(list.item());
                    string(attempt.known(known!("trial_id")), trial_id);
                    optional_wire(attempt.known(known!("value")), value);
                    attempt.end();
                }
                list.end();
            }
            by_key.end();
        }
        task_metric_attempts.end();
    }

    /// `verdicts` (section 3): per summary task, each of its eligible keys'.
    fn verdicts(&self, out: &mut Vec<u8>) {
        let mut verdicts = Items::object(out);
        for &at in &self.order {
            let state = &self.run.tasks[at].state;
            let mut by_key = Items::object(verdicts.key(&state.task_id));
            for (name, _) in &self.lists[at] {
                let Some(&key) = self.eligible.get(name) else { continue };
                if let Some(place) = state.keys.iter().position(|held| held == key) {
                    let (n, c) = state.counts[place];
                    string(by_key.key(name), verdict(n, c));
                }
            }
            by_key.end();
        }
        verdicts.end();
    }

    /// The `harbor` object (`harbor_stats.harbor_stats`), SEMANTICS.md section 6.
    fn harbor(&self, out: &mut Vec<u8>) {
        let run = self.run;
        let mut harbor = Items::object(out);
        integer(harbor.known(known!("n_trials")), self.gathered.graded.len());
        integer(harbor.known(known!("n_errors")), run.trials_failed);
        reward_stats(harbor.known(known!("reward_stats")), &self.gathered.reward_names, &self.gathered.rewards);
        exception_stats(harbor.known(known!("exception_stats")), run);
        self.harbor_pass_at_k(harbor.known(known!("pass_at_k")));
        harbor.end();
    }

    /// Harbor's pass_at_k: per eligible key, Harbor's (n, c) of each summary task that has
    /// attempts counting under the run's rules; a key with a value neither null, 0 nor 1 has none.
    fn harbor_pass_at_k(&self, out: &mut Vec<u8>) {
        let rules =
            self.run.declarations.as_ref().map_or(HarborRules::default(), |declarations| declarations.harbor_rules);
        let null_is_zero = rules == HarborRules::V025;
        let mut binary: BTreeMap<&str, Vec<(u64, u64)>> = BTreeMap::new();
        let mut broken: HashSet<&str> = HashSet::default();
        for &at in &self.order {
            for (name, attempts) in &self.lists[at] {
                let (mut n, mut c) = (0, 0);
                for &(_, value, _) in attempts {
                    match value {
                        None => n += u64::from(null_is_zero),
                        Some(value) => {
                            n += 1;
                            if value == 1.0 {
                                c += 1;
                            } else if value != 0.0 {
                                broken.insert(name);
                            }
                        }
                    }
                }
                if self.eligible.contains_key(name) && n > 0 {
                    binary.entry(name).or_default().push((n, c));
                }
            }
        }
        let mut pass_at_k = Items::object(out);
        for (name, tallies) in binary.iter().filter(|(name, _)| !broken.contains(*name)) {
            let figures = harbor::pass_at_k(tallies);
            if figures.is_empty() {
                continue;
            }
            let mut by_k = Items::object(pass_at_k.key(name));
            for (k, figure) in figures {
                float(by_k.key(&k.to_string()), figure);
            }
            by_k.end();
        }
        pass_at_k.end();
    }
}

/// Harbor's reward_stats: labels by the first seq of their list (then the label), keys by
/// that of their first label (then the name), each list in seq order.
fn reward_stats(out: &mut Vec<u8>, names: &[&str], attempts: &Rewards<'_>) {
    // One label: (its key name's place, its value's bits, its first seq, its attempts' range).
    let mut labels: Vec<(u32, u64, i64, std::ops::Range<usize>)> = Vec::new();
    for (at, &(name, label, seq, _)) in attempts.iter().enumerate() {
        match labels.last_mut() {
            Some(last) if last.0 == name && last.1 == label => last.3.end = at + 1,
            _ => labels.push((name, label, seq, at..at + 1)),
        }
    }
    let repr = |bits: u64| python_repr(f64::from_bits(bits));
    labels.sort_by(|left, right| {
        (left.0, left.2).cmp(&(right.0, right.2)).then_with(|| repr(left.1).cmp(&repr(right.1)))
    });
    // One key name: (the first seq of its first label, the name, its labels' range).
    let mut keys: Vec<(i64, &str, u32, std::ops::Range<usize>)> = Vec::new();
    for (at, &(name, _, seq, _)) in labels.iter().enumerate() {
        match keys.last_mut() {
            Some(last) if last.2 == name => last.3.end = at + 1,
            _ => keys.push((seq, names[name as usize], name, at..at + 1)),
        }
    }
    keys.sort_by(|left, right| (left.0, left.1).cmp(&(right.0, right.1)));
    let mut reward_stats = Items::object(out);
    let mut label = Vec::with_capacity(24);
    for (_, name, _, range) in keys {
        let mut by_label = Items::object(reward_stats.key(name));
        for (_, bits, _, trials) in &labels[range] {
            label.clear();
            write_repr(&mut label, f64::from_bits(*bits));
            let mut ids = Items::array(by_label.key(std::str::from_utf8(&label).expect("a float's repr is ASCII")));
            for &(_, _, _, trial_id) in &attempts[trials.clone()] {
                string(ids.item(), trial_id);
            }
            ids.end();
        }
        by_label.end();
    }
    reward_stats.end();
}

/// Harbor's exception_stats: error type -> trial ids, in the order of `heapq.merge` of the
/// tasks' failed trials (run order), as the reference gathers them.
fn exception_stats(out: &mut Vec<u8>, run: &RunState) {
    let failed: Vec<Vec<&(i64, String, String)>> =
        run.tasks.iter().filter_map(|task| task.failed_trials.as_ref()).map(|failed| failed.iter().collect()).collect();
    // Error types in the order they first occur, each with its place there.
    let mut exceptions: Vec<(&str, Vec<&str>)> = Vec::new();
    let mut places: HashMap<&str, usize> = HashMap::default();
    for (_, error_type, trial_id) in merged(&failed) {
        let at = *places.entry(error_type).or_insert_with(|| {
            exceptions.push((error_type, Vec::new()));
            exceptions.len() - 1
        });
        exceptions[at].1.push(trial_id);
    }
    let mut exception_stats = Items::object(out);
    for (error_type, trials) in &exceptions {
        let mut ids = Items::array(exception_stats.key(error_type));
        for trial_id in trials {
            string(ids.item(), trial_id);
        }
        ids.end();
    }
    exception_stats.end();
}
