//! The fold's state in native code, held byte for byte to the Python fold's
//! (`projections/fold`, `projections/packed`): a task's packed records (`records`) and its
//! state and key rules (`task`); a run's state and `apply` (`run`); its `run.summary` and
//! `run.progress` encoded (`summary`, from the summary cache of `summary_cache`, `progress`, over the eligible keys' figures of
//! `key_figures`, written as orjson writes JSON: `json`); its stored form, as
//! `projections.storage` writes and reads it (`stored`). `door` reaches them from Python.

pub mod applied;
pub mod door;
pub mod json;
pub mod key_figures;
pub mod progress;
pub mod records;
pub mod run;
pub mod sharing;
pub mod snug;
pub mod stored;
pub mod summary;
pub mod summary_cache;
pub mod task;
pub mod task_index;
pub mod trial_ids;
