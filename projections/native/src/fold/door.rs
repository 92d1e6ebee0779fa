//! The native fold driven from Python, so that the tests can hold it to the Python fold event
//! by event (`tests/projections/test_native_fold.py`): `NativeTask`, one task's state, to
//! `projections.fold.task.TaskState`; `NativeRun`, a run's, to `projections.fold.run.RunState`.

use std::sync::{LazyLock, Mutex, PoisonError};

use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString};
use rustc_hash::FxHashMap as HashMap;

use super::records::Cell;
use super::run::{Declarations, Event, HarborRules, Outcome, RunState};
use super::sharing::Shared;
use super::stored::{self, StoredHeader, StoredTask};
use super::summary_cache::SummaryCache;
use super::task::{Declared, DeclaredParts, Key, KeyTally, Reducer, Status, Tallies, TaskState, View};
use super::{progress, summary};

/// The largest output buffer kept between outputs (a bigger one is dropped once copied out).
const SUMMARY_KEPT: usize = 1 << 20;

thread_local! {
    /// Where a summary or a progress event is written before Python gets its copy: kept
    /// between them, so a revision does not grow a buffer of its size again.
    static SUMMARY: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// An output value as `projections.packed.records.classify` reads it.
fn cell_of(value: &Bound<'_, PyAny>) -> PyResult<Cell> {
    if value.is_instance_of::<PyBool>() {
        return Ok(Cell::boolean(value.extract::<bool>()?));
    }
    if value.is_instance_of::<PyFloat>() || value.is_instance_of::<PyInt>() {
        return Ok(Cell::number(value.extract::<f64>()?));
    }
    Ok(Cell::LABEL)
}

fn status_of(status: &str, failure: Option<&str>) -> PyResult<Status> {
    match (status, failure) {
        ("completed" | "partial", _) => Ok(Status::Scored),
        ("failed", Some("trial")) => Ok(Status::TrialFailed),
        ("failed", Some("metric")) => Ok(Status::MetricFailed),
        _ => Err(PyValueError::new_err(format!("not a score's status: {status} {failure:?}"))),
    }
}

fn cells_of<'a>(outputs: &'a [(String, Bound<'_, PyAny>)]) -> PyResult<Vec<(&'a str, Cell)>> {
    outputs.iter().map(|(name, value)| Ok((name.as_str(), cell_of(value)?))).collect()
}

/// (what it declares as attempt keys in order, its excluded keys, every key it declares).
type DeclaredKeys = (Vec<Key>, Vec<Key>, Vec<Key>);

/// A view as declared: (name, reducer, its signals' (metric, output, weight) in order).
type ViewArgs = (String, String, Vec<(String, String, f64)>);

/// A declaration as given, weights by their bits (a weight of 0.0 and one of -0.0 apart, as
/// `projections.fold.declarations.ViewKey` has them): the key of `RECENT`.
type DeclaredArgs = (DeclaredKeys, Vec<(String, String, Vec<(String, String, u64)>)>);

/// The most distinct declarations `RECENT` holds (`projections.fold.declarations._declared`'s cache).
const RECENT_MOST: usize = 1024;

/// The declarations made lately: each one value for every task, of any run, that declares the same.
static RECENT: LazyLock<Mutex<HashMap<DeclaredArgs, Declared>>> = LazyLock::new(Mutex::default);

/// The task's declaration: its keys, and its views in order.
fn declared_of(keys: DeclaredKeys, views: Vec<ViewArgs>) -> PyResult<Declared> {
    let views = views
        .into_iter()
        .map(|(name, reducer, signals)| {
            (
                name,
                reducer,
                signals.into_iter().map(|(metric, output, weight)| (metric, output, weight.to_bits())).collect(),
            )
        })
        .collect();
    let args: DeclaredArgs = (keys, views);
    let mut recent = RECENT.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(declared) = recent.get(&args) {
        return Ok(declared.clone());
    }
    let ((attempt_keys, excluded, every), views) = &args;
    let declared = Declared::new(DeclaredParts {
        attempt_keys: Shared::new(attempt_keys.clone()),
        excluded: Shared::new(excluded.iter().cloned().collect()),
        declared: every.iter().cloned().collect(),
        views: views.iter().map(view_of).collect::<PyResult<_>>()?,
    });
    if recent.len() >= RECENT_MOST {
        recent.clear();
    }
    recent.insert(args, declared.clone());
    Ok(declared)
}

fn view_of((name, reducer, signals): &(String, String, Vec<(String, String, u64)>)) -> PyResult<View> {
    let weights = signals.iter().map(|(_, _, weight)| f64::from_bits(*weight)).collect();
    let reducer = Reducer::of(reducer, weights)
        .ok_or_else(|| PyValueError::new_err(format!("view {name:?}: not a reducer: {reducer:?}")))?;
    let signals = signals.iter().map(|(metric, output, _)| (metric.clone(), output.clone())).collect();
    Ok(View { name: name.clone(), signals, reducer })
}

type Metric<'py> = (String, Bound<'py, PyBytes>, Vec<String>, Option<Bound<'py, PyBytes>>);

fn metrics_of<'py>(py: Python<'py>, task: &TaskState) -> Vec<Metric<'py>> {
    task.metrics
        .iter()
        .map(|(name, columns)| {
            (
                name.to_string(),
                PyBytes::new(py, &columns.packed),
                columns.names.to_vec(),
                columns.spilled.as_ref().map(|spilled| PyBytes::new(py, spilled)),
            )
        })
        .collect()
}

