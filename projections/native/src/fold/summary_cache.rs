//! A run's summary cache: what each task adds to its `run.summary` (its attempt lists and
//! verdicts encoded, its values, rewards, Harbor tallies and views) and the run-wide totals
//! those add up to (each output's values in log order and sorted, reward_stats' lists in
//! order, the trial ids), kept between revisions so that a revision remakes only the tasks
//! its events changed (`projections.assembly.contributions.SummaryCache` is the Python fold's).
//! `summary` writes every summary from it, the first too, so a cache kept and a cache made
//! afresh give the same bytes by construction.
//!
//! A task's part is remade when an event was applied to the task since the cache was last
//! brought up to date (`Task::stamp` past `seen`): the part as it was is taken out of the
//! totals and the part as it is put in, what the two share from the start of each list left
//! in place (a task's rows are only appended to, so a late event moves only what it adds).
//! Whatever is run-wide (a run.started, a run.closed, keys decided afresh) moves the run's
//! `layout` stamp, and the cache is made again whole. The cache holds no reference into the
//! run: a part names its trials by their index in the task, which stays the same as the run
//! grows (tasks and a task's trials are only appended to), and keeps their ids' JSON strings.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;

use super::json::{known, optional_wire, string, Items};
use super::key_figures::{eligible_by_name, key_name};
use super::records::OK;
use super::run::{HarborRules, RunState, Task};
use super::summary::declared_tasks;
use super::task::{Declared, Key};

/// (value's label by `label_of`, run sequence number, the span of its trial id's JSON string
/// in `SummaryCache::trial_ids`) of an attempt with a value: an entry of Harbor's reward_stats.
pub type Reward = (u64, i64, u32, u32);

/// A value's place among reward_stats' labels: its bits, every NaN's the same (each is
/// labelled "nan"), so two values share a label exactly when their `python_repr` is the same.
fn label_of(value: f64) -> u64 {
    if value.is_nan() {
        f64::NAN.to_bits()
    } else {
        value.to_bits()
    }
}

/// A metric's scores over the run: the tasks holding any, all of them, the failed ones, and
/// its outputs by name.
#[derive(Default)]
pub struct MetricTotals {
    tasks: u32,
    /// Named by the run.started's declared outputs: in the summary with no score.
    declared: bool,
    pub scores: usize,
    pub failed: usize,
    pub outputs: BTreeMap<String, OutputTotals>,
}

impl MetricTotals {
    pub fn shown(&self) -> bool {
        self.tasks > 0 || self.declared
    }
}

/// One output of a metric over the run: the tasks whose scores name it, the scores carrying
/// it, its numeric values by (seq, value) in log order, and its finite ones by (value, seq).
#[derive(Default)]
pub struct OutputTotals {
    tasks: u32,
    declared: bool,
    pub carried: usize,
    pub by_seq: Vec<(i64, f64)>,
    pub sorted: Vec<(f64, i64)>,
}

impl OutputTotals {
    pub fn shown(&self) -> bool {
        self.tasks > 0 || self.declared
    }
}

fn by_value(left: &(f64, i64), right: &(f64, i64)) -> std::cmp::Ordering {
    left.0.partial_cmp(&right.0).expect("finite values compare").then(left.1.cmp(&right.1))
}

/// Put `item` in `sorted` after every item not greater than it, or take the last one the
/// `same` as it (its bits: a NaN is the same as itself) out.
fn put<T: Copy>(sorted: &mut Vec<T>, item: T, greater: impl Fn(&T) -> bool, same: impl Fn(&T) -> bool, adding: bool) {
    let at = sorted.partition_point(|held| !greater(held));
    if adding {
        sorted.insert(at, item);
    } else {
        let found = sorted[..at].iter().rposition(same).expect("a value the totals hold");
        sorted.remove(found);
    }
}

/// A task's attempt lists by key name, names sorted (`attempts.task_attempts`): (trial index,
/// value, run sequence number) of each attempt.
type Lists = Vec<(String, Vec<(i32, Option<f64>, i64)>)>;

