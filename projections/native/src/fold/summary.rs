//! A run's `run.summary` event encoded, byte for byte what
//! `projections.assembly.summary.summary_bytes` (the reference) makes of the same state:
//! the summary, harbor, verdicts and statistics objects of SEMANTICS.md sections 1-6 and 8,
//! in the contract's key order, written as orjson writes them (`json`).
//!
//! Built from the state alone, every revision afresh (the Python fold's summary cache gives
//! the bytes a rebuild gives, so a rebuild is the reference). The floats come from the same
//! operations in the same order as the Python's: metric values in run log order, views and
//! pass@k in summary task order, the sums compensated (`sums`), the figures of `ranges`,
//! `passk`, `statistics` and `harbor`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::json::{float, integer, null, optional_float, optional_wire, string, wire, Items};
use super::records::{MetricColumns, OK};
use super::run::{HarborRules, RunState, Task};
use super::task::{Declared, Key};
use crate::floats::python_repr;
use crate::harbor;
use crate::passk::{estimates, hat_estimates, key_columns};
use crate::ranges::{center_and_spread, percentiles_by, Center, Spread, PERCENTILES};
use crate::statistics::{Column, Entry};

fn key_name(key: &Key) -> String {
    format!("{}.{}", key.0, key.1)
}

/// (trial_id, value, run sequence number of the score that made it): one attempt.
type Attempt<'a> = (&'a str, Option<f64>, i64);

/// (run sequence number, trial_id) of the attempts of one reward value, in log order once sorted.
type Trials<'a> = Vec<(i64, &'a str)>;

/// Key name -> value label -> its trials (Harbor's reward_stats, gathered).
type Rewards<'a> = HashMap<&'a str, HashMap<String, Trials<'a>>>;

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
            .map(|columns| columns.attempts(output))
            .unwrap_or_default()
            .into_iter()
            .map(|(trial, value, seq)| (&state.trials[trial as usize], value, seq))
            .collect();
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
fn summary_tasks(run: &RunState) -> Vec<usize> {
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

/// A metric's scores over the run: all, failed, and per output those carrying it.
#[derive(Default)]
struct Coverage<'a> {
    scores: usize,
    failed: usize,
    carried: BTreeMap<&'a str, usize>,
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
    string(record.key("name"), name);
    string(record.key("score_type"), "range");
    integer(record.key("count"), middle.count);
    integer(record.key("nan_count"), middle.nan_count);
    let (Some(sum), Some(mean), Some(spreads)) = (middle.sum, middle.mean, spreads) else {
        for field in ["sum", "mean", "min", "max", "variance", "std_dev", "sample_variance", "sample_std_dev"] {
            null(record.key(field));
        }
        null(record.key("percentiles"));
        null(record.key("median"));
        return record.end();
    };
    let figures = percentiles_by(ordered.len(), |at| ordered.get(at).copied()).expect("a value at every position");
    wire(record.key("sum"), sum);
    wire(record.key("mean"), mean);
    float(record.key("min"), ordered[0]);
    float(record.key("max"), ordered[ordered.len() - 1]);
    wire(record.key("variance"), spreads.variance);
    wire(record.key("std_dev"), spreads.variance.sqrt());
    optional_wire(record.key("sample_variance"), spreads.sample_variance);
    optional_wire(record.key("sample_std_dev"), spreads.sample_variance.map(f64::sqrt));
    let mut percentiles = Items::object(record.key("percentiles"));
    for (p, figure) in PERCENTILES.iter().zip(figures) {
        wire(percentiles.key(&format!("p{p}")), figure);
    }
    percentiles.end();
    wire(record.key("median"), figures[4]);
    record.end();
}

/// The range aggregate of `values` among `total` (the non-finite ones count as NaN).
fn range_aggregate(out: &mut Vec<u8>, name: &str, values: impl IntoIterator<Item = f64>, total: usize) {
    let (finite, ordered) = finite_and_sorted(values);
    let (middle, spreads) = center_and_spread(&finite, total);
    aggregate(out, name, &middle, spreads.as_ref(), &ordered);
}