fn tallies_of(task: &TaskState) -> Vec<(Key, i64, i64)> {
    task.keys.iter().cloned().zip(task.counts.iter()).map(|(key, &(n, c))| (key, n, c)).collect()
}

/// (solved, flaky, failed, unmeasured, pending, moves).
type Counts = (i64, i64, i64, i64, i64, i64);

fn counts_of(tally: &KeyTally) -> Counts {
    (tally.solved, tally.flaky, tally.failed, tally.unmeasured, tally.pending, tally.moves)
}

#[pyclass(module = "projections._kernels")]
pub struct NativeTask {
    task: TaskState,
    eligible: Tallies,
}

#[pymethods]
impl NativeTask {
    #[new]
    fn new(task_id: &str, eligible: Vec<Key>) -> Self {
        NativeTask {
            task: TaskState::new(task_id),
            eligible: eligible.into_iter().map(|key| (key, KeyTally::default())).collect(),
        }
    }

    #[pyo3(signature = (trial_id, metric, status, failure, outputs, seq))]
    fn record_score(
        &mut self,
        trial_id: &str,
        metric: &str,
        status: &str,
        failure: Option<&str>,
        outputs: Vec<(String, Bound<'_, PyAny>)>,
        seq: i64,
    ) -> PyResult<()> {
        let cells = cells_of(&outputs)?;
        let status = status_of(status, failure)?;
        self.task.record_score(trial_id, metric, status, &cells, seq, &mut self.eligible);
        Ok(())
    }

    /// Decide the keys afresh: `declared` is None for a task without declarations, else
    /// (its attempt keys in order, its excluded keys, every key it declares).
    #[pyo3(signature = (declared=None))]
    fn rekey(&mut self, declared: Option<DeclaredKeys>) -> PyResult<()> {
        let declared = declared.map(|keys| declared_of(keys, Vec::new())).transpose()?;
        self.task.rekey(declared.as_ref());
        Ok(())
    }

    /// (metric, packed records, output names, spilled cells) of each metric, in order.
    fn metrics<'py>(&self, py: Python<'py>) -> Vec<Metric<'py>> {
        metrics_of(py, &self.task)
    }

    fn task_id(&self) -> String {
        self.task.task_id.clone()
    }

    fn trials(&self) -> Vec<String> {
        self.task.trials.iter().map(str::to_owned).collect()
    }

    fn first_score(&self) -> i64 {
        self.task.first_score
    }

    /// (key, n, c) of every key, in the order the task got them.
    fn tallies(&self) -> Vec<(Key, i64, i64)> {
        tallies_of(&self.task)
    }

    /// Each eligible key's run-wide counts, keys sorted.
    fn eligible(&self) -> Vec<(Key, Counts)> {
        self.eligible.iter().map(|(key, tally)| (key.clone(), counts_of(tally))).collect()
    }

    /// (trial index, value, sequence number) of the attempts of (metric, output).
    fn attempts(&self, metric: &str, output: &str) -> Vec<(i32, Option<f64>, i64)> {
        self.task.metric(metric).map(|columns| columns.attempts(output).collect()).unwrap_or_default()
    }
}

