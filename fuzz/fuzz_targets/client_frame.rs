//! Whatever a client sends: the frame check, the connect request and every
//! request body decode without panicking, and what decodes re-encodes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wazoo_proto::frame::{self, ClientFrame};
use wazoo_proto::{ConnectRequest, Jute};

fuzz_target!(|data: &[u8]| {
    let _ = frame::check(data, wazoo_proto::DEFAULT_MAX_BUFFER);
    let _ = ConnectRequest::from_bytes(data);
    if let Ok(ClientFrame::Request { xid, req }) = frame::decode_client_frame(data) {
        let mut out = Vec::new();
        frame::write_request(&mut out, xid, &req);
        let again = frame::decode_client_frame(&out[4..]).expect("re-encoded frame decodes");
        assert_eq!(again, ClientFrame::Request { xid, req });
    }
});
