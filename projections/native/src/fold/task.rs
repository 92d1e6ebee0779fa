//! One task's state within a run, as `projections.fold.task.TaskState` (its reference) holds
//! it: its trial ids in the order its scores first named them, per metric its packed records
//! (`records.rs`), its keys with their (n, c), and the run-wide tallies of the eligible keys
//! kept as its (n, c) move. A score changes only its own task (and those tallies).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use super::records::{passes, Cell, MetricColumns, METRIC_FAILED, OK, TRIAL_FAILED};
use super::sharing::{Recent, Shared};
use super::snug;
use super::trial_ids::TrialIds;
use crate::sums::compensated_sum;

/// (metric_type, output name).
pub type Key = (String, String);

/// How a `score.emitted` ends (SEMANTICS.md section 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// `completed` or `partial`: its outputs count.
    Scored,
    /// `failed` with `failure: "trial"`: the trial died.
    TrialFailed,
    /// `failed` with `failure: "metric"`: unmeasured.
    MetricFailed,
}

/// The run-wide verdict counts of one pass@k-eligible key (`projections.fold.key_tallies.KeyTally`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyTally {
    pub solved: i64,
    pub flaky: i64,
    pub failed: i64,
    pub unmeasured: i64,
    pub pending: i64,
    pub moves: i64,
}

impl KeyTally {
    fn verdict(&mut self, n: i64, c: i64) -> Option<&mut i64> {
        if n == 0 {
            None
        } else if c == n {
            Some(&mut self.solved)
        } else if c == 0 {
            Some(&mut self.failed)
        } else {
            Some(&mut self.flaky)
        }
    }

    pub fn add(&mut self, n: i64, c: i64) {
        self.moves += 1;
        match self.verdict(n, c) {
            None => self.unmeasured += 1,
            Some(count) => *count += 1,
        }
    }

    pub fn shift(&mut self, n: i64, c: i64, new_n: i64, new_c: i64) {
        self.moves += 1;
        match self.verdict(n, c) {
            None => self.unmeasured -= 1,
            Some(count) => *count -= 1,
        }
        if let Some(count) = self.verdict(new_n, new_c) {
            *count += 1;
        }
    }
}

/// The run-wide tallies of the eligible keys, keys sorted.
pub type Tallies = BTreeMap<Key, KeyTally>;

/// How a view reduces one trial's signal values to one (`projections.figures.reducers`).
#[derive(Clone, Debug, PartialEq)]
pub enum Reducer {
    Single,
    All,
    Any,
    Mean,
    /// The signals' weights in declaration order, and their compensated sum.
    Weighted {
        weights: Vec<f64>,
        sum: f64,
    },
}

impl Reducer {
    /// The reducer named `name` (EVENTS.md); `weights`: the view's signals' weights, in order.
    pub fn of(name: &str, weights: Vec<f64>) -> Option<Reducer> {
        Some(match name {
            "single" => Reducer::Single,
            "all" => Reducer::All,
            "any" => Reducer::Any,
            "mean" => Reducer::Mean,
            "weighted" => {
                let sum = compensated_sum(weights.iter().copied());
                Reducer::Weighted { weights, sum }
            }
            _ => return None,
        })
    }

    /// One trial's signal values (one per signal, in declaration order) reduced; None where
    /// the reducer has nothing to give (`mean` of no finite value, `weighted` of weights
    /// summing to zero).
    pub fn reduce(&self, values: &[f64]) -> Option<f64> {
        match self {
            Reducer::Single => values.first().copied(),
            // As Python's min() and max(): the value held is replaced only by one that is
            // less (greater), so a NaN held first stays, and of 0.0 and -0.0 the first wins.
            Reducer::All => values.iter().copied().reduce(|held, value| if value < held { value } else { held }),
            Reducer::Any => values.iter().copied().reduce(|held, value| if value > held { value } else { held }),
            Reducer::Mean => {
                let finite: Vec<f64> = values.iter().copied().filter(|value| value.is_finite()).collect();
                (!finite.is_empty()).then(|| compensated_sum(finite.iter().copied()) / finite.len() as f64)
            }
            Reducer::Weighted { weights, sum } => (*sum != 0.0)
                .then(|| compensated_sum(values.iter().zip(weights).map(|(value, weight)| value * weight)) / sum),
        }
    }
}