fn outcome_name(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Applied => "applied",
        Outcome::Redelivery => "redelivery",
        Outcome::Refused => "refused",
        Outcome::Ignored => "ignored",
    }
}

/// A task as the run holds it: (task_id, first_score, trials, metrics, (key, n, c)s, excluded
/// keys sorted, fingerprints, trial positions, first_at, last_at, failed trials).
type TaskView<'py> = (
    String,
    i64,
    Vec<String>,
    Vec<Metric<'py>>,
    Vec<(Key, i64, i64)>,
    Vec<Key>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Option<f64>,
    Option<f64>,
    Option<Vec<(i64, String, String)>>,
);

/// A run.started's declarations as the Python fold reads them (`projections.native_replay`):
/// each declared task's (task_id, its `DeclaredKeys`, its `ViewArgs`) in declaration order,
/// the eligible keys, `attempts_per_task` as planned (which sizes the index of applied
/// events), the labels in the run.started's order, the Harbor rules as named there, and the
/// run.started as `Declarations.started` keeps it.
type DeclarationArgs<'py> = (
    Vec<(String, DeclaredKeys, Vec<ViewArgs>)>,
    Vec<Key>,
    Option<i64>,
    Vec<(String, String)>,
    Option<String>,
    Bound<'py, PyBytes>,
);

fn declarations_of(
    (tasks, eligible, attempts_per_task, labels, harbor_rules, started): DeclarationArgs<'_>,
) -> PyResult<Declarations> {
    let rules = HarborRules::of(harbor_rules.as_deref())
        .ok_or_else(|| PyValueError::new_err(format!("not Harbor's rules: {harbor_rules:?}")))?;
    let tasks = tasks
        .into_iter()
        .map(|(task_id, keys, views)| Ok((task_id, declared_of(keys, views)?)))
        .collect::<PyResult<_>>()?;
    let started = started.as_bytes().to_vec();
    Ok(Declarations::new(tasks, eligible.into_iter().collect(), attempts_per_task, labels, rules, started))
}

/// A run header's fields as stored: (started_event_id, closed_reason, closed_position,
/// first_at, last_at, run_events, run_positions).
type HeaderArgs<'py> =
    (Option<String>, Option<String>, i64, Option<f64>, Option<f64>, Bound<'py, PyBytes>, Bound<'py, PyBytes>);

/// A task as stored: (task_id, first_score, trial ids in order, (metric, output names,
/// records, spilled cells) of each metric in order, failed trials, fingerprints, trial
/// positions, first_at, last_at).
type TaskArgs<'py> = (
    String,
    i64,
    Vec<String>,
    Vec<(String, Vec<String>, Bound<'py, PyBytes>, Option<Bound<'py, PyBytes>>)>,
    Option<Vec<(i64, String, String)>>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Option<f64>,
    Option<f64>,
);

fn stored_task(
    (task_id, first_score, trials, metrics, failed_trials, events, trial_positions, first_at, last_at): TaskArgs<'_>,
) -> StoredTask {
    let bytes = |data: &Bound<'_, PyBytes>| data.as_bytes().to_vec();
    StoredTask {
        task_id,
        first_score,
        trials,
        metrics: metrics
            .into_iter()
            .map(|(metric, names, records, spilled)| (metric, names, bytes(&records), spilled.as_ref().map(bytes)))
            .collect(),
        failed_trials,
        events: bytes(&events),
        trial_positions: bytes(&trial_positions),
        first_at,
        last_at,
    }
}

/// What `write` writes, then `end`, as Python bytes.
fn written<'py>(py: Python<'py>, write: impl FnOnce(&mut Vec<u8>), end: &[u8]) -> Bound<'py, PyBytes> {
    SUMMARY.with_borrow_mut(|out| {
        out.clear();
        write(out);
        out.extend_from_slice(end);
        let bytes = PyBytes::new(py, out);
        if out.capacity() > SUMMARY_KEPT {
            *out = Vec::new();
        }
        bytes
    })
}

#[pyclass(module = "projections._kernels")]
pub struct NativeRun {
    run: RunState,
    /// Made by the first summary, kept for the revisions after it until dropped (`drop_cache`).
    cache: Option<SummaryCache>,
}