fn attempt_lists(task: &Task) -> Lists {
    let state = &task.state;
    let mut keys: Vec<(String, &Key)> = state.keys.iter().map(|key| (key_name(key), key)).collect();
    keys.sort_by(|left, right| left.0.cmp(&right.0));
    let mut lists: Lists = Vec::with_capacity(keys.len());
    for (name, (metric, output)) in keys {
        let attempts = state.metric(metric).map(|columns| columns.attempts(output).collect()).unwrap_or_default();
        // Two keys of one name ("a.b" "c" and "a" "b.c"): as the reference's dict, the later
        // replaces the earlier's list in its place (sorted, they are neighbours).
        match lists.last_mut() {
            Some(last) if last.0 == name => last.1 = attempts,
            _ => lists.push((name, attempts)),
        }
    }
    lists
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
fn task_views(task: &Task, declared: &Declared) -> Vec<(String, usize, Vec<f64>)> {
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
        views.push((view.name.clone(), trials, reduced));
    }
    views
}

/// (output name, scores carrying it, (seq, value) of its numeric values in log order).
type OutputPart = (String, usize, Vec<(i64, f64)>);

/// One task's share of the summary.
#[derive(Default)]
pub struct TaskPart {
    /// Its trials counted among the run's: the task's first this many.
    trials: usize,
    /// Per trial, the span of its id's JSON string in `SummaryCache::trial_ids`: written once,
    /// kept from one part of the task to the next.
    spans: Vec<(u32, u32)>,
    /// The indices of its trials with a completed or partial score, counted among the run's.
    graded: Vec<u32>,
    /// Per metric: (its name, its scores, the failed ones, its outputs).
    metrics: Vec<(String, usize, usize, Vec<OutputPart>)>,
    /// Per key name with an attempt that has a value: its rewards, in the task's log order.
    rewards: Vec<(String, Vec<Reward>)>,
    /// Per key name: Harbor's (n, c) of it under the run's rules, and whether a value is
    /// neither null, 0 nor 1.
    pub harbor: Vec<(String, u64, u64, bool)>,
    /// Its views' values, when it is declared (`task_views`).
    pub views: Vec<(String, usize, Vec<f64>)>,
    /// Its `task_metric_attempts` object, encoded.
    pub attempts: Vec<u8>,
    /// Its `verdicts` object, encoded.
    pub verdicts: Vec<u8>,
}

/// What every part made anew needs of the run.
struct RunWide<'a> {
    eligible: BTreeMap<String, &'a Key>,
    declared: HashMap<&'a str, &'a Declared>,
    rules: HarborRules,
}

impl TaskPart {
    /// Task `at`'s part, its trials' `spans` those of its part before (none: new), made up to
    /// its trials with their ids written at the end of `trial_ids`.
    fn of(
        run: &RunState,
        at: usize,
        wide: &RunWide<'_>,
        mut spans: Vec<(u32, u32)>,
        trial_ids: &mut Vec<u8>,
    ) -> TaskPart {
        let task = &run.tasks[at];
        let state = &task.state;
        for trial in spans.len()..state.trials.len() {
            let start = trial_ids.len() as u32;
            string(trial_ids, &state.trials[trial]);
            spans.push((start, trial_ids.len() as u32));
        }
        let lists = attempt_lists(task);
        let mut part = TaskPart { trials: state.trials.len(), ..TaskPart::default() };
        let mut graded = vec![false; state.trials.len()];
        for (metric, columns) in &state.metrics {
            let outputs = columns
                .names
                .iter()
                .enumerate()
                .map(|(slot, output)| {
                    let cells = columns.cells(slot);
                    (output.clone(), cells.len(), columns.numeric(&cells).collect())
                })
                .collect();
            part.metrics.push((metric.as_str().to_owned(), columns.len(), columns.failed(), outputs));
            for row in columns.rows().filter(|row| row.status == OK) {
                graded[row.trial as usize] = true;
            }
        }
        part.graded = (0..graded.len() as u32).filter(|&trial| graded[trial as usize]).collect();
        let null_is_zero = wide.rules == HarborRules::V025;
        let mut attempts = Items::object(&mut part.attempts);
        let mut verdicts = Items::object(&mut part.verdicts);
        for (name, list) in &lists {
            let mut encoded = Items::array(attempts.key(name));
            let (mut n, mut c, mut broken) = (0, 0, false);
            let mut rewards = Vec::new();
            for &(trial, value, seq) in list {
                let (start, end) = spans[trial as usize];
                let mut attempt = Items::object(encoded.item());
                attempt.known(known!("trial_id")).extend_from_slice(&trial_ids[start as usize..end as usize]);
                optional_wire(attempt.known(known!("value")), value);
                attempt.end();
                match value {
                    None => n += u64::from(null_is_zero),
                    Some(value) => {
                        n += 1;
                        c += u64::from(value == 1.0);
                        broken |= value != 1.0 && value != 0.0;
                        rewards.push((label_of(value), seq, start, end));
                    }
                }
            }
            encoded.end();
            part.harbor.push((name.clone(), n, c, broken));
            if !rewards.is_empty() {
                part.rewards.push((name.clone(), rewards));
            }
            let Some(&key) = wide.eligible.get(name) else { continue };
            if let Some(place) = state.keys.iter().position(|held| held == key) {
                let (n, c) = state.counts[place];
                string(verdicts.key(name), verdict(n, c));
            }
        }
        attempts.end();
        verdicts.end();
        if let Some(declared) = wide.declared.get(state.task_id.as_str()) {
            part.views = task_views(task, declared);
        }
        part.spans = spans;
        part
    }
}

