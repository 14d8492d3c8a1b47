//! Any statement text: split, measured for depth, and offered to the catalog emulation. Nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use numadb_server::{compat, sql_text};

fuzz_target!(|data: &[u8]| {
    let Ok(sql) = std::str::from_utf8(data) else { return };
    if let Ok(statements) = sql_text::split_statements(sql) {
        for statement in statements {
            let _ = sql_text::check_complexity(statement);
            let _ = sql_text::words(statement, 4);
            let _ = compat::recognise(statement);
        }
    }
});