impl NativeRun {
    fn of(run: RunState) -> Self {
        NativeRun { run, cache: None }
    }

    /// The run's `run.summary`, through its summary cache (made when it has none).
    fn write_summary(&mut self, out: &mut Vec<u8>) {
        summary::write_summary(out, &self.run, self.cache.get_or_insert_with(SummaryCache::default));
    }
}

#[pymethods]
impl NativeRun {
    #[new]
    fn new(run_id: &str) -> Self {
        NativeRun::of(RunState::new(run_id))
    }

    /// Apply a decoded event (a model of `events.models`) other than a run.started, whose
    /// declarations `apply_started` takes as the Python fold reads them: its outcome's name,
    /// None for a run.started. `moment`: its `occurred_at` in epoch seconds.
    #[pyo3(signature = (event, moment, position))]
    fn apply<'py>(
        &mut self,
        event: &Bound<'py, PyAny>,
        moment: Option<f64>,
        position: Option<i64>,
    ) -> PyResult<Option<&'static str>> {
        let py = event.py();
        let values = event.getattr(intern!(py, "__dict__"))?.downcast_into::<PyDict>()?;
        let field = |name: &Bound<'py, PyString>| -> PyResult<Bound<'py, PyAny>> {
            values.get_item(name)?.ok_or_else(|| PyValueError::new_err(format!("an event without {name}")))
        };
        let event_id = field(intern!(py, "event_id"))?;
        let event_id = event_id.downcast::<PyString>()?.to_str()?;
        let kind = field(intern!(py, "type"))?;
        let outcome = match kind.downcast::<PyString>()?.to_str()? {
            "score.emitted" => {
                let (task_id, trial_id) = (field(intern!(py, "task_id"))?, field(intern!(py, "trial_id"))?);
                let metric = field(intern!(py, "metric_type"))?;
                let status = field(intern!(py, "status"))?;
                let failure = values.get_item(intern!(py, "failure"))?;
                let failure = failure.as_ref().filter(|failure| !failure.is_none());
                let status =
                    status_of(status.downcast::<PyString>()?.to_str()?, failure.map(|f| f.extract()).transpose()?)?;
                let mut outputs = Vec::new();
                for output in field(intern!(py, "outputs"))?.try_iter()? {
                    let output = output?.getattr(intern!(py, "__dict__"))?.downcast_into::<PyDict>()?;
                    let name: String = output
                        .get_item(intern!(py, "name"))?
                        .map(|name| name.extract())
                        .transpose()?
                        .unwrap_or_default();
                    let value = output.get_item(intern!(py, "value"))?.unwrap_or_else(|| py.None().into_bound(py));
                    outputs.push((name, cell_of(&value)?));
                }
                let cells: Vec<(&str, Cell)> = outputs.iter().map(|(name, cell)| (name.as_str(), *cell)).collect();
                let event = Event::Score {
                    task_id: task_id.downcast::<PyString>()?.to_str()?,
                    trial_id: trial_id.downcast::<PyString>()?.to_str()?,
                    metric: metric.downcast::<PyString>()?.to_str()?,
                    status,
                    outputs: &cells,
                };
                self.run.apply(event_id, &event, moment, position)
            }
            "trial.finished" => {
                let (task_id, trial_id) = (field(intern!(py, "task_id"))?, field(intern!(py, "trial_id"))?);
                let completed = field(intern!(py, "status"))?.downcast::<PyString>()?.to_str()? == "completed";
                let error = values.get_item(intern!(py, "error"))?.filter(|error| !error.is_none());
                let error_type: Option<String> = match error {
                    None => None,
                    Some(error) => error.getattr(intern!(py, "type"))?.extract()?,
                };
                let event = Event::Trial {
                    task_id: task_id.downcast::<PyString>()?.to_str()?,
                    trial_id: trial_id.downcast::<PyString>()?.to_str()?,
                    completed,
                    error_type: error_type.as_deref(),
                };
                self.run.apply(event_id, &event, moment, position)
            }
            "run.closed" => {
                let reason = field(intern!(py, "reason"))?;
                let event = Event::Closed { reason: reason.downcast::<PyString>()?.to_str()? };
                self.run.apply(event_id, &event, moment, position)
            }
            _ => return Ok(None),
        };
        Ok(Some(outcome_name(outcome)))
    }

    /// A run.started (`event_id`) with its declarations as the Python fold reads them
    /// (`DeclarationArgs`); `moment`: its `occurred_at` in epoch seconds.
    #[pyo3(signature = (event_id, declarations, moment, position))]
    fn apply_started(
        &mut self,
        event_id: &str,
        declarations: DeclarationArgs<'_>,
        moment: Option<f64>,
        position: Option<i64>,
    ) -> PyResult<&'static str> {
        let declarations = declarations_of(declarations)?;
        Ok(outcome_name(self.run.apply(event_id, &Event::Started { declarations }, moment, position)))
    }

    /// Run `run_id` of its stored parts as `projections.storage` read them (`projections.native_store`):
    /// `header` (None: no run-level event applied) and `declarations` (None: no run.started)
    /// as `HeaderArgs` and `DeclarationArgs`, `tasks` as `TaskArgs`, in the store's order.
    /// A ValueError if a part cannot be what it claims.
    #[staticmethod]
    #[pyo3(signature = (run_id, header, declarations, tasks))]
    fn restored(
        run_id: &str,
        header: Option<HeaderArgs<'_>>,
        declarations: Option<DeclarationArgs<'_>>,
        tasks: Vec<TaskArgs<'_>>,
    ) -> PyResult<Self> {
        let header =
            header.map(|(started_event_id, closed_reason, closed_position, first_at, last_at, events, positions)| {
                StoredHeader {
                    started_event_id,
                    closed_reason,
                    closed_position,
                    first_at,
                    last_at,
                    run_events: events.as_bytes().to_vec(),
                    run_positions: positions.as_bytes().to_vec(),
                }
            });
        let declarations = declarations.map(declarations_of).transpose()?;
        let tasks = tasks.into_iter().map(stored_task).collect();
        let run = stored::restored(run_id, header, declarations, tasks).map_err(PyValueError::new_err)?;
        Ok(NativeRun::of(run))
    }

    /// Task `task_id`'s record, byte for byte `projections.storage.task_to_bytes` of the
    /// Python fold's task; a KeyError if the run has no such task.
    fn task_record<'py>(&self, py: Python<'py>, task_id: &str) -> PyResult<Bound<'py, PyBytes>> {
        let task = self.run.task(task_id).ok_or_else(|| PyKeyError::new_err(task_id.to_owned()))?;
        let held = task.events.len() + task.trial_positions.len();
        let records: usize = task.state.metrics.iter().map(|(_, columns)| columns.packed.len()).sum();
        let mut out = Vec::with_capacity(256 + (held + records) * 4 / 3);
        stored::write_task(&mut out, task);
        Ok(PyBytes::new(py, &out))
    }

    /// The ids of the tasks some event named, in the run's order: those a store holds a
    /// record of (a declared task nothing arrived for has none).
    fn touched_tasks(&self) -> Vec<String> {
        self.run.tasks.iter().filter(|task| task.touched()).map(|task| task.state.task_id.clone()).collect()
    }

    /// The run.started as its declarations keep it (`Declarations.started`: compressed when
    /// large); None: no run.started applied.
    fn started<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.run.declarations.as_ref().map(|declarations| PyBytes::new(py, &declarations.started))
    }

    /// The bytes the run holds in memory, its summary cache's with them, estimated from above
    /// (`stored::footprint`, `SummaryCache::footprint`).
    fn footprint(&self) -> usize {
        stored::footprint(&self.run) + self.cache_size()
    }

    /// The bytes its summary cache holds, estimated from above (0: none).
    fn cache_size(&self) -> usize {
        self.cache.as_ref().map_or(0, SummaryCache::footprint)
    }

    /// Drop its summary cache: the next summary makes it again from the state, to the same bytes.
    fn drop_cache(&mut self) {
        self.cache = None;
    }

    /// The run's `run.summary` as `projections.assembly.summary.summary_bytes` encodes it,
    /// through the run's summary cache, made by the first.
    fn summary_bytes<'py>(&mut self, py: Python<'py>) -> Bound<'py, PyBytes> {
        written(py, |out| self.write_summary(out), b"")
    }

    /// The run's `run.progress` number `seq` as `events.codec.encode_payload` encodes
    /// `projections.assembly.progress.progress(run, seq, elapsed)`: `elapsed` None, the span
    /// of the applied events' `occurred_at`.
    #[pyo3(signature = (seq, elapsed=None))]
    fn progress_bytes<'py>(&self, py: Python<'py>, seq: i64, elapsed: Option<f64>) -> Bound<'py, PyBytes> {
        written(py, |out| progress::write_progress(out, &self.run, seq, elapsed), b"")
    }

    fn closed(&self) -> bool {
        self.run.closed()
    }

    fn event_count(&self) -> i64 {
        self.run.event_count
    }

    /// `RunState.revision`: 1 for the summary at close, +1 for each event applied after it.
    fn revision(&self) -> i64 {
        self.run.after_close + 1
    }

    fn task_count(&self) -> usize {
        self.run.tasks.len()
    }

    /// The header's fields and the run-wide counts, by the names `RunState` gives them.
    fn header<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let run = &self.run;
        let header = PyDict::new(py);
        header.set_item("run_id", &run.run_id)?;
        header.set_item("started_event_id", &run.started_event_id)?;
        header.set_item("closed_reason", &run.closed_reason)?;
        header.set_item("closed_position", run.closed_position)?;
        header.set_item("after_close", run.after_close)?;
        header.set_item("event_count", run.event_count)?;
        header.set_item("last_position", run.last_position)?;
        header.set_item("first_at", run.first_at)?;
        header.set_item("last_at", run.last_at)?;
        header.set_item("run_events", PyBytes::new(py, &run.run_events))?;
        header.set_item("run_positions", PyBytes::new(py, &run.run_positions))?;
        header.set_item("trials_completed", run.trials_completed)?;
        header.set_item("trials_failed", run.trials_failed)?;
        header.set_item("score_count", run.score_count)?;
        Ok(header)
    }

    /// Each eligible key's tally, keys sorted.
    fn passk(&self) -> Vec<(Key, Counts)> {
        self.run.passk.iter().map(|(key, tally)| (key.clone(), counts_of(tally))).collect()
    }

    fn tasks<'py>(&self, py: Python<'py>) -> Vec<TaskView<'py>> {
        self.run
            .tasks
            .iter()
            .map(|task| {
                let state = &task.state;
                (
                    state.task_id.clone(),
                    state.first_score,
                    state.trials.iter().map(str::to_owned).collect(),
                    metrics_of(py, state),
                    tallies_of(state),
                    state.excluded().iter().cloned().collect(),
                    PyBytes::new(py, &task.events),
                    PyBytes::new(py, &task.trial_positions),
                    task.first_at,
                    task.last_at,
                    task.failed_trials.clone(),
                )
            })
            .collect()
    }
}

