//! The EventLog contract suite (`weir_runtime::store_contract`) against
//! `MemoryLog`.

use std::sync::Arc;

use weir_runtime::store_contract::StoreFactory;
use weir_runtime::{EventLog, MemoryLog};

/// Makes `MemoryLog`s.
struct Memory;

impl StoreFactory for Memory {
    type Guard = ();

    fn make(&self, live_capacity: usize) -> (Arc<dyn EventLog>, ()) {
        (Arc::new(MemoryLog::with_live_capacity(live_capacity)), ())
    }

    /// Everything a `MemoryLog` does happens on the runtime's own tasks.
    fn keeps_virtual_time(&self) -> bool {
        true
    }
}

weir_runtime::store_contract_tests!(Memory);