/// How `SummaryCache::count` counts a part: into the totals, each item in its place or at
/// the end of its list (`sort` then puts them in place), or out of them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Count {
    In,
    Unsorted,
    Out,
}

/// A run's summary cache: its tasks' parts, in the run's task order, and their totals.
#[derive(Default)]
pub struct SummaryCache {
    /// The run's `stamp` when the cache was last brought up to date.
    seen: u64,
    pub parts: Vec<TaskPart>,
    /// The metrics of the outputs' aggregates and of `metric_coverage`, by name.
    pub metrics: BTreeMap<String, MetricTotals>,
    /// Trial id -> (the tasks holding it, those where it has a completed or partial score):
    /// `trial_count` counts the ids (a graded trial is one its task holds).
    ids: HashMap<Box<str>, (u32, u32)>,
    /// The ids graded in some task (Harbor's n_trials).
    graded: usize,
    /// Per key name with an attempt that has a value, its rewards by (label, seq).
    pub rewards: BTreeMap<String, Vec<Reward>>,
    /// The JSON strings of the trial ids of the tasks' parts, one after another (`TaskPart::spans`).
    pub trial_ids: Vec<u8>,
    /// The declared tasks (`summary::declared_tasks`): the declarations are run-wide.
    pub declared: Vec<usize>,
}

/// The items `list` shares from its start with `other`.
fn shared<T>(list: &[T], other: &[T], same: impl Fn(&T, &T) -> bool) -> usize {
    list.iter().zip(other).take_while(|(left, right)| same(left, right)).count()
}

/// Count `trial_id` in or out of `ids`, as a task's trial or its graded trial; `graded`: the
/// ids graded in some task.
fn count(ids: &mut HashMap<Box<str>, (u32, u32)>, graded: &mut usize, trial_id: &str, is_graded: bool, adding: bool) {
    if adding && !ids.contains_key(trial_id) {
        ids.insert(trial_id.into(), (0, 0));
    }
    let Some(held) = ids.get_mut(trial_id) else { return };
    let tally = if is_graded { &mut held.1 } else { &mut held.0 };
    let before = *tally;
    *tally = if adding { before + 1 } else { before - 1 };
    if is_graded && (before == 0) != (*tally == 0) {
        *graded = if adding { *graded + 1 } else { *graded - 1 };
    }
    if *held == (0, 0) {
        ids.remove(trial_id);
    }
}

impl SummaryCache {
    /// The distinct trial ids of the run's tasks.
    pub fn trial_count(&self) -> usize {
        self.ids.len()
    }

    /// The distinct trial ids with a completed or partial score.
    pub fn graded_count(&self) -> usize {
        self.graded
    }