/// The fold's reading of input messages from their bytes (`projections.kernels.FOLD_READER`
/// makes one, with `events.compiled`'s bounds): a message of a common type that the
/// recogniser reads for certain is applied to its run with no model built; any other is left
/// to the caller (None), which decodes it in Python and applies the event it gets.
#[pyclass(module = "projections._kernels", frozen)]
pub struct FoldReader {
    limits: _native::Limits,
    /// Each non-finite string of EVENTS.md and the float it stands for.
    nonfinite: Vec<(String, f64)>,
    /// The most bytes a message may have (`events.codec.MAX_EVENT_BYTES`).
    most: usize,
}

#[pymethods]
impl FoldReader {
    #[new]
    fn new(
        event_id_max: usize,
        run_id_max: usize,
        name_max: usize,
        nonfinite: Vec<(String, f64)>,
        most: usize,
    ) -> Self {
        FoldReader { limits: _native::Limits { event_id_max, run_id_max, name_max }, nonfinite, most }
    }

    /// Apply message `raw` to its run in `runs` (made there when new): (its run id, the
    /// outcome's name); None where the message is left to Python.
    #[pyo3(signature = (runs, raw, position))]
    fn apply<'py>(
        &self,
        runs: &Bound<'py, PyDict>,
        raw: &Bound<'py, PyBytes>,
        position: Option<i64>,
    ) -> PyResult<Option<(Bound<'py, PyString>, &'static str)>> {
        let applied = self.applied(runs, &mut HashMap::default(), raw.as_bytes(), position)?;
        Ok(applied.map(|(run, outcome)| (PyString::new(runs.py(), &run.borrow().run.run_id), outcome_name(outcome))))
    }

    /// Apply message `raw`, keyed by `key`, to the run `lookup(run_id)` gives: (the outcome's
    /// name, the task it names); None where the message is left to Python, and where `key`
    /// is not the event's run id (Python words the mismatch), before any lookup.
    #[pyo3(signature = (lookup, raw, key, position))]
    #[allow(clippy::type_complexity)]
    fn apply_keyed<'py>(
        &self,
        lookup: &Bound<'py, PyAny>,
        raw: &Bound<'py, PyBytes>,
        key: Option<&[u8]>,
        position: Option<i64>,
    ) -> PyResult<Option<(&'static str, Option<Bound<'py, PyString>>)>> {
        let py = lookup.py();
        let read = self.read(raw.as_bytes(), |read, moment| {
            if key != Some(read.run_id.as_bytes()) {
                return Ok(None);
            }
            let run = lookup.call1((PyString::new(py, read.run_id),))?.downcast_into::<NativeRun>()?;
            let outcome = self.apply_read(&mut run.borrow_mut().run, read, moment, position);
            let task_id = match &read.kind {
                _native::ReadKind::Score { task_id, .. } | _native::ReadKind::Trial { task_id, .. } => {
                    Some(PyString::new(py, task_id))
                }
                _native::ReadKind::Closed { .. } => None,
            };
            Ok(Some((outcome_name(outcome), task_id)))
        })?;
        Ok(read.flatten())
    }

    /// Replay's lines `lines[start:]` (each with its line end, as a file gives them), applied
    /// in order up to the first that is left to Python: (its index, or the count of lines
    /// when none is; (index, output and a newline) for what each line applied writes, as
    /// `projections.replayer.Replayer` writes it: with `progress_every`, the run's progress
    /// where its event count is a multiple of it or the run is closed, then the run's summary
    /// where it is closed; the lines applied, redelivered and ignored, and the summaries
    /// written). A blank line is skipped. `revised`: where the id of each run whose summary was
    /// written is appended, as often as it was (its summary cache is then the most recently used).
    #[pyo3(signature = (runs, lines, start, progress_every=None, revised=None))]
    #[allow(clippy::type_complexity)]
    fn replay_lines<'py>(
        &self,
        runs: &Bound<'py, PyDict>,
        lines: &Bound<'py, PyList>,
        start: usize,
        progress_every: Option<i64>,
        revised: Option<&Bound<'py, PyList>>,
    ) -> PyResult<(usize, Vec<(usize, Bound<'py, PyBytes>)>, (u64, u64, u64, u64))> {
        let py = runs.py();
        let every = progress_every.filter(|&every| every != 0);
        let mut outputs = Vec::new();
        let (mut applied, mut redelivered, mut ignored, mut summaries) = (0, 0, 0, 0);
        let mut held = HashMap::default();
        for index in start..lines.len() {
            let line = lines.get_item(index)?;
            let bytes = line.downcast::<PyBytes>()?.as_bytes();
            if bytes.iter().all(|byte| b" \t\n\r\x0b\x0c".contains(byte)) {
                continue; // `bytes.isspace()`'s whitespace, as `projections.replayer.message_of`
            }
            let end = bytes.iter().rposition(|&byte| byte != b'\n' && byte != b'\r').map_or(0, |at| at + 1);
            match self.applied(runs, &mut held, &bytes[..end], None)? {
                Some((held, Outcome::Applied)) => {
                    applied += 1;
                    let mut native = held.borrow_mut();
                    let (closed, count) = (native.run.closed(), native.run.event_count);
                    if every.is_some_and(|every| closed || count % every == 0) {
                        let run = &native.run;
                        let progress = |out: &mut Vec<u8>| progress::write_progress(out, run, count, None);
                        outputs.push((index, written(py, progress, b"\n")));
                    }
                    if closed {
                        summaries += 1;
                        outputs.push((index, written(py, |out| native.write_summary(out), b"\n")));
                        if let Some(revised) = revised {
                            revised.append(PyString::new(py, &native.run.run_id))?;
                        }
                    }
                }
                Some((_, Outcome::Redelivery)) => redelivered += 1,
                Some((_, Outcome::Ignored)) => ignored += 1,
                // Refused (a run.started's, never read here) changes nothing: Python words it.
                Some((_, Outcome::Refused)) | None => {
                    return Ok((index, outputs, (applied, redelivered, ignored, summaries)))
                }
            }
        }
        Ok((lines.len(), outputs, (applied, redelivered, ignored, summaries)))
    }
}

