//! Election notifications: the fuzzer's bytes are the body of a
//! NOTIFICATION frame, so every input exercises the vote decoder; what
//! decodes is a notification and re-encodes to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wazoo::core::zab::{Message, WIRE_VERSION};

const NOTIFICATION: u8 = 1;

fuzz_target!(|data: &[u8]| {
    let mut frame = vec![WIRE_VERSION, NOTIFICATION];
    frame.extend_from_slice(data);
    if let Ok(msg) = Message::decode(&frame) {
        assert!(matches!(msg, Message::Notification(_)), "{msg:?}");
        assert_eq!(msg.to_bytes(), frame, "a notification has one encoding");
    }
});