    /// Brought up to date with `run`: remade whole when something run-wide changed since,
    /// else the tasks changed since remade.
    pub fn refresh(&mut self, run: &RunState) {
        if self.parts.is_empty() || run.layout > self.seen || self.parts.len() > run.tasks.len() {
            *self = SummaryCache { declared: declared_tasks(run), ..SummaryCache::default() };
            if let Some(declarations) = &run.declarations {
                for (metric, names) in declarations.outputs.iter() {
                    let totals = self.metrics.entry(metric.clone()).or_default();
                    totals.declared = true;
                    names.iter().for_each(|name| totals.outputs.entry(name.clone()).or_default().declared = true);
                }
            }
        }
        let changed: Vec<usize> =
            (0..run.tasks.len()).filter(|&at| at >= self.parts.len() || run.tasks[at].stamp > self.seen).collect();
        if !changed.is_empty() {
            let declarations = run.declarations.as_ref();
            let wide = RunWide {
                eligible: eligible_by_name(run),
                declared: declarations
                    .map(|declarations| {
                        declarations.tasks.iter().map(|(task_id, declared)| (task_id.as_str(), declared)).collect()
                    })
                    .unwrap_or_default(),
                rules: declarations.map_or(HarborRules::default(), |declarations| declarations.harbor_rules),
            };
            // Made whole, the totals' lists are filled in task order and sorted once.
            let whole = self.parts.is_empty();
            for at in changed {
                if at == self.parts.len() {
                    self.parts.push(TaskPart::default());
                }
                let mut old = std::mem::take(&mut self.parts[at]);
                let part = TaskPart::of(run, at, &wide, std::mem::take(&mut old.spans), &mut self.trial_ids);
                self.count(run, at, &old, Count::Out, &part);
                self.count(run, at, &part, if whole { Count::Unsorted } else { Count::In }, &old);
                self.parts[at] = part;
            }
            if whole {
                self.sort();
            }
        }
        self.seen = run.stamp;
    }

    /// Every list of the totals sorted, after `Count::Unsorted` filled them: stable sorts, so
    /// values of one seq (or equal values of one label) keep the task order they came in.
    fn sort(&mut self) {
        for output in self.metrics.values_mut().flat_map(|totals| totals.outputs.values_mut()) {
            output.by_seq.sort_by_key(|&(seq, _)| seq);
            output.sorted.sort_by(by_value);
        }
        for rewards in self.rewards.values_mut() {
            rewards.sort_by_key(|&(label, seq, _, _)| (label, seq));
        }
    }

    /// Task `at`'s `part` put into the totals, or taken out of them; the items its lists share
    /// from their start with the same lists of `other` (the task's part after or before it)
    /// left where they are, so that a task's new values move only what is new.
    fn count(&mut self, run: &RunState, at: usize, part: &TaskPart, how: Count, other: &TaskPart) {
        let adding = how != Count::Out;
        let trials = &run.tasks[at].state.trials;
        let from = other.trials.min(part.trials);
        (from..part.trials).for_each(|trial| count(&mut self.ids, &mut self.graded, &trials[trial], false, adding));
        let from = shared(&part.graded, &other.graded, |left, right| left == right);
        for &trial in &part.graded[from..] {
            count(&mut self.ids, &mut self.graded, &trials[trial as usize], true, adding);
        }
        let sign = |held: &mut usize, by: usize| *held = if adding { *held + by } else { *held - by };
        for (metric, scores, failed, outputs) in &part.metrics {
            let others = other.metrics.iter().find(|held| held.0 == *metric);
            let totals = self.metrics.entry(metric.clone()).or_default();
            totals.tasks = if adding { totals.tasks + 1 } else { totals.tasks - 1 };
            sign(&mut totals.scores, *scores);
            sign(&mut totals.failed, *failed);
            for (output, carried, numeric) in outputs {
                let other = others.and_then(|others| others.3.iter().find(|held| held.0 == *output));
                let same =
                    |left: &(i64, f64), right: &(i64, f64)| left.0 == right.0 && left.1.to_bits() == right.1.to_bits();
                let from = shared(numeric, other.map_or(&[][..], |other| &other.2), same);
                let totals = totals.outputs.entry(output.clone()).or_default();
                totals.tasks = if adding { totals.tasks + 1 } else { totals.tasks - 1 };
                sign(&mut totals.carried, *carried);
                for &(seq, value) in &numeric[from..] {
                    if how == Count::Unsorted {
                        totals.by_seq.push((seq, value));
                        if value.is_finite() {
                            totals.sorted.push((value, seq));
                        }
                        continue;
                    }
                    let same = |held: &(i64, f64)| held.0 == seq && held.1.to_bits() == value.to_bits();
                    put(&mut totals.by_seq, (seq, value), |held| held.0 > seq, same, adding);
                    if value.is_finite() {
                        let greater = |held: &(f64, i64)| by_value(held, &(value, seq)).is_gt();
                        let same = |held: &(f64, i64)| held.1 == seq && held.0.to_bits() == value.to_bits();
                        put(&mut totals.sorted, (value, seq), greater, same, adding);
                    }
                }
            }
        }
        for (name, rewards) in &part.rewards {
            let from = other
                .rewards
                .iter()
                .find(|held| held.0 == *name)
                .map_or(0, |other| shared(rewards, &other.1, |left, right| left == right));
            let totals = self.rewards.entry(name.clone()).or_default();
            if how == Count::Unsorted {
                totals.extend_from_slice(&rewards[from..]);
            } else {
                for &reward in &rewards[from..] {
                    let greater = |held: &Reward| (held.0, held.1) > (reward.0, reward.1);
                    put(totals, reward, greater, |held| *held == reward, adding);
                }
            }
            if totals.is_empty() {
                self.rewards.remove(name);
            }
        }
    }

