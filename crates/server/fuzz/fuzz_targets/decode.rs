//! Any bytes a client may send: framed and decoded as messages, read as a startup packet, and read as a
//! parameter of every type in both formats. Nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use numadb_server::protocol::frontend::{HEADER_BYTES, decode, decode_startup, frame};
use numadb_server::protocol::types::{Format, PgType, decode_param};
use numadb_storage::DataType;

const TYPES: [u32; 14] = [16, 18, 19, 20, 21, 23, 25, 26, 700, 701, 705, 1042, 1043, 1700];

fuzz_target!(|data: &[u8]| {
    let mut input = data;
    while let Ok(Some((tag, body))) = frame(input, 1 << 20) {
        let _ = decode(tag, body);
        input = &input[HEADER_BYTES + body.len()..];
    }
    let _ = decode_startup(data);
    if let Some((&selector, value)) = data.split_first() {
        let declared = PgType::from_oid(TYPES[usize::from(selector) % TYPES.len()]);
        let target = [DataType::Integer, DataType::BigInt, DataType::Double, DataType::Text, DataType::Boolean]
            [usize::from(selector >> 4) % 5];
        for format in [Format::Text, Format::Binary] {
            let _ = decode_param(Some(value), format, declared, target, 0);
            let _ = decode_param(Some(value), format, None, target, 0);
        }
    }
});