impl FoldReader {
    fn cell(&self, value: &_native::Scalar) -> Cell {
        match value {
            _native::Scalar::Bool(flag) => Cell::boolean(*flag),
            _native::Scalar::Int(number) => Cell::number(*number as f64),
            _native::Scalar::Float(number) => Cell::number(*number),
            _native::Scalar::Text(text) => match self.nonfinite.iter().find(|(spelled, _)| spelled == text) {
                Some(&(_, number)) => Cell::number(number),
                None => Cell::LABEL,
            },
            _native::Scalar::Null => Cell::LABEL,
        }
    }

    /// `bytes` read as a message of a common type, and its moment, handed to `then`; None where
    /// the message is left to Python.
    fn read<R>(
        &self,
        bytes: &[u8],
        then: impl FnOnce(&_native::Read<'_>, Option<f64>) -> PyResult<R>,
    ) -> PyResult<Option<R>> {
        if bytes.len() > self.most {
            return Ok(None);
        }
        let Ok(text) = std::str::from_utf8(bytes) else {
            return Ok(None);
        };
        let Some(message) = _native::message(text) else {
            return Ok(None);
        };
        let Some(read) = _native::read(&message, &self.limits) else {
            return Ok(None);
        };
        let moment = match read.occurred_at {
            None => None,
            Some(at) => match _native::common_epoch_seconds(at) {
                Some(seconds) => Some(seconds),
                None => return Ok(None), // a form only Python's reading decides
            },
        };
        then(&read, moment).map(Some)
    }

    /// Apply a message read by `read` to `run`.
    fn apply_read(
        &self,
        run: &mut RunState,
        read: &_native::Read<'_>,
        moment: Option<f64>,
        position: Option<i64>,
    ) -> Outcome {
        match &read.kind {
            _native::ReadKind::Score { task_id, trial_id, metric_type, status, outputs } => {
                let cells: Vec<(&str, Cell)> = outputs.iter().map(|(name, value)| (*name, self.cell(value))).collect();
                let status = match status {
                    _native::ScoreStatus::Completed | _native::ScoreStatus::Partial => Status::Scored,
                    _native::ScoreStatus::TrialFailed => Status::TrialFailed,
                    _native::ScoreStatus::MetricFailed => Status::MetricFailed,
                };
                let event = Event::Score { task_id, trial_id, metric: metric_type, status, outputs: &cells };
                run.apply(read.event_id, &event, moment, position)
            }
            _native::ReadKind::Trial { task_id, trial_id, completed, error_type } => {
                let event = Event::Trial { task_id, trial_id, completed: *completed, error_type: *error_type };
                run.apply(read.event_id, &event, moment, position)
            }
            _native::ReadKind::Closed { reason } => {
                run.apply(read.event_id, &Event::Closed { reason }, moment, position)
            }
        }
    }

    /// Apply message `bytes` to its run in `runs` (made there when new): the run and the
    /// outcome; None where the message is left to Python. `held`: the runs of `runs` found so
    /// far by their ids, which a run of lines looks up without making a Python string.
    fn applied<'py>(
        &self,
        runs: &Bound<'py, PyDict>,
        held: &mut HashMap<String, Bound<'py, NativeRun>>,
        bytes: &[u8],
        position: Option<i64>,
    ) -> PyResult<Option<(Bound<'py, NativeRun>, Outcome)>> {
        let py = runs.py();
        self.read(bytes, |read, moment| {
            let run = match held.get(read.run_id) {
                Some(run) => run.clone(),
                None => {
                    let run_id = PyString::new(py, read.run_id);
                    let run = match runs.get_item(&run_id)? {
                        Some(run) => run.downcast_into::<NativeRun>()?,
                        None => {
                            let run = Bound::new(py, NativeRun::new(read.run_id))?;
                            runs.set_item(&run_id, &run)?;
                            run
                        }
                    };
                    held.insert(read.run_id.to_owned(), run.clone());
                    run
                }
            };
            let outcome = self.apply_read(&mut run.borrow_mut().run, read, moment, position);
            Ok((run, outcome))
        })
    }
}