    /// The bytes the cache holds, estimated from above.
    pub fn footprint(&self) -> usize {
        const BLOCK: usize = 16;
        let vec = |capacity: usize, size: usize| if capacity == 0 { 0 } else { capacity * size + BLOCK };
        let string = |held: &str| held.len() + BLOCK;
        let mut held = size_of::<SummaryCache>() + vec(self.parts.capacity(), size_of::<TaskPart>());
        for part in &self.parts {
            held += vec(part.spans.capacity(), 8)
                + vec(part.graded.capacity(), 4)
                + vec(part.attempts.capacity(), 1)
                + vec(part.verdicts.capacity(), 1);
            held += vec(part.metrics.capacity(), size_of::<(String, usize, usize, Vec<OutputPart>)>());
            for (metric, _, _, outputs) in &part.metrics {
                held += string(metric) + vec(outputs.capacity(), size_of::<OutputPart>());
                held +=
                    outputs.iter().map(|(name, _, values)| string(name) + vec(values.capacity(), 16)).sum::<usize>();
            }
            held += vec(part.rewards.capacity(), size_of::<(String, Vec<Reward>)>());
            held +=
                part.rewards.iter().map(|(name, rewards)| string(name) + vec(rewards.capacity(), 24)).sum::<usize>();
            held += vec(part.harbor.capacity(), size_of::<(String, u64, u64, bool)>());
            held += part.harbor.iter().map(|(name, ..)| string(name)).sum::<usize>();
            held += vec(part.views.capacity(), size_of::<(String, usize, Vec<f64>)>());
            held += part.views.iter().map(|(name, _, values)| string(name) + vec(values.capacity(), 8)).sum::<usize>();
        }
        // A hash map's buckets, a power of two with at most 7/8 of them in use, each its slot
        // and a control byte, and a group of control bytes more.
        let buckets = (self.ids.capacity() * 8 / 7 + 1).next_power_of_two();
        held += buckets * (size_of::<(Box<str>, (u32, u32))>() + 1) + 16 + BLOCK;
        held += self.ids.keys().map(|trial_id| string(trial_id)).sum::<usize>() + vec(self.trial_ids.capacity(), 1);
        held += vec(self.declared.capacity(), size_of::<usize>());
        // A BTreeMap's entries: a whole node for a few, else each its share of a node (half
        // full at worst) of eleven.
        let tree = |entries: usize, size: usize| if entries == 0 { 0 } else { entries.max(6) * 2 * size + BLOCK };
        held += tree(self.metrics.len(), size_of::<(String, MetricTotals)>());
        for (name, totals) in &self.metrics {
            held += string(name) + tree(totals.outputs.len(), size_of::<(String, OutputTotals)>());
            for (name, output) in &totals.outputs {
                held += string(name) + vec(output.by_seq.capacity(), 16) + vec(output.sorted.capacity(), 16);
            }
        }
        held += tree(self.rewards.len(), size_of::<(String, Vec<Reward>)>());
        held += self.rewards.iter().map(|(name, rewards)| string(name) + vec(rewards.capacity(), 24)).sum::<usize>();
        held
    }
}