/// A view as the summary reads it (`projections.fold.declarations.DeclaredView`).
#[derive(Clone, Debug, PartialEq)]
pub struct View {
    pub name: String,
    /// Its signals' keys, in declaration order.
    pub signals: Vec<Key>,
    pub reducer: Reducer,
}

/// What the task declares (`projections.fold.declarations.TaskDeclaration`), as the fold's
/// key rules and the summary read it: its attempt keys in declaration order, its excluded
/// ones, and its views in declaration order. One value for the tasks that declare the same
/// (`door`), its keys shared with the tasks that keep just them.
#[derive(Clone, Debug, Default)]
pub struct DeclaredParts {
    pub attempt_keys: Shared<Vec<Key>>,
    pub excluded: Shared<BTreeSet<Key>>,
    /// Every key it declares, of any kind.
    pub declared: BTreeSet<Key>,
    pub views: Vec<View>,
}

pub type Declared = Shared<DeclaredParts>;

/// The keys of a task that has none: one value, not an allocation a task.
static NO_KEYS: LazyLock<Shared<Vec<Key>>> = LazyLock::new(Shared::default);
static NO_EXCLUDED: BTreeSet<Key> = BTreeSet::new();
/// The metric names lately given a task.
pub(super) static METRICS: Recent<String> = Recent::new();

#[derive(Clone, Debug)]
pub struct TaskState {
    pub task_id: String,
    pub first_score: i64,
    pub trials: TrialIds,
    /// Per metric, in the order the scores first named them.
    pub metrics: Vec<(Shared<String>, MetricColumns)>,
    /// Shared with its declaration's attempt keys while the task keeps just them (most do);
    /// copied when it gets another.
    pub keys: Shared<Vec<Key>>,
    /// (n, c) of each of `keys`.
    pub counts: Vec<(i64, i64)>,
    /// Its declaration; None: none.
    declared: Option<Declared>,
    /// The trials its run plans a task (`attempts_per_task`; 0: no plan), which its buffers
    /// are sized for as they start (`planned_events`, `MetricColumns::reserve_rows`).
    pub planned: u32,
}

impl TaskState {
    pub fn new(task_id: &str) -> Self {
        TaskState {
            task_id: task_id.to_owned(),
            first_score: -1,
            trials: TrialIds::default(),
            metrics: Vec::new(),
            keys: NO_KEYS.clone(),
            counts: Vec::new(),
            declared: None,
            planned: 0,
        }
    }

    /// Whether the run declares it (its keys were decided from a declaration).
    pub fn declared(&self) -> bool {
        self.declared.is_some()
    }

    /// The events its plan brings: per planned trial a trial.finished and a score of each
    /// metric it declares (0: no plan).
    pub fn planned_events(&self) -> usize {
        let Some(declared) = &self.declared else {
            return 0;
        };
        // Keys sorted: a metric's are neighbours.
        let mut metrics = 0;
        let mut last: Option<&str> = None;
        for (metric, _) in declared.declared.iter() {
            if last != Some(metric.as_str()) {
                metrics += 1;
                last = Some(metric);
            }
        }
        self.planned as usize * (1 + metrics)
    }

    /// The keys it declares label or model: never an attempt list (rule 3).
    pub fn excluded(&self) -> &BTreeSet<Key> {
        self.declared.as_ref().map_or(&NO_EXCLUDED, |declared| &declared.excluded)
    }

    fn trial_of(&mut self, trial_id: &str) -> i32 {
        match self.trials.position(trial_id) {
            Some(at) => at as i32,
            None => {
                if self.trials.len() == 0 {
                    // Ids of one task's trials are mostly as long as each other.
                    self.trials.reserve(self.planned as usize, trial_id);
                }
                self.trials.push(trial_id) as i32
            }
        }
    }

    fn metric_at(&mut self, metric: &str) -> usize {
        match self.metrics.iter().position(|(name, _)| name.as_str() == metric) {
            Some(at) => at,
            None => {
                snug::push(&mut self.metrics, (METRICS.shared(metric), MetricColumns::default()));
                self.metrics.len() - 1
            }
        }
    }

    pub fn metric(&self, metric: &str) -> Option<&MetricColumns> {
        self.metrics.iter().find(|(name, _)| name.as_str() == metric).map(|(_, columns)| columns)
    }

