//! A snapshot as a leader sends it: the fuzzer's bytes become the data of
//! a SNAP message, which goes through the link's frame decoder and then
//! the snapshot loader a learner runs before installing it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wazoo::core::zab::{Message, WIRE_VERSION};
use wazoo::quorum::{self, Frame};

const KIND_ZAB: u8 = 1;
const SNAP: u8 = 7;

fuzz_target!(|data: &[u8]| {
    let (zxid, body) = data.split_first_chunk::<8>().unwrap_or((&[0; 8], data));
    let mut frame = vec![KIND_ZAB, WIRE_VERSION, SNAP];
    frame.extend_from_slice(zxid);
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(body);
    let Ok(Frame::Zab(Message::Snap { data, .. })) = quorum::decode_frame(&frame) else {
        panic!("a well-framed SNAP decodes");
    };
    let _ = wazoo::member::read_snapshot_payload(&data);
});
