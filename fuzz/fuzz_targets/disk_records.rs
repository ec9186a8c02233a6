//! Whatever is on disk: a txn record and a snapshot payload decode without
//! panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = wazoo::core::txn::TxnRecord::decode(data);
    let _ = wazoo::member::read_snapshot_payload(data);
});