    /// Append one score (`TaskState.record_score`): the task's (n, c) per key move, and the
    /// run-wide tallies of the eligible ones among them.
    pub fn record_score(
        &mut self,
        trial_id: &str,
        metric: &str,
        status: Status,
        outputs: &[(&str, Cell)],
        seq: i64,
        eligible: &mut Tallies,
    ) {
        if self.first_score < 0 {
            self.first_score = seq;
        }
        let trial = self.trial_of(trial_id);
        let at = self.metric_at(metric);
        match status {
            Status::TrialFailed | Status::MetricFailed => {
                let dead = status == Status::TrialFailed;
                let columns = &mut self.metrics[at].1;
                columns.reserve_rows(self.planned as usize);
                columns.append(trial, if dead { TRIAL_FAILED } else { METRIC_FAILED }, seq, &[]);
                if dead {
                    self.died(metric, eligible);
                }
                return;
            }
            Status::Scored => {}
        }
        // Slots in the outputs' order (a name new to the metric widens the records then); a
        // score's output names are distinct (EVENTS.md).
        let columns = &mut self.metrics[at].1;
        let cells: Vec<(usize, Cell)> = outputs.iter().map(|&(name, cell)| (columns.slot_of(name), cell)).collect();
        columns.reserve_rows(self.planned as usize);
        columns.append(trial, OK, seq, &cells);
        for &(name, cell) in outputs {
            if !cell.semantic() {
                continue;
            }
            if let Some(at) = self.keys.iter().position(|(held, output)| held == metric && output == name) {
                let (n, c) = self.counts[at];
                let passed = c + i64::from(passes(Some(cell.value)));
                self.counts[at] = (n + 1, passed);
                if let Some(tally) = eligible.get_mut(&self.keys[at]) {
                    tally.shift(n, c, n + 1, passed);
                }
                continue;
            }
            let key: Key = (metric.to_owned(), name.to_owned());
            if !self.excluded().contains(&key) {
                // Rule 2: an undeclared output with a semantic value gets its key.
                let (n, c) = self.keep(key);
                if let Some(tally) = eligible.get_mut(self.keys.last().expect("the key just kept")) {
                    tally.add(n, c);
                }
            }
        }
    }

    /// A dead trial's null attempt on each of the metric's keys (it passes none).
    fn died(&mut self, metric: &str, eligible: &mut Tallies) {
        for (at, key) in self.keys.iter().enumerate() {
            if key.0 == metric {
                let (n, c) = self.counts[at];
                self.counts[at] = (n + 1, c);
                if let Some(tally) = eligible.get_mut(key) {
                    tally.shift(n, c, n + 1, c);
                }
            }
        }
    }

    /// Give the task `key`, its (n, c) counted from the columns.
    pub fn keep(&mut self, key: Key) -> (i64, i64) {
        let (mut n, mut c) = (0, 0);
        if let Some(columns) = self.metric(&key.0) {
            for (_, value, _) in columns.attempts(&key.1) {
                n += 1;
                c += i64::from(passes(value));
            }
        }
        snug::push(self.keys.make_mut(), key);
        snug::push(&mut self.counts, (n, c));
        (n, c)
    }

    /// Decide the task's keys afresh (SEMANTICS.md section 1's rules) from its columns.
    pub fn rekey(&mut self, declared: Option<&Declared>) {
        self.keys = NO_KEYS.clone();
        self.counts = Vec::new();
        self.declared = declared.cloned();
        if let Some(declared) = declared {
            if self.metrics.is_empty() {
                self.keys = declared.attempt_keys.clone();
                self.counts = vec![(0, 0); self.keys.len()];
                return;
            }
            for key in declared.attempt_keys.iter() {
                self.keep(key.clone());
            }
        }
        let mut undeclared = Vec::new();
        for (metric, columns) in &self.metrics {
            for (at, output) in columns.names.iter().enumerate() {
                let key: Key = (metric.to_string(), output.clone());
                let known = declared.is_some_and(|declared| declared.declared.contains(&key));
                if !known && columns.cells(at).iter().any(|(_, cell)| cell.semantic()) {
                    undeclared.push(key);
                }
            }
        }
        for key in undeclared {
            self.keep(key);
        }
        if let Some(declared) = declared {
            if *self.keys == *declared.attempt_keys {
                self.keys = declared.attempt_keys.clone();
            }
        }
    }
}
