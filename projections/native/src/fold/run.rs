//! One run's state and the application of an input event to it, as
//! `projections.fold.run` (its reference) holds and applies them: the header, the tasks in the
//! order the run first had them, the pass@k tallies of the eligible keys, the run-wide counts,
//! and the fingerprints of the applied events, which say whether an event is a redelivery.
//! What `run.started` declares is read once, by the caller, into `Declarations`.

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::FxHashMap as HashMap;

use super::applied::Applied;
use super::records::Cell;
use super::sharing::{Recent, Shared};
use super::snug;
use super::task::{Declared, Key, KeyTally, Status, Tallies, TaskState};
use super::task_index::TaskIndex;

/// Which Harbor version's arithmetic the summary's `harbor` block follows (EVENTS.md,
/// `run.started`'s `harbor_rules`): they differ in whether a null attempt counts in pass@k.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HarborRules {
    /// "0.25": a null attempt is a 0.
    V025,
    /// "0.26", the default: a null attempt is not counted.
    #[default]
    V026,
}

impl HarborRules {
    /// The rules named `name`; None (no `harbor_rules`) is the default.
    pub fn of(name: Option<&str>) -> Option<HarborRules> {
        match name {
            None | Some("0.26") => Some(HarborRules::V026),
            Some("0.25") => Some(HarborRules::V025),
            Some(_) => None,
        }
    }
}

/// What a run.started declares, as the fold reads it (`projections.fold.declarations.Declarations`).
#[derive(Clone, Debug, Default)]
pub struct Declarations {
    /// Each declared task, in declaration order.
    pub tasks: Vec<(String, Declared)>,
    /// Shared, as `outputs`, by the runs that declare the same.
    pub eligible: Shared<BTreeSet<Key>>,
    /// The trials it plans a task (None: not said).
    pub attempts_per_task: Option<i64>,
    /// The run's labels, in the order the run.started gives them.
    pub labels: Vec<(String, String)>,
    pub harbor_rules: HarborRules,
    /// Per metric_type, the output names any task declares, of any kind (made by `new`).
    pub outputs: Shared<BTreeMap<String, BTreeSet<String>>>,
    /// The run.started they were read from, as `projections.fold.declarations.Declarations.started`
    /// keeps it (its encoding, compressed when large): what the run header stores.
    pub started: Vec<u8>,
}

/// The eligible keys and the outputs of the runs lately started.
static ELIGIBLE: Recent<BTreeSet<Key>> = Recent::new();
static OUTPUTS: Recent<BTreeMap<String, BTreeSet<String>>> = Recent::new();

impl Declarations {
    pub fn new(
        tasks: Vec<(String, Declared)>,
        eligible: BTreeSet<Key>,
        attempts_per_task: Option<i64>,
        labels: Vec<(String, String)>,
        harbor_rules: HarborRules,
        started: Vec<u8>,
    ) -> Self {
        let mut outputs: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (metric, output) in tasks.iter().flat_map(|(_, declared)| &declared.declared) {
            outputs.entry(metric.clone()).or_default().insert(output.clone());
        }
        Declarations {
            tasks,
            eligible: ELIGIBLE.shared(&eligible),
            attempts_per_task,
            labels,
            harbor_rules,
            outputs: OUTPUTS.shared(&outputs),
            started,
        }
    }
}

