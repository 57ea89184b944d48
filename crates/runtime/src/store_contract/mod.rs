//! The contract every [`EventLog`] keeps, as a test suite any store crate
//! runs unchanged (feature `store-contract`).
//!
//! A store's test binary says how to make a fresh store, a [`StoreFactory`],
//! and expands [`store_contract_tests!`](crate::store_contract_tests) once;
//! that gives one `#[test]` per check, named after it, so each check passes
//! or fails on its own:
//!
//! ```
//! use std::sync::Arc;
//! use weir_runtime::{EventLog, MemoryLog};
//!
//! fn memory(live_capacity: usize) -> (Arc<dyn EventLog>, ()) {
//!     (Arc::new(MemoryLog::with_live_capacity(live_capacity)), ())
//! }
//!
//! weir_runtime::store_contract_tests!(memory);
//! # fn main() {}
//! ```
//!
//! The checks are the functions of [`checks`] (the log's rules: appends,
//! reads, listing, artifacts, retention, subscriptions) and of [`properties`]
//! (random runs through the [`Scheduler`](crate::Scheduler), with proptest:
//! 1,000 cases each unless `PROPTEST_CASES` says otherwise). What they are
//! built from is in [`support`]. What only one store can promise (a schema
//! migration, surviving a SIGKILL) belongs in that store's own tests.

pub mod checks;
pub mod properties;
pub mod support;

use std::sync::Arc;

use crate::EventLog;

/// How the contract suite makes the stores it checks: a fresh, empty one per
/// check (and per property case).
///
/// Any `Fn(usize) -> (Arc<dyn EventLog>, G)` is one; implement the trait
/// yourself to say that the store [keeps virtual time](Self::keeps_virtual_time).
pub trait StoreFactory {
    /// Whatever must live as long as the store, such as the temporary
    /// directory holding its file; dropped after the check.
    type Guard;

    /// A fresh, empty store whose live channels keep `live_capacity`
    /// batches per run.
    fn make(&self, live_capacity: usize) -> (Arc<dyn EventLog>, Self::Guard);

    /// Whether every operation of the store completes on the tokio runtime,
    /// waiting on nothing outside it (a thread, a socket). Under paused time
    /// the runtime's clock then moves only when tasks sleep, so the suite can
    /// also check which of the tool's end, its timeout and a cancel wins when
    /// the script's timing leaves no doubt. A store that waits on a thread
    /// lets the clock jump while it works, so that check does not apply.
    fn keeps_virtual_time(&self) -> bool {
        false
    }
}

impl<F, G> StoreFactory for F
where
    F: Fn(usize) -> (Arc<dyn EventLog>, G),
{
    type Guard = G;

    fn make(&self, live_capacity: usize) -> (Arc<dyn EventLog>, G) {
        self(live_capacity)
    }
}

/// Expands to the whole contract suite against the stores `$stores` makes
/// (an expression whose type implements [`StoreFactory`]): one `#[test]`
/// function per check, named after the check. Expand it once per store, in
/// a module of its own if the names would clash.
///
/// The list below is the suite: a new check is a function in
/// [`checks`] or [`properties`] and a line here.
#[macro_export]
macro_rules! store_contract_tests {
    ($stores:expr) => {
        $crate::store_contract_tests! {
            @checks $stores;
            appends_that_break_the_log_are_refused_and_change_nothing,
            waits_for_input_are_kept_in_the_summary,
            reads_page_through_a_log,
            reads_past_the_end_find_nothing,
            runs_are_listed_newest_first_and_filtered,
            summaries_keep_the_arguments_a_run_was_given,
            runs_keep_their_owner_and_are_listed_by_it,
            runs_keep_their_parent,
            runs_keep_their_resume_record,
            artifacts_are_write_once_hashed_and_read_by_range,
            retention_deletes_finished_runs_and_their_artifacts_only,
            a_lagging_subscriber_catches_up_from_the_store,
            subscribing_to_an_unknown_run_is_an_error,
            a_run_is_started_with_its_first_events,
        }
        $crate::store_contract_tests! {
            @properties $stores;
            runs_keep_their_invariants,
            subscribe_from_any_k_yields_exactly_k_onwards,
        }
    };
    (@checks $stores:expr; $($check:ident,)*) => {
        $(
            #[test]
            fn $check() {
                $crate::store_contract::checks::$check(&$stores);
            }
        )*
    };
    // `file!()` is the caller's file: proptest keeps failing seeds beside it.
    (@properties $stores:expr; $($property:ident,)*) => {
        $(
            #[test]
            fn $property() {
                $crate::store_contract::properties::$property(&$stores, file!());
            }
        )*
    };
}