/// Section 8's entry (`statistics`): the figures as orjson writes floats given raw.
fn entry(out: &mut Vec<u8>, figures: &Entry) {
    let mut entry = Items::object(out);
    integer(entry.key("k"), figures.k);
    integer(entry.key("count"), figures.count);
    integer(entry.key("nan_count"), figures.nan_count);
    optional_float(entry.key("mean"), figures.mean);
    optional_float(entry.key("stderr"), figures.stderr);
    optional_float(entry.key("ci95_low"), figures.low);
    optional_float(entry.key("ci95_high"), figures.high);
    entry.end();
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
    // Per signal: trial index -> its value in the trial's last completed or partial score of
    // the signal's metric (none where that score lacks it).
    let mut signals: HashMap<&Key, HashMap<i32, f64>> = HashMap::new();
    let mut views = Vec::with_capacity(declared.views.len());
    for view in &declared.views {
        for key in &view.signals {
            signals.entry(key).or_insert_with(|| signal_values(state.metric(&key.0), &key.1));
        }
        let by_signal: Vec<&HashMap<i32, f64>> = view.signals.iter().map(|key| &signals[key]).collect();
        let mut complete: Vec<i32> = match by_signal.first() {
            None => Vec::new(),
            Some(first) => {
                first.keys().copied().filter(|trial| by_signal[1..].iter().all(|of| of.contains_key(trial))).collect()
            }
        };
        complete.sort_unstable();
        let reduced: Vec<f64> = complete
            .iter()
            .filter_map(|trial| {
                let values: Vec<f64> = by_signal.iter().map(|of| of[trial]).collect();
                view.reducer.reduce(&values)
            })
            .collect();
        views.push((view.name.as_str(), trials, reduced));
    }
    views
}

fn signal_values(columns: Option<&MetricColumns>, output: &str) -> HashMap<i32, f64> {
    let Some(columns) = columns else {
        return HashMap::new();
    };
    let semantic = columns.semantic_at(output);
    if semantic.is_empty() {
        return HashMap::new();
    }
    columns
        .latest_ok_rows()
        .into_iter()
        .filter_map(|(trial, row)| semantic.get(&row).map(|&value| (trial, value)))
        .collect()
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
    coverage: BTreeMap<&'a str, Coverage<'a>>,
    /// (metric, output) -> (seq, value) of its numeric values, in log order once sorted.
    numeric: BTreeMap<(&'a str, &'a str), Vec<(i64, f64)>>,
    /// Per metric_type, the output names declared (any kind) or carried by any score:
    /// the order of the metric aggregates and of `metric_coverage`.
    outputs: BTreeMap<&'a str, BTreeSet<&'a str>>,
    trials: HashSet<&'a str>,
    /// The trial ids with a completed or partial score, of any task and metric.
    graded: HashSet<&'a str>,
    rewards: Rewards<'a>,
}

fn gather<'a>(run: &'a RunState, lists: &'a [Lists<'a>]) -> Gathered<'a> {
    let mut gathered = Gathered::default();
    for (task, task_lists) in run.tasks.iter().zip(lists) {
        let state = &task.state;
        gathered.trials.extend(state.trials.iter());
        for (metric, columns) in &state.metrics {
            let counts = gathered.coverage.entry(metric).or_default();
            counts.scores += columns.len();
            counts.failed += columns.failed();
            // A metric's scores name it among the outputs' metrics, whatever outputs they carry.
            gathered.outputs.entry(metric).or_default().extend(columns.names.iter().map(String::as_str));
            for (at, output) in columns.names.iter().enumerate() {
                *counts.carried.entry(output).or_default() += columns.cells(at).len();
                gathered.numeric.entry((metric, output)).or_default().extend(columns.numeric(output));
            }
            let ok = columns.rows().filter(|row| row.status == OK);
            gathered.graded.extend(ok.map(|row| &state.trials[row.trial as usize]));
        }
        for (name, attempts) in task_lists {
            for &(trial_id, value, seq) in attempts {
                if let Some(value) = value {
                    let labels = gathered.rewards.entry(name.as_str()).or_default();
                    labels.entry(python_repr(value)).or_default().push((seq, trial_id));
                }
            }
        }
    }
    if let Some(declarations) = &run.declarations {
        for (metric, names) in &declarations.outputs {
            gathered.outputs.entry(metric).or_default().extend(names.iter().map(String::as_str));
        }
    }
    gathered
}

