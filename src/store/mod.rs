//! The results store: one SQLite file of whole result documents ([`db`], its schema steps in
//! [`migrations`]), a run saved point by point while it measures ([`save`], with a
//! [`recovery`] file when the database cannot take it), the history of saved runs
//! ([`history`]: list, export, import).

pub mod agent;
pub mod db;
pub mod history;
pub mod migrations;
pub mod recovery;
pub mod save;