/// An input event, its fields as the fold reads them.
pub enum Event<'a> {
    Started { declarations: Declarations },
    Closed { reason: &'a str },
    Trial { task_id: &'a str, trial_id: &'a str, completed: bool, error_type: Option<&'a str> },
    Score { task_id: &'a str, trial_id: &'a str, metric: &'a str, status: Status, outputs: &'a [(&'a str, Cell)] },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Applied,
    Redelivery,
    Refused,
    Ignored,
}

/// `projections.kernels.digest_of_id`: an event id's fingerprint.
pub fn fingerprint(event_id: &str) -> (u64, u64) {
    let digest = blake2b_simd::Params::new().hash_length(16).hash(event_id.as_bytes());
    let (hi, lo) = digest.as_bytes().split_at(8);
    let half = |bytes: &[u8]| u64::from_le_bytes(bytes.try_into().expect("a digest of 16 bytes"));
    (half(hi) | 1, half(lo))
}

fn pair_bytes(hi: u64, lo: u64) -> [u8; 16] {
    let mut pair = [0u8; 16];
    pair[..8].copy_from_slice(&hi.to_le_bytes());
    pair[8..].copy_from_slice(&lo.to_le_bytes());
    pair
}

fn holds(pairs: &[u8], pair: &[u8; 16]) -> bool {
    pairs.chunks_exact(16).any(|held| held == pair)
}

/// A fingerprint's bytes, and a log position's.
const PAIR: usize = 16;
const POSITION: usize = 8;

/// Every fingerprint the run keeps: its header's, then each task's.
fn kept_pairs<'a>(run_events: &'a [u8], tasks: &'a [Task]) -> impl Iterator<Item = &'a [u8]> {
    std::iter::once(run_events).chain(tasks.iter().map(|task| &task.events[..]))
}

fn positions(positions: &[u8]) -> impl Iterator<Item = i64> + '_ {
    positions.chunks_exact(8).map(|at| i64::from_le_bytes(at.try_into().expect("8 bytes")))
}

/// A task's part of the run, beside its `TaskState`: what the run's own events keep of it.
#[derive(Clone, Debug)]
pub struct Task {
    pub state: TaskState,
    /// Fingerprints of the events applied to it (`PAIR`s, little-endian).
    pub events: Vec<u8>,
    /// Log positions of its trial.finished events (little-endian i64).
    pub trial_positions: Vec<u8>,
    pub first_at: Option<f64>,
    pub last_at: Option<f64>,
    /// (log position, error type, trial_id) of its failed trial.finished events.
    pub failed_trials: Option<Vec<(i64, String, String)>>,
    /// The run's `stamp` when an event was last applied to it (0: none since it was made).
    pub stamp: u64,
}

impl Task {
    fn new(task_id: &str) -> Self {
        Task {
            state: TaskState::new(task_id),
            events: Vec::new(),
            trial_positions: Vec::new(),
            first_at: None,
            last_at: None,
            failed_trials: None,
            stamp: 0,
        }
    }

    pub fn touched(&self) -> bool {
        !self.events.is_empty()
    }

    /// Room for the fingerprints and trial positions its plan brings (`TaskState::planned`).
    fn reserve_planned(&mut self) {
        self.events.reserve_exact(self.state.planned_events() * PAIR);
        self.trial_positions.reserve_exact(self.state.planned as usize * POSITION);
    }
}

#[derive(Debug, Default)]
pub struct RunState {
    pub run_id: String,
    pub declarations: Option<Declarations>,
    pub started_event_id: Option<String>,
    pub closed_reason: Option<String>,
    pub closed_position: i64,
    pub after_close: i64,
    pub event_count: i64,
    /// None: not known (a restored run).
    pub last_position: Option<i64>,
    pub first_at: Option<f64>,
    pub last_at: Option<f64>,
    /// The keys of the applied fingerprints: a candidate, confirmed among the kept pairs.
    pub(super) applied: Applied,
    pub run_events: Vec<u8>,
    pub run_positions: Vec<u8>,
    pub tasks: Vec<Task>,
    pub(super) task_index: TaskIndex,
    pub passk: Tallies,
    pub trials_completed: i64,
    pub trials_failed: i64,
    pub score_count: i64,
    /// The applied events since the run was made, which a summary cache compares a task's
    /// `stamp` with (`summary_cache`).
    pub stamp: u64,
    /// The `stamp` when something run-wide last changed (a run-level event, keys decided afresh).
    pub layout: u64,
}

fn saw(first: &mut Option<f64>, last: &mut Option<f64>, moment: Option<f64>) {
    if let Some(moment) = moment {
        // As Python's min() and max() of two floats: the one held wins a tie or a NaN.
        *first = Some(match *first {
            Some(held) if moment < held => moment,
            Some(held) => held,
            None => moment,
        });
        *last = Some(match *last {
            Some(held) if moment > held => moment,
            Some(held) => held,
            None => moment,
        });
    }
}

impl RunState {
    pub fn new(run_id: &str) -> Self {
        RunState { run_id: run_id.to_owned(), closed_position: -1, last_position: Some(-1), ..Default::default() }
    }

    pub fn closed(&self) -> bool {
        self.closed_reason.is_some()
    }

    pub fn task(&self, task_id: &str) -> Option<&Task> {
        self.task_index.get(task_id, &self.tasks).map(|at| &self.tasks[at])
    }

    fn kept(&self, own: &[u8], pair: &[u8; 16]) -> bool {
        holds(own, pair) || holds(&self.run_events, pair) || self.tasks.iter().any(|task| holds(&task.events, pair))
    }

    /// Apply one event of this run (`projections.fold.run.apply`). Why an event was refused
    /// or ignored is the caller's to word: it names the run as Python's `repr` does.
    pub fn apply(&mut self, event_id: &str, event: &Event<'_>, moment: Option<f64>, position: Option<i64>) -> Outcome {
        if let Event::Started { .. } = event {
            if self.started_event_id.as_deref().is_some_and(|started| started != event_id) {
                return Outcome::Refused;
            }
        }
        let (hi, lo) = fingerprint(event_id);
        let pair = pair_bytes(hi, lo);
        if let Event::Closed { .. } = event {
            if self.closed() && !(self.applied.holds(hi) && self.kept(&self.run_events, &pair)) {
                return Outcome::Ignored;
            }
        }
        let own: &[u8] = match event {
            Event::Trial { task_id, .. } | Event::Score { task_id, .. } => {
                self.task(task_id).map_or(&[][..], |task| &task.events[..])
            }
            _ => &self.run_events,
        };
        if self.applied.holds(hi) && self.kept(own, &pair) {
            return Outcome::Redelivery;
        }
        let (run_events, tasks) = (&self.run_events, &self.tasks);
        self.applied.put(hi, || kept_pairs(run_events, tasks));
        self.event_count += 1;
        self.stamp += 1;
        let at = position.unwrap_or(self.event_count);
        if let Some(last) = self.last_position {
            self.last_position = Some(last.max(at));
        }
        if self.closed() && at > self.closed_position {
            self.after_close += 1;
        }
        match event {
            Event::Score { task_id, trial_id, metric, status, outputs } => {
                let index = self.touch(task_id);
                let task = &mut self.tasks[index];
                task.stamp = self.stamp;
                snug::extend(&mut task.events, &pair);
                saw(&mut task.first_at, &mut task.last_at, moment);
                task.state.record_score(trial_id, metric, *status, outputs, at, &mut self.passk);
                self.score_count += 1;
            }
            Event::Trial { task_id, trial_id, completed, error_type } => {
                let index = self.touch(task_id);
                let task = &mut self.tasks[index];
                task.stamp = self.stamp;
                snug::extend(&mut task.events, &pair);
                saw(&mut task.first_at, &mut task.last_at, moment);
                snug::extend(&mut task.trial_positions, &at.to_le_bytes());
                if *completed {
                    self.trials_completed += 1;
                } else {
                    self.trials_failed += 1;
                    let error_type = error_type.filter(|kind| !kind.is_empty()).unwrap_or("UnknownError");
                    let failed = task.failed_trials.get_or_insert_with(Vec::new);
                    snug::push(failed, (at, error_type.to_owned(), (*trial_id).to_owned()));
                }
            }
            Event::Started { declarations } => {
                self.header(&pair, moment, at);
                self.start(event_id, declarations.clone());
            }
            Event::Closed { reason } => {
                self.header(&pair, moment, at);
                self.closed_reason = Some((*reason).to_owned());
                self.closed_position = at;
                self.after_close = self.applied_after(at);
            }
        }
        Outcome::Applied
    }

    fn header(&mut self, pair: &[u8; 16], moment: Option<f64>, at: i64) {
        self.layout = self.stamp;
        saw(&mut self.first_at, &mut self.last_at, moment);
        snug::extend(&mut self.run_events, pair);
        snug::extend(&mut self.run_positions, &at.to_le_bytes());
    }

    /// The task the event names, made if new; a declared task nothing touched yet is pending
    /// no more (the event's fingerprint, kept next, touches it).
    fn touch(&mut self, task_id: &str) -> usize {
        let index = match self.task_index.get(task_id, &self.tasks) {
            Some(index) => index,
            None => {
                snug::push(&mut self.tasks, Task::new(task_id));
                self.task_index.insert(task_id, self.tasks.len() - 1);
                self.tasks.len() - 1
            }
        };
        let task = &mut self.tasks[index];
        if !task.touched() && task.state.declared() {
            for key in task.state.keys.iter() {
                if let Some(tally) = self.passk.get_mut(key) {
                    tally.pending -= 1;
                }
            }
            task.reserve_planned();
        }
        index
    }

    fn start(&mut self, event_id: &str, declarations: Declarations) {
        self.started_event_id = Some(event_id.to_owned());
        let new = declarations.tasks.iter().filter(|(task_id, _)| self.task(task_id).is_none()).count();
        self.tasks.reserve_exact(new);
        self.task_index.reserve(new);
        for (task_id, _) in &declarations.tasks {
            if self.task(task_id).is_none() {
                self.tasks.push(Task::new(task_id));
                self.task_index.insert(task_id, self.tasks.len() - 1);
            }
        }
        // Each planned trial brings a trial.finished and a score per declared metric, and the
        // run.closed one more; a quarter more than planned (`projections.fold.run._start`).
        let per_trial = 1 + declarations
            .tasks
            .iter()
            .map(|(_, declared)| declared.declared.iter().map(|(metric, _)| metric).collect::<BTreeSet<_>>().len())
            .max()
            .unwrap_or(0);
        let attempts = declarations.attempts_per_task.filter(|&attempts| attempts > 0).unwrap_or(1) as usize;
        let planned = declarations.tasks.len() * attempts * per_trial + self.event_count as usize + 1;
        let (run_events, tasks) = (&self.run_events, &self.tasks);
        self.applied.reserve(planned * 5 / 4, || kept_pairs(run_events, tasks));
        self.declarations = Some(declarations);
        self.rekey();
    }

    /// Every task's keys and the pass@k tallies decided afresh (`rekey_run`).
    pub fn rekey(&mut self) {
        self.layout = self.stamp;
        let declarations = self.declarations.as_ref();
        self.passk = declarations
            .map(|declarations| declarations.eligible.iter().map(|key| (key.clone(), KeyTally::default())).collect())
            .unwrap_or_default();
        let declared: HashMap<&str, &Declared> = declarations
            .map(|declarations| {
                declarations.tasks.iter().map(|(task_id, declared)| (task_id.as_str(), declared)).collect()
            })
            .unwrap_or_default();
        // At most this many trials a task are reserved for, whatever a run.started announces;
        // past them a task's buffers grow as its events come (`snug`).
        const MOST_PLANNED: i64 = 256;
        let planned = declarations.and_then(|declarations| declarations.attempts_per_task).unwrap_or(0);
        let planned = planned.clamp(0, MOST_PLANNED) as u32;
        for task in &mut self.tasks {
            let declared = declared.get(task.state.task_id.as_str()).copied();
            task.state.rekey(declared);
            task.state.planned = if declared.is_some() { planned } else { 0 };
            let touched = task.touched();
            for (key, &(n, c)) in task.state.keys.iter().zip(&task.state.counts) {
                if let Some(tally) = self.passk.get_mut(key) {
                    tally.add(n, c);
                    tally.pending += i64::from(!touched);
                }
            }
        }
    }

    /// Put the stored `tasks` in, in their order, then each declared task none of them is
    /// (nothing arrived for it: it has no record), and derive all the rest from the parts as
    /// `projections.storage.restore` does (`projections.fold.run.rederive`): the run-wide
    /// counts, the index of applied events, every task's keys and the pass@k tallies, the
    /// revision. The header's fields and declarations are set before. O(run).
    pub fn restore_tasks(&mut self, tasks: Vec<Task>) {
        self.tasks = tasks;
        self.task_index = TaskIndex::default();
        self.task_index.reserve(self.tasks.len());
        for (at, task) in self.tasks.iter().enumerate() {
            self.task_index.insert(&task.state.task_id, at);
        }
        let declared: Vec<String> = self
            .declarations
            .iter()
            .flat_map(|declarations| &declarations.tasks)
            .map(|(task_id, _)| task_id.clone())
            .collect();
        for task_id in declared {
            if self.task(&task_id).is_none() {
                self.tasks.push(Task::new(&task_id));
                self.task_index.insert(&task_id, self.tasks.len() - 1);
            }
        }
        let failed = |task: &Task| task.failed_trials.as_ref().map_or(0, Vec::len) as i64;
        self.trials_failed = self.tasks.iter().map(failed).sum();
        self.trials_completed =
            self.tasks.iter().map(|task| (task.trial_positions.len() / POSITION) as i64 - failed(task)).sum();
        self.score_count =
            self.tasks.iter().flat_map(|task| &task.state.metrics).map(|(_, columns)| columns.len() as i64).sum();
        let events = kept_pairs(&self.run_events, &self.tasks).map(|pairs| pairs.len() / PAIR).sum::<usize>();
        self.event_count = events as i64;
        self.applied = Applied::of_kept(events, kept_pairs(&self.run_events, &self.tasks));
        self.rekey();
        self.last_position = None;
        self.after_close = if self.closed() { self.applied_after(self.closed_position) } else { 0 };
    }

    /// The applied events whose log position is after `position`.
    pub fn applied_after(&self, position: i64) -> i64 {
        if matches!(self.last_position, Some(last) if position >= last) {
            return 0;
        }
        let mut count = positions(&self.run_positions).filter(|&at| at > position).count();
        for task in &self.tasks {
            count += positions(&task.trial_positions).filter(|&at| at > position).count();
            for (_, columns) in &task.state.metrics {
                count += columns.rows().filter(|row| row.seq > position).count();
            }
        }
        count as i64
    }
}