/// An eligible key's pass@k and pass^k columns (none where no task is measured).
struct KeyColumns<'a> {
    name: &'a str,
    measured: usize,
    at_k: Vec<Column>,
    hat_k: Vec<Column>,
}

/// Every eligible key's columns, by name, from the (n, c) of its measured tasks in summary
/// task order and its unmeasured ones (`attempts.task_tallies`, `passk.key_figures_of`).
fn key_columns_of<'a>(run: &RunState, order: &[usize], eligible: &'a BTreeMap<String, &Key>) -> Vec<KeyColumns<'a>> {
    let mut measured: BTreeMap<String, (Vec<(u64, u64)>, usize)> = BTreeMap::new();
    for &at in order {
        let state = &run.tasks[at].state;
        for (key, &(n, c)) in state.keys.iter().zip(&state.counts) {
            if run.passk.contains_key(key) {
                let tallies = measured.entry(key_name(key)).or_default();
                if n > 0 {
                    tallies.0.push((n as u64, c as u64));
                } else {
                    tallies.1 += 1;
                }
            }
        }
    }
    eligible
        .keys()
        .map(|name| {
            let (tallies, unmeasured) = measured.remove(name).unwrap_or_default();
            KeyColumns {
                name,
                measured: tallies.len(),
                at_k: key_columns(&tallies, unmeasured, estimates),
                hat_k: key_columns(&tallies, unmeasured, hat_estimates),
            }
        })
        .collect()
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

/// The `run.summary` of the run as `projections.assembly.summary.summary_bytes` encodes it.
pub fn summary_bytes(run: &RunState) -> Vec<u8> {
    let order = summary_tasks(run);
    let eligible: BTreeMap<String, &Key> = run.passk.keys().map(|key| (key_name(key), key)).collect();
    let lists: Vec<Lists<'_>> = run.tasks.iter().map(attempt_lists).collect();
    let gathered = gather(run, &lists);
    let keys = key_columns_of(run, &order, &eligible);
    let parts = Parts { run, order, eligible: &eligible, lists: &lists, gathered, keys };
    let declarations = run.declarations.as_ref();

    let mut out = Vec::with_capacity(4096);
    let mut payload = Items::object(&mut out);
    integer(payload.key("schema_version"), 1);
    string(payload.key("type"), "run.summary");
    string(payload.key("run_id"), &run.run_id);
    integer(payload.key("revision"), run.after_close + 1);
    match &run.closed_reason {
        Some(reason) => string(payload.key("closed_reason"), reason),
        None => null(payload.key("closed_reason")),
    }
    let mut labels = Items::object(payload.key("labels"));
    for (name, value) in declarations.map_or(&[][..], |declarations| &declarations.labels) {
        string(labels.key(name), value);
    }
    labels.end();
    integer(payload.key("event_count"), run.event_count);
    let mut summary = Items::object(payload.key("summary"));
    parts.scores(summary.key("scores"));
    parts.coverage(summary.key("metric_coverage"));
    parts.attempts(summary.key("task_metric_attempts"));
    let tasks = declarations.map_or(parts.order.len(), |declarations| declarations.tasks.len());
    integer(summary.key("task_count"), tasks);
    integer(summary.key("trial_count"), parts.gathered.trials.len());
    integer(summary.key("score_count"), run.score_count);
    summary.end();
    parts.harbor(payload.key("harbor"));
    parts.verdicts(payload.key("verdicts"));
    parts.statistics(payload.key("statistics"));
    payload.end();
    out
}

