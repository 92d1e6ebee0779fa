//! A run's `run.summary` event encoded, byte for byte what
//! `projections.assembly.summary.summary_bytes` (the reference) makes of the same state:
//! the summary, harbor, verdicts and statistics objects of SEMANTICS.md sections 1-6 and 8,
//! in the contract's key order, written as orjson writes them (`json`).
//!
//! Written from the run's summary cache (`summary_cache`), brought up to date with the state
//! first: what each task adds is kept there between revisions, the rest (the task order, the
//! pass@k columns, Harbor's tallies and exception_stats) is made here each time. The floats come from the same
//! operations in the same order as the Python's: metric values in run log order, views and
//! pass@k in summary task order, the sums compensated (`sums`), the figures of `ranges`,
//! `passk`, `statistics` and `harbor`; the pass@k columns and the statistics object are
//! `key_figures`', which a progress event shows too.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use super::json::{float, integer, known, null, optional_wire, string, wire, Items};
use super::key_figures::{eligible_by_name, key_columns_of, write_statistics, KeyColumns};
use super::run::RunState;
use super::summary_cache::{Reward, SummaryCache, TaskPart};
use super::task::{Declared, Key};
use crate::floats::{python_repr, write_repr};
use crate::harbor;
use crate::ranges::{center_and_spread, percentiles_by, Center, Spread, PERCENTILES};

/// The names of the percentiles in an aggregate's record, as `Items::known` takes them
/// (`"p10":` ...), made once.
static PERCENTILE_NAMES: LazyLock<Vec<String>> =
    LazyLock::new(|| PERCENTILES.iter().map(|p| format!("\"p{p}\":")).collect());

/// The run's declared tasks in declaration order: indices into the run's tasks.
pub(super) fn declared_tasks(run: &RunState) -> Vec<usize> {
    let declared: &[(String, Declared)] = run.declarations.as_ref().map_or(&[], |declarations| &declarations.tasks);
    declared
        .iter()
        .map(|(task_id, _)| run.task_index.get(task_id, &run.tasks).expect("a declared task is the run's"))
        .collect()
}

