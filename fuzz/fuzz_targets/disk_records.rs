//! Whatever is on disk: a txn record and a snapshot payload (storage's
//! envelope, then the core's body) decode without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = wazoo_core::txn::TxnRecord::decode(data);
    if let Ok(envelope) = wazoo_storage::read_snapshot_envelope(data) {
        let _ = wazoo_core::snapshot::read_snapshot_body(envelope.version, envelope.body);
    }
    // The body on its own too, so the fuzzer need not find the envelope.
    let _ = wazoo_core::snapshot::read_snapshot_body(2, data);
});
