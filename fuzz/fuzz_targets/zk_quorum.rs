//! Apache ZooKeeper's quorum protocol (`wazoo-zkquorum`): the fuzzer's
//! bytes are what a ZooKeeper peer could send on the election port (a
//! handshake, a framed notification) and on the quorum port (a stream of
//! QuorumPackets, each payload read in both directions, and the snapshot
//! after SNAP). Nothing may panic; what decodes re-encodes to bytes that
//! decode to the same record (`wazoo_zkquorum::fuzzing`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    wazoo_zkquorum::fuzzing::check_decoders(data);
});
