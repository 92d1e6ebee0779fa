//! `NativeTask`: one native task state driven from Python, so that the tests can hold it to
//! `projections.fold.task.TaskState` score by score (`tests/projections/test_native_fold.py`).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyFloat, PyInt};

use super::records::Cell;
use super::task::{Declared, Key, KeyTally, Status, Tallies, TaskState};

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
        let status = match (status, failure) {
            ("completed" | "partial", _) => Status::Scored,
            ("failed", Some("trial")) => Status::TrialFailed,
            ("failed", Some("metric")) => Status::MetricFailed,
            _ => return Err(PyValueError::new_err(format!("not a score's status: {status} {failure:?}"))),
        };
        let cells =
            outputs.iter().map(|(name, value)| Ok((name.as_str(), cell_of(value)?))).collect::<PyResult<Vec<_>>>()?;
        self.task.record_score(trial_id, metric, status, &cells, seq, &mut self.eligible);
        Ok(())
    }

    /// Decide the keys afresh: `declared` is None for a task without declarations, else
    /// (its attempt keys in order, its excluded keys, every key it declares).
    #[pyo3(signature = (declared=None))]
    fn rekey(&mut self, declared: Option<(Vec<Key>, Vec<Key>, Vec<Key>)>) {
        let declared = declared.map(|(attempt_keys, excluded, every)| Declared {
            attempt_keys,
            excluded: excluded.into_iter().collect(),
            declared: every.into_iter().collect(),
        });
        self.task.rekey(declared.as_ref());
    }

    /// (metric, packed records, output names, spilled cells) of each metric, in order.
    fn metrics<'py>(
        &self,
        py: Python<'py>,
    ) -> Vec<(String, Bound<'py, PyBytes>, Vec<String>, Option<Bound<'py, PyBytes>>)> {
        self.task
            .metrics
            .iter()
            .map(|(name, columns)| {
                (
                    name.clone(),
                    PyBytes::new(py, &columns.packed),
                    columns.names.clone(),
                    columns.spilled.as_ref().map(|spilled| PyBytes::new(py, spilled)),
                )
            })
            .collect()
    }

    fn task_id(&self) -> String {
        self.task.task_id.clone()
    }

    fn trials(&self) -> Vec<String> {
        self.task.trials.clone()
    }

    fn first_score(&self) -> i64 {
        self.task.first_score
    }

    /// (key, n, c) of every key, in the order the task got them.
    fn tallies(&self) -> Vec<(Key, i64, i64)> {
        self.task.keys.iter().cloned().zip(self.task.counts.iter()).map(|(key, &(n, c))| (key, n, c)).collect()
    }

    /// Each eligible key's run-wide (solved, flaky, failed, unmeasured, moves).
    fn eligible(&self) -> Vec<(Key, (i64, i64, i64, i64, i64))> {
        let mut keys: Vec<_> = self.eligible.iter().collect();
        keys.sort_by(|a, b| a.0.cmp(b.0));
        keys.into_iter()
            .map(|(key, tally)| (key.clone(), (tally.solved, tally.flaky, tally.failed, tally.unmeasured, tally.moves)))
            .collect()
    }

    /// (trial index, value, sequence number) of the attempts of (metric, output).
    fn attempts(&self, metric: &str, output: &str) -> Vec<(i32, Option<f64>, i64)> {
        self.task.metric(metric).map(|columns| columns.attempts(output)).unwrap_or_default()
    }
}