/// The `declared` tasks (`declared_tasks`), then tasks named only by scores by first score
/// (`attempts.summary_tasks`): indices into the run's tasks.
pub(super) fn summary_tasks(run: &RunState, declared: &[usize]) -> Vec<usize> {
    let mut named = vec![false; run.tasks.len()];
    declared.iter().for_each(|&at| named[at] = true);
    let mut others: Vec<usize> =
        (0..run.tasks.len()).filter(|&at| !named[at] && run.tasks[at].state.first_score >= 0).collect();
    others.sort_by_key(|&at| run.tasks[at].state.first_score);
    let mut ordered = declared.to_vec();
    ordered.extend(others);
    ordered
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

/// The range aggregate of `values` among `total` (the non-finite ones count as NaN): the
/// finite ones in their order, and `ordered` the same sorted.
fn range_aggregate(out: &mut Vec<u8>, name: &str, values: &[f64], ordered: &[f64], total: usize) {
    let (middle, spreads) = center_and_spread(values, total);
    aggregate(out, name, &middle, spreads.as_ref(), ordered);
}

/// The finite ones of `values`, in their order, and sorted (a stable sort: 0.0 and -0.0 keep
/// their order, as Python's `sorted`).
fn finite_and_sorted(values: impl IntoIterator<Item = f64>) -> (Vec<f64>, Vec<f64>) {
    let finite: Vec<f64> = values.into_iter().filter(|value| value.is_finite()).collect();
    let mut ordered = finite.clone();
    ordered.sort_by(|left, right| left.partial_cmp(right).expect("finite values compare"));
    (finite, ordered)
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

/// A run and what its summary is made of.
struct Parts<'a> {
    run: &'a RunState,
    /// The summary's tasks, as indices into the run's.
    order: Vec<usize>,
    /// Eligible key name -> its key (the reference's dict: a later key of the same name wins).
    eligible: &'a BTreeMap<String, &'a Key>,
    cache: &'a SummaryCache,
    keys: Vec<KeyColumns<'a>>,
}

/// The `run.summary` of the run as `projections.assembly.summary.summary_bytes` encodes it,
/// appended to `out`, from `cache` brought up to date with the run.
pub fn write_summary(out: &mut Vec<u8>, run: &RunState, cache: &mut SummaryCache) {
    cache.refresh(run);
    let order = summary_tasks(run, &cache.declared);
    let eligible = eligible_by_name(run);
    let keys = key_columns_of(run, &order, &eligible);
    let parts = Parts { run, order, eligible: &eligible, cache, keys };
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
    parts.per_task(summary.known(known!("task_metric_attempts")), |part| &part.attempts);
    let tasks = declarations.map_or(parts.order.len(), |declarations| declarations.tasks.len());
    integer(summary.known(known!("task_count")), tasks);
    integer(summary.known(known!("trial_count")), cache.trial_count());
    integer(summary.known(known!("score_count")), run.score_count);
    summary.end();
    parts.harbor(payload.known(known!("harbor")));
    parts.per_task(payload.known(known!("verdicts")), |part| &part.verdicts);
    write_statistics(payload.known(known!("statistics")), &parts.keys);
    payload.end();
}

impl Parts<'_> {
    /// `summary.scores`: the metric outputs' aggregates (values in run log order), the views'
    /// (values in declared task order), then pass@k's (SEMANTICS.md section 4).
    fn scores(&self, out: &mut Vec<u8>) {
        let cache = self.cache;
        let mut scores = Items::array(out);
        for (metric, totals) in cache.metrics.iter().filter(|(_, totals)| totals.shown()) {
            for (output, values) in totals.outputs.iter().filter(|(_, values)| values.shown()) {
                let finite: Vec<f64> =
                    values.by_seq.iter().map(|&(_, value)| value).filter(|value| value.is_finite()).collect();
                let ordered: Vec<f64> = values.sorted.iter().map(|&(value, _)| value).collect();
                range_aggregate(scores.item(), &format!("{metric}.{output}"), &finite, &ordered, totals.scores);
            }
        }
        // Per view name, the trials of the declared tasks that have it and their values.
        let mut views: BTreeMap<&str, (usize, Vec<f64>)> = BTreeMap::new();
        for &at in &cache.declared {
            for (name, trials, values) in &cache.parts[at].views {
                let view = views.entry(name).or_default();
                view.0 += trials;
                view.1.extend(values);
            }
        }
        for (name, (total, values)) in views {
            let (finite, ordered) = finite_and_sorted(values);
            range_aggregate(scores.item(), &format!("view.{name}"), &finite, &ordered, total);
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
        for (metric, totals) in self.cache.metrics.iter().filter(|(_, totals)| totals.shown()) {
            let mut by_output = Items::object(metric_coverage.key(metric));
            for (output, values) in totals.outputs.iter().filter(|(_, values)| values.shown()) {
                let mut figures = Items::object(by_output.key(output));
                integer(figures.known(known!("total")), totals.scores);
                integer(figures.known(known!("scored")), values.carried);
                integer(figures.known(known!("failed")), totals.failed);
                integer(
                    figures.known(known!("missing")),
                    totals.scores as i64 - values.carried as i64 - totals.failed as i64,
                );
                figures.end();
            }
            by_output.end();
        }
        metric_coverage.end();
    }

    /// Per summary task, its encoded object `of` its part: `summary.task_metric_attempts`
    /// (section 1), `verdicts` (section 3).
    fn per_task(&self, out: &mut Vec<u8>, of: impl Fn(&TaskPart) -> &Vec<u8>) {
        let mut by_task = Items::object(out);
        for &at in &self.order {
            by_task.key(&self.run.tasks[at].state.task_id).extend_from_slice(of(&self.cache.parts[at]));
        }
        by_task.end();
    }

    /// The `harbor` object (`harbor_stats.harbor_stats`), SEMANTICS.md section 6.
    fn harbor(&self, out: &mut Vec<u8>) {
        let run = self.run;
        let mut harbor = Items::object(out);
        integer(harbor.known(known!("n_trials")), self.cache.graded_count());
        integer(harbor.known(known!("n_errors")), run.trials_failed);
        reward_stats(harbor.known(known!("reward_stats")), &self.cache.rewards, &self.cache.trial_ids);
        exception_stats(harbor.known(known!("exception_stats")), run);
        self.harbor_pass_at_k(harbor.known(known!("pass_at_k")));
        harbor.end();
    }

    /// Harbor's pass_at_k: per eligible key, Harbor's (n, c) of each summary task that has
    /// attempts counting under the run's rules; a key with a value neither null, 0 nor 1 has none.
    fn harbor_pass_at_k(&self, out: &mut Vec<u8>) {
        let mut binary: BTreeMap<&str, Vec<(u64, u64)>> = BTreeMap::new();
        let mut broken: HashSet<&str> = HashSet::default();
        for &at in &self.order {
            for (name, n, c, unbinary) in &self.cache.parts[at].harbor {
                if *unbinary {
                    broken.insert(name);
                }
                if *n > 0 && self.eligible.contains_key(name) {
                    binary.entry(name).or_default().push((*n, *c));
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

/// Harbor's reward_stats: per key name, its labels by the first seq of their list (then the
/// label), keys by that of their first label (then the name), each list in seq order.
fn reward_stats(out: &mut Vec<u8>, rewards: &BTreeMap<String, Vec<Reward>>, trial_ids: &[u8]) {
    let repr = |bits: u64| python_repr(f64::from_bits(bits));
    // One label: (its value's bits, its first seq, the range of its rewards).
    type Label = (u64, i64, std::ops::Range<usize>);
    // One key name: (the first seq of its first label, the name, its labels).
    let mut keys: Vec<(i64, &str, Vec<Label>)> = Vec::with_capacity(rewards.len());
    for (name, held) in rewards {
        let mut labels: Vec<Label> = Vec::new();
        for (at, &(label, seq, _, _)) in held.iter().enumerate() {
            match labels.last_mut() {
                Some(last) if last.0 == label => last.2.end = at + 1,
                _ => labels.push((label, seq, at..at + 1)),
            }
        }
        labels.sort_by(|left, right| left.1.cmp(&right.1).then_with(|| repr(left.0).cmp(&repr(right.0))));
        keys.push((labels[0].1, name, labels));
    }
    keys.sort_by(|left, right| (left.0, left.1).cmp(&(right.0, right.1)));
    let mut reward_stats = Items::object(out);
    let mut label = Vec::with_capacity(24);
    for (_, name, labels) in keys {
        let held = &rewards[name];
        let mut by_label = Items::object(reward_stats.key(name));
        for (bits, _, range) in labels {
            label.clear();
            write_repr(&mut label, f64::from_bits(bits));
            let mut ids = Items::array(by_label.key(std::str::from_utf8(&label).expect("a float's repr is ASCII")));
            for &(_, _, start, end) in &held[range] {
                ids.item().extend_from_slice(&trial_ids[start as usize..end as usize]);
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