impl Parts<'_> {
    /// `summary.scores`: the metric outputs' aggregates (values in run log order), the views'
    /// (values in declared task order), then pass@k's (SEMANTICS.md section 4).
    fn scores(&self, out: &mut Vec<u8>) {
        let (run, gathered) = (self.run, &self.gathered);
        let mut scores = Items::array(out);
        for (metric, names) in &gathered.outputs {
            let total = gathered.coverage.get(metric).map_or(0, |counts| counts.scores);
            for output in names {
                let mut values = gathered.numeric.get(&(*metric, *output)).cloned().unwrap_or_default();
                values.sort_by_key(|&(seq, _)| seq);
                let values = values.into_iter().map(|(_, value)| value);
                range_aggregate(scores.item(), &format!("{metric}.{output}"), values, total);
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
        let empty = Coverage::default();
        for (metric, names) in &self.gathered.outputs {
            let counts = self.gathered.coverage.get(metric).unwrap_or(&empty);
            let mut by_output = Items::object(metric_coverage.key(metric));
            for output in names {
                let scored = counts.carried.get(output).copied().unwrap_or(0);
                let mut figures = Items::object(by_output.key(output));
                integer(figures.key("total"), counts.scores);
                integer(figures.key("scored"), scored);
                integer(figures.key("failed"), counts.failed);
                integer(figures.key("missing"), counts.scores as i64 - scored as i64 - counts.failed as i64);
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
                    string(attempt.key("trial_id"), trial_id);
                    optional_wire(attempt.key("value"), value);
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

    /// `statistics` (section 8): every eligible key with a measured task.
    fn statistics(&self, out: &mut Vec<u8>) {
        let mut statistics = Items::object(out);
        for key in self.keys.iter().filter(|key| key.measured > 0) {
            let mut figures = Items::object(statistics.key(key.name));
            integer(figures.key("tasks"), key.measured);
            for (field, columns) in [("pass_at_k", &key.at_k), ("pass_hat_k", &key.hat_k)] {
                let mut entries = Items::array(figures.key(field));
                for column in columns {
                    entry(entries.item(), &column.entry);
                }
                entries.end();
            }
            figures.end();
        }
        statistics.end();
    }

    /// The `harbor` object (`harbor_stats.harbor_stats`), SEMANTICS.md section 6.
    fn harbor(&self, out: &mut Vec<u8>) {
        let run = self.run;
        let mut harbor = Items::object(out);
        integer(harbor.key("n_trials"), self.gathered.graded.len());
        integer(harbor.key("n_errors"), run.trials_failed);
        reward_stats(harbor.key("reward_stats"), &self.gathered.rewards);
        exception_stats(harbor.key("exception_stats"), run);
        self.harbor_pass_at_k(harbor.key("pass_at_k"));
        harbor.end();
    }

    /// Harbor's pass_at_k: per eligible key, Harbor's (n, c) of each summary task that has
    /// attempts counting under the run's rules; a key with a value neither null, 0 nor 1 has none.
    fn harbor_pass_at_k(&self, out: &mut Vec<u8>) {
        let rules =
            self.run.declarations.as_ref().map_or(HarborRules::default(), |declarations| declarations.harbor_rules);
        let null_is_zero = rules == HarborRules::V025;
        let mut binary: BTreeMap<&str, Vec<(u64, u64)>> = BTreeMap::new();
        let mut broken: HashSet<&str> = HashSet::new();
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
fn reward_stats(out: &mut Vec<u8>, rewards: &Rewards<'_>) {
    type Labels<'a, 'b> = Vec<(i64, &'b str, Trials<'a>)>;
    let mut names: Vec<(i64, &str, Labels<'_, '_>)> = rewards
        .iter()
        .map(|(name, labels)| {
            let mut labels: Labels<'_, '_> = labels
                .iter()
                .map(|(label, trials)| {
                    let mut trials = trials.clone();
                    trials.sort_by_key(|&(seq, _)| seq);
                    (trials[0].0, label.as_str(), trials)
                })
                .collect();
            labels.sort_by(|left, right| (left.0, left.1).cmp(&(right.0, right.1)));
            (labels[0].0, *name, labels)
        })
        .collect();
    names.sort_by(|left, right| (left.0, left.1).cmp(&(right.0, right.1)));
    let mut reward_stats = Items::object(out);
    for (_, name, labels) in &names {
        let mut by_label = Items::object(reward_stats.key(name));
        for (_, label, trials) in labels {
            let mut ids = Items::array(by_label.key(label));
            for (_, trial_id) in trials {
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
    let mut places: HashMap<&str, usize> = HashMap::new();
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
