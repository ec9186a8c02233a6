//! Every ZAB message a peer sends: decoding never panics, and what decodes
//! re-encodes to the same message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wazoo::core::zab::Message;

fuzz_target!(|data: &[u8]| {
    if let Ok(msg) = Message::decode(data) {
        let bytes = msg.to_bytes();
        assert_eq!(Message::decode(&bytes).as_ref(), Ok(&msg));
    }
});
